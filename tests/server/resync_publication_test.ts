/**
 * Exactly the mutations the spec lists publish a resync (a `hub_events` row for the affected node groups),
 * inside the transaction of the change: policy update / state change / deprecation (when the policy reaches
 * groups), binding enable / disable / priority change, and deletion of an enabled binding. Creates,
 * membership edits, renames, settings, node deletion and imports of drafts publish nothing.
 */
import assert from "node:assert/strict";
import { changePolicyState } from "../../server/domain/policies.ts";
import { expectStatus, putBinding } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

domain.domainTest(
  "exactly the listed mutations publish resyncs, for the right node groups",
  async ({ db, admin }, t) => {
    let seen = 0;
    /** Asserts the events published since the last call. */
    const published = async (expected: string[][], what: string) => {
      const events = await domain.hubEvents(db);
      const fresh = events.slice(seen).map((e) => e.groups);
      seen = events.length;
      assert.deepEqual(fresh, expected.map((g) => [...g].sort()), what);
    };
    const sorted = (...ids: string[]) => [...ids].sort();

    const a = await domain.createGroup(admin, "a");
    const b = await domain.createGroup(admin, "b");
    const c = await domain.createGroup(admin, "c");
    const policy = await domain.createPolicy(admin, { name: "p" });
    const ab = await domain.bind(admin, policy.id, a);
    const bb = await domain.bind(admin, policy.id, b);
    const cb = await domain.bind(admin, policy.id, c);
    const node = await domain.seedNode(db, { name: "n1" });

    await t.step("creates publish nothing", () => published([], "policy, group and binding creation"));

    await t.step("state change of a policy that reaches no group publishes nothing", async () => {
      await domain.setState(admin, policy.id, "released");
      await published([], "release without enabled bindings");
    });

    await t.step("enabling and disabling a binding publish for its group", async () => {
      await putBinding(admin, ab, { state: "enabled" });
      await putBinding(admin, bb, { state: "enabled" });
      await published([[a], [b]], "enable");
      await putBinding(admin, bb, { state: "enabled" });
      await published([], "a no-op update publishes nothing");
    });

    await t.step("a priority change publishes for an enabled binding only", async () => {
      await putBinding(admin, ab, { priority: 7 });
      await putBinding(admin, cb, { priority: 7 });
      await published([[a]], "priority change");
    });

    await t.step("deprecation and state change publish for every group the policy reaches", async () => {
      expectStatus(
        await admin.request("POST", `/api/v1/policies/all/${policy.id}/deprecate`, { message: "old" }),
        200,
      );
      await published([sorted(a, b)], "deprecate");
      await domain.setState(admin, policy.id, "archived");
      await published([sorted(a, b)], "archive");
    });

    await t.step("membership edits, renames and settings publish nothing", async () => {
      expectStatus(
        await admin.request("POST", `/api/v1/node-groups/${a}/members`, { node_ids: [node] }),
        200,
      );
      expectStatus(await admin.request("DELETE", `/api/v1/node-groups/${a}/members/${node}`), 204);
      expectStatus(await admin.request("PUT", `/api/v1/node-groups/${a}`, { name: "a2" }), 200);
      expectStatus(
        await admin.request("PUT", "/api/v1/settings/agent", {
          enabled: false,
          cooldown_seconds: 600,
          message: "m",
        }),
        200,
      );
      expectStatus(await admin.request("POST", `/api/v1/node-groups/${a}/tokens`), 201);
      await published([], "membership, rename, settings, token");
    });

    await t.step("disable and delete of bindings", async () => {
      await putBinding(admin, bb, { state: "disabled" });
      await published([[b]], "disable");
      expectStatus(await admin.request("DELETE", `/api/v1/policy-bindings/${cb}`), 204);
      await published([], "deleting a disabled binding");
      expectStatus(await admin.request("DELETE", `/api/v1/policy-bindings/${ab}`), 204);
      await published([[a]], "deleting an enabled binding");
    });

    await t.step("draft edits reach nobody; node deletion publishes no resync", async () => {
      const draft = await domain.createPolicy(admin, { name: "draft" });
      await domain.bind(admin, draft.id, b);
      expectStatus(await admin.request("PUT", `/api/v1/policies/all/${draft.id}`, { description: "x" }), 200);
      expectStatus(await admin.request("DELETE", `/api/v1/nodes/${node}`), 204);
      await published([], "draft edit and node delete");
    });

    await t.step(
      "force-deleting a group deletes its enabled bindings, which publishes for that group",
      async () => {
        const live = await domain.createPolicy(admin, { name: "live" });
        await domain.setState(admin, live.id, "released");
        await domain.bind(admin, live.id, c, { enabled: true });
        await published([[c]], "enable");
        expectStatus(await admin.request("DELETE", `/api/v1/node-groups/${c}?force=true`), 204);
        await published([[c]], "forced group delete");
      },
    );

    await t.step("refused mutations publish nothing", async () => {
      const live = expectStatus(await admin.request("GET", "/api/v1/policies/all?name=live"), 200).items[0];
      await domain.bind(admin, live.id, b, { enabled: true });
      await published([[b]], "enable");
      expectStatus(
        await admin.request("PUT", `/api/v1/policies/all/${live.id}/state`, { state: "released" }),
        409,
      );
      expectStatus(
        await admin.request("PUT", `/api/v1/policies/all/${live.id}/state`, { state: "draft" }),
        409,
      );
      expectStatus(await admin.request("DELETE", `/api/v1/policies/all/${live.id}`), 409);
      await published([], "refusals");
    });

    await t.step("revisions increase by one per event", async () => {
      const events = await domain.hubEvents(db);
      assert.deepEqual(events.map((e) => e.revision), events.map((_, i) => i + 1));
      const [state] = await db.query<{ revision: number }>("SELECT revision FROM hub_state");
      assert.equal(state.revision, events.length);
    });
  },
);

domain.domainTest(
  "a resync is part of the change's transaction: a rollback leaves no event",
  async ({ db, admin }) => {
    const group = await domain.createGroup(admin, "g");
    const policy = await domain.createPolicy(admin, { name: "p" });
    await domain.setState(admin, policy.id, "released");
    await domain.bind(admin, policy.id, group, { enabled: true });
    const before = await domain.hubEvents(db);
    await assert.rejects(
      db.transaction(async (tx) => {
        await changePolicyState(tx, policy.id, "archived");
        const [row] = await tx.query<{ n: number }>("SELECT count(*)::int AS n FROM hub_events");
        assert.equal(row.n, before.length + 1, "published inside the transaction");
        throw new Error("abort");
      }),
      /abort/,
    );
    assert.deepEqual(await domain.hubEvents(db), before);
    const [p] = await db.query<{ state: string }>("SELECT state FROM policies WHERE id = $1", [policy.id]);
    assert.equal(p.state, "released");
  },
);
