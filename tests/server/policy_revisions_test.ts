/**
 * Revisions of released policies over HTTP: what agents receive (the hub's delivered policies) never changes
 * while a revision is prepared or discarded, and changes exactly once, with one resync and a version bump,
 * when it is released. Refusals (draft policies, invalid content, stale base version, missing permission),
 * the audit trail, and duplication of a policy into a new draft.
 */
import assert from "node:assert/strict";
import { loadDeliveredPolicies } from "../../server/hub/snapshot.ts";
import { expectStatus } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

const OLD = JSON.stringify({ DisableTelemetry: true });
const NEW = JSON.stringify({ DisableTelemetry: true, DisablePocket: true });

domain.domainTest(
  "a released policy changes through a revision without a gap",
  async ({ db, server, admin }, t) => {
    const group = await domain.createGroup(admin, "lab");
    const policy = await domain.createPolicy(admin, { name: "Browser", type: "Firefox", content: OLD });
    await domain.setState(admin, policy.id, "released");
    await domain.bind(admin, policy.id, group, { enabled: true });
    const released = expectStatus(await admin.request("GET", `/api/v1/policies/all/${policy.id}`), 200);
    const delivered = async () => {
      const rows = await loadDeliveredPolicies(db, [group]);
      assert.equal(rows.length, 1);
      return { content: rows[0].content, version: rows[0].version, description: rows[0].description };
    };
    const before = await delivered();
    const eventsBefore = (await domain.hubEvents(db)).length;
    const path = `/api/v1/policies/all/${policy.id}/revision`;

    await t.step("no revision at first: 404 naming it, and the policy says none is pending", async () => {
      const missing = expectStatus(await admin.request("GET", path), 404);
      assert.match(missing.error.message, /pending revision of policy .* not found/);
      assert.equal(released.revision_pending, false);
    });

    await t.step("saving a revision leaves the delivered content, version and hub alone", async () => {
      const rev = expectStatus(await admin.request("PUT", path, { content: NEW, description: "v2" }), 200);
      assert.equal(rev.base_version, released.version);
      assert.equal(rev.content, '{"DisablePocket":true,"DisableTelemetry":true}', "stored canonical");
      assert.equal(rev.description, "v2");
      assert.deepEqual(await delivered(), before);
      assert.equal((await domain.hubEvents(db)).length, eventsBefore, "a revision publishes nothing");
      const read = expectStatus(await admin.request("GET", `/api/v1/policies/all/${policy.id}`), 200);
      assert.equal(read.revision_pending, true);
      assert.equal(read.content, released.content);
      assert.equal(read.version, released.version);
      const listed = expectStatus(await admin.request("GET", "/api/v1/policies/all?name=Browser"), 200);
      assert.equal(listed.items[0].revision_pending, true);
    });

    await t.step(
      "invalid revision content is refused naming the field; the revision keeps its content",
      async () => {
        const bad = expectStatus(
          await admin.request("PUT", path, { content: JSON.stringify({ DisableTelemetry: "yes" }) }),
          422,
        );
        assert.match(bad.error.message, /content/);
        assert.equal(
          expectStatus(await admin.request("GET", path), 200).content,
          '{"DisablePocket":true,"DisableTelemetry":true}',
        );
      },
    );

    await t.step("releasing needs policy:release", async () => {
      const editor = await server.loginAs({ permissions: ["policy:view", "policy:edit"] });
      expectStatus(await editor.request("POST", `${path}/release`, {}), 403);
      assert.deepEqual(await delivered(), before);
    });

    await t.step("release: content replaced, version bumped, exactly one resync, revision gone", async () => {
      const after = expectStatus(await admin.request("POST", `${path}/release`, {}), 200);
      assert.equal(after.version, released.version + 1);
      assert.equal(after.state, "released");
      assert.equal(after.revision_pending, false);
      assert.deepEqual(await delivered(), {
        content: '{"DisablePocket":true,"DisableTelemetry":true}',
        version: released.version + 1,
        description: "v2",
      });
      const events = (await domain.hubEvents(db)).slice(eventsBefore);
      assert.deepEqual(events.map((e) => e.groups), [[group]], "one resync for the reached group");
      expectStatus(await admin.request("GET", path), 404);
      expectStatus(await admin.request("POST", `${path}/release`, {}), 404);
    });

    await t.step("discard leaves the policy untouched", async () => {
      const current = expectStatus(await admin.request("GET", `/api/v1/policies/all/${policy.id}`), 200);
      const seen = (await domain.hubEvents(db)).length;
      expectStatus(await admin.request("PUT", path, { content: OLD }), 200);
      expectStatus(await admin.request("DELETE", path), 204);
      const again = expectStatus(await admin.request("GET", `/api/v1/policies/all/${policy.id}`), 200);
      assert.deepEqual({ ...again, revision_pending: false }, { ...current, revision_pending: false });
      assert.equal(again.revision_pending, false);
      assert.equal((await domain.hubEvents(db)).length, seen, "a discard publishes nothing");
      expectStatus(await admin.request("DELETE", path), 404);
    });

    await t.step("a revision started from an older version is refused at release", async () => {
      expectStatus(await admin.request("PUT", path, { content: OLD }), 200);
      await db.query("UPDATE policy_revisions SET base_version = base_version - 1 WHERE policy_id = $1", [
        policy.id,
      ]);
      const stale = expectStatus(await admin.request("POST", `${path}/release`, {}), 409);
      assert.match(stale.error.message, /started from version \d+ but the policy is at version \d+ now/);
      expectStatus(await admin.request("DELETE", path), 204);
    });

    await t.step("each step is audited with its action", async () => {
      const rows = await db.query<{ action: string; outcome: string; resource_id: string; details: unknown }>(
        `SELECT action, outcome, resource_id, details FROM audit_logs WHERE action LIKE 'policy.revision_%'
       ORDER BY id`,
      );
      const actions = rows.map((r) => `${r.action}:${r.outcome}`);
      for (
        const expected of [
          "policy.revision_save:success",
          "policy.revision_save:failure",
          "policy.revision_release:success",
          "policy.revision_discard:success",
        ]
      ) assert.ok(actions.includes(expected), `${expected} in ${actions.join(", ")}`);
      const release = rows.find((r) => r.action === "policy.revision_release" && r.outcome === "success")!;
      assert.equal(release.resource_id, policy.id);
      const details = release.details as { from_version: number; to_version: number };
      assert.deepEqual([details.from_version, details.to_version], [released.version, released.version + 1]);
    });
  },
);

