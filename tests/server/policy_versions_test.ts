/**
 * The version history of a policy over HTTP: every release (of a draft and of a revision) records the version
 * with who released it; rollback starts a revision from an old version's content, audited as
 * `policy.rollback`, and its release adds a new version that names the restored one, leaving the old rows
 * untouched. Refusals: a pending revision, the current version, an archived policy, a missing version, and a
 * caller without policy:edit.
 */
import assert from "node:assert/strict";
import { loadDeliveredPolicies } from "../../server/hub/snapshot.ts";
import { expectStatus } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

const V1 = JSON.stringify({ DisableTelemetry: true });
const V2 = JSON.stringify({ DisableTelemetry: true, DisablePocket: true });

domain.domainTest(
  "released versions are kept and a rollback is a new revision, never a rewrite",
  async ({ db, server, admin }, t) => {
    const group = await domain.createGroup(admin, "lab");
    const policy = await domain.createPolicy(admin, { name: "Browser", type: "Firefox", content: V1 });
    const base = `/api/v1/policies/all/${policy.id}`;
    const versions = async () => expectStatus(await admin.request("GET", `${base}/versions`), 200).items;

    await t.step("a draft has no history; releasing it records version 1 with who released it", async () => {
      assert.deepEqual(await versions(), []);
      await domain.setState(admin, policy.id, "released");
      await domain.bind(admin, policy.id, group, { enabled: true });
      const [v1] = await versions();
      assert.equal(v1.version, 1);
      assert.equal(v1.released_by, admin.user.username);
      assert.equal(v1.origin, "release");
      assert.equal(v1.restored_from, null);
      assert.equal(v1.content, undefined, "the list carries no content");
      const full = expectStatus(await admin.request("GET", `${base}/versions/1`), 200);
      assert.equal(full.content, '{"DisableTelemetry":true}');
    });

    await t.step("releasing a revision records version 2", async () => {
      expectStatus(
        await admin.request("PUT", `${base}/revision`, { content: V2, description: "pocket" }),
        200,
      );
      expectStatus(await admin.request("POST", `${base}/revision/release`, {}), 200);
      const [v2, v1] = await versions();
      assert.deepEqual([v2.version, v2.origin, v2.description], [2, "revision", "pocket"]);
      assert.equal(v1.version, 1);
    });

    await t.step(
      "rollback to version 1 starts a revision; nodes keep version 2 until it is released",
      async () => {
        const answer = expectStatus(await admin.request("POST", `${base}/versions/1/restore`), 200);
        assert.equal(answer.revision.restored_from, 1);
        assert.equal(answer.revision.content, '{"DisableTelemetry":true}');
        assert.equal(answer.revision.base_version, 2);
        assert.equal(answer.policy.version, 2);
        const [delivered] = await loadDeliveredPolicies(db, [group]);
        assert.equal(delivered.version, 2);
        const [row] = await db.query<
          { action: string; details: Record<string, unknown>; resource_name: string }
        >(
          "SELECT action, details, resource_name FROM audit_logs WHERE action = 'policy.rollback'",
        );
        assert.equal(row.resource_name, "Browser");
        assert.equal(row.details.restores_version, 1);
        assert.equal(row.details.from_version, 2);
      },
    );

    await t.step(
      "a second rollback while the revision is pending is refused, naming what to do",
      async () => {
        const refused = expectStatus(await admin.request("POST", `${base}/versions/2/restore`), 409);
        assert.match(refused.error.message, /revision of "Browser" is pending .*release or discard it first/);
      },
    );

    await t.step(
      "releasing the rollback adds version 3 naming version 1; versions 1 and 2 are unchanged",
      async () => {
        const before = await versions();
        const released = expectStatus(await admin.request("POST", `${base}/revision/release`, {}), 200);
        assert.equal(released.version, 3);
        assert.equal(released.content, '{"DisableTelemetry":true}');
        const after = await versions();
        assert.deepEqual(after.slice(1), before, "history is never rewritten");
        assert.deepEqual([after[0].version, after[0].origin, after[0].restored_from], [3, "rollback", 1]);
        const [row] = await db.query<{ details: Record<string, unknown> }>(
          "SELECT details FROM audit_logs WHERE action = 'policy.revision_release' ORDER BY id DESC LIMIT 1",
        );
        assert.equal(row.details.restores_version, 1);
        const [delivered] = await loadDeliveredPolicies(db, [group]);
        assert.equal(delivered.version, 3);
      },
    );

    await t.step("the released version itself and a missing version are refused", async () => {
      const same = expectStatus(await admin.request("POST", `${base}/versions/3/restore`), 409);
      assert.match(same.error.message, /version 3 is the released version/);
      const missing = expectStatus(await admin.request("POST", `${base}/versions/9/restore`), 404);
      assert.match(missing.error.message, /released version 9 of policy .* not found/);
      const bad = expectStatus(await admin.request("GET", `${base}/versions/x`), 400);
      assert.match(bad.error.message, /version in the path must be a version number/);
    });

    await t.step("rollback needs policy:edit (attacked with policy:view and policy:release)", async () => {
      const viewer = await server.loginAs({ permissions: ["policy:view", "policy:release"] });
      expectStatus(await viewer.request("GET", `${base}/versions`), 200);
      expectStatus(await viewer.request("POST", `${base}/versions/1/restore`), 403);
      expectStatus(await admin.request("GET", `${base}/revision`), 404);
    });

    await t.step("an archived policy is refused; a draft is edited to the old content", async () => {
      const other = await domain.createPolicy(admin, { name: "Other", type: "Firefox", content: V1 });
      const path = `/api/v1/policies/all/${other.id}`;
      await domain.setState(admin, other.id, "released");
      await domain.setState(admin, other.id, "archived");
      const refused = expectStatus(await admin.request("POST", `${path}/versions/1/restore`), 409);
      assert.match(refused.error.message, /archived; move it to draft first/);
      await domain.setState(admin, other.id, "draft");
      expectStatus(await admin.request("PUT", path, { content: V2 }), 200);
      const restored = expectStatus(await admin.request("POST", `${path}/versions/1/restore`), 200);
      assert.equal(restored.revision, null);
      assert.equal(restored.policy.state, "draft");
      assert.equal(restored.policy.content, '{"DisableTelemetry":true}');
      assert.equal(restored.policy.version, 3);
    });
  },
);