domain.domainTest(
  "revisions are refused for drafts and invalid at release; duplicate makes a draft",
  async ({ db, server, admin }, t) => {
    const draft = await domain.createPolicy(admin, { name: "Draft", type: "Firefox", content: OLD });

    await t.step("a draft is edited directly, not through a revision", async () => {
      const refused = expectStatus(
        await admin.request("PUT", `/api/v1/policies/all/${draft.id}/revision`, { content: NEW }),
        409,
      );
      assert.match(refused.error.message, /only a released policy .*current state: draft/);
    });

    await t.step("a revision of a policy moved back to draft cannot be released", async () => {
      await domain.setState(admin, draft.id, "released");
      expectStatus(
        await admin.request("PUT", `/api/v1/policies/all/${draft.id}/revision`, { content: NEW }),
        200,
      );
      await domain.setState(admin, draft.id, "archived");
      const refused = expectStatus(
        await admin.request("POST", `/api/v1/policies/all/${draft.id}/revision/release`, {}),
        409,
      );
      assert.match(refused.error.message, /policy is archived now/);
      const read = expectStatus(await admin.request("GET", `/api/v1/policies/all/${draft.id}`), 200);
      assert.equal(read.content, '{"DisableTelemetry":true}');
    });

    await t.step("content that no longer validates is refused at release, nothing changes", async () => {
      await domain.setState(admin, draft.id, "draft");
      await domain.setState(admin, draft.id, "released");
      await db.query("UPDATE policy_revisions SET content = $2 WHERE policy_id = $1", [
        draft.id,
        JSON.stringify({ DisableTelemetry: "no" }),
      ]);
      const refused = expectStatus(
        await admin.request("POST", `/api/v1/policies/all/${draft.id}/revision/release`, {}),
        422,
      );
      assert.match(refused.error.message, /revision cannot be released: content/);
      const read = expectStatus(await admin.request("GET", `/api/v1/policies/all/${draft.id}`), 200);
      assert.equal(read.content, '{"DisableTelemetry":true}');
      assert.equal(read.revision_pending, true);
    });

    await t.step("duplicate copies type, description and content into a new draft", async () => {
      const copy = expectStatus(
        await admin.request("POST", `/api/v1/policies/all/${draft.id}/duplicate`, {}),
        201,
      );
      assert.equal(copy.name, "Draft (copy)");
      assert.equal(copy.state, "draft");
      assert.equal(copy.version, 1);
      assert.equal(copy.type, "Firefox");
      assert.equal(copy.content, '{"DisableTelemetry":true}');
      const second = expectStatus(
        await admin.request("POST", `/api/v1/policies/all/${draft.id}/duplicate`, {}),
        201,
      );
      assert.equal(second.name, "Draft (copy 2)");
      const named = expectStatus(
        await admin.request("POST", `/api/v1/policies/all/${draft.id}/duplicate`, { name: "Mine" }),
        201,
      );
      assert.equal(named.name, "Mine");
      const taken = expectStatus(
        await admin.request("POST", `/api/v1/policies/all/${draft.id}/duplicate`, { name: "Mine" }),
        409,
      );
      assert.match(taken.error.message, /Mine/);
      const viewer = await server.loginAs({ permissions: ["policy:view"] });
      expectStatus(await viewer.request("POST", `/api/v1/policies/all/${draft.id}/duplicate`, {}), 403);
    });

    await t.step("deleting the policy removes its revision", async () => {
      await domain.setState(admin, draft.id, "archived");
      expectStatus(await admin.request("DELETE", `/api/v1/policies/all/${draft.id}`), 204);
      const [row] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM policy_revisions");
      assert.equal(row.n, 0);
    });
  },
);
