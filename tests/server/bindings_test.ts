/**
 * Bindings over HTTP: every transition of the binding state table allowed and refused, enabling needs a
 * released policy, one binding per policy and group, priority bounds, permissions.
 */
import assert from "node:assert/strict";
import { updateBinding } from "../../server/domain/bindings.ts";
import { changePolicyState } from "../../server/domain/policies.ts";
import { expectStatus } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

domain.domainTest(
  "binding lifecycle: created disabled, enabled only for released policies, disabled, deleted",
  async ({ server, admin }, t) => {
    const group = await domain.createGroup(admin, "office");
    const policy = await domain.createPolicy(admin, { name: "p" });
    let bindingId = "";
    const put = (body: unknown) => admin.request("PUT", `/api/v1/policy-bindings/${bindingId}`, body);

    await t.step("(created) → disabled, whatever the request says", async () => {
      const created = expectStatus(
        await admin.request("POST", "/api/v1/policy-bindings", {
          policy_id: policy.id,
          node_group_id: group,
          priority: 5,
        }),
        201,
      );
      bindingId = created.id;
      assert.equal(created.state, "disabled");
      assert.equal(created.priority, 5);
      assert.equal(created.policy_name, "p");
      assert.equal(created.node_group_name, "office");
      const withState = expectStatus(
        await admin.request("POST", "/api/v1/policy-bindings", {
          policy_id: policy.id,
          node_group_id: group,
          state: "enabled",
        }),
        400,
      );
      assert.equal(withState.error.fields[0].field, "state", "a create cannot ask for enabled");
    });

    await t.step("disabled → enabled is refused while the policy is a draft or archived", async () => {
      const draft = expectStatus(await put({ state: "enabled" }), 409);
      assert.match(
        draft.error.message,
        /only be enabled when its policy is released \(current policy state: draft\)/,
      );
      await domain.setState(admin, policy.id, "released");
      await domain.setState(admin, policy.id, "archived");
      assert.match(
        expectStatus(await put({ state: "enabled" }), 409).error.message,
        /current policy state: archived/,
      );
      await domain.setState(admin, policy.id, "draft");
      await domain.setState(admin, policy.id, "released");
    });

    await t.step("disabled → enabled for a released policy; enabled → disabled", async () => {
      assert.equal(expectStatus(await put({ state: "enabled" }), 200).state, "enabled");
      assert.equal(expectStatus(await put({ state: "enabled" }), 200).state, "enabled", "idempotent");
      assert.equal(expectStatus(await put({ state: "disabled" }), 200).state, "disabled");
      assert.equal(expectStatus(await put({ state: "disabled" }), 200).state, "disabled");
    });

    await t.step("priority changes stay within bounds", async () => {
      assert.equal(expectStatus(await put({ priority: -20 }), 200).priority, -20);
      assert.equal(expectStatus(await put({ priority: 1_000_001 }), 400).error.fields[0].field, "priority");
      assert.equal(expectStatus(await put({ state: "on" }), 400).error.fields[0].field, "state");
    });

    await t.step("one binding per policy and node group", async () => {
      const dup = expectStatus(
        await admin.request("POST", "/api/v1/policy-bindings", {
          policy_id: policy.id,
          node_group_id: group,
        }),
        409,
      );
      assert.match(dup.error.message, /already bound to this node group/);
    });

    await t.step("policy and group must exist", async () => {
      const res = expectStatus(
        await admin.request("POST", "/api/v1/policy-bindings", {
          policy_id: crypto.randomUUID(),
          node_group_id: group,
        }),
        422,
      );
      assert.equal(res.error.fields[0].field, "policy_id");
      const res2 = expectStatus(
        await admin.request("POST", "/api/v1/policy-bindings", {
          policy_id: policy.id,
          node_group_id: crypto.randomUUID(),
        }),
        422,
      );
      assert.equal(res2.error.fields[0].field, "node_group_id");
    });

    await t.step("list filters and default order (highest priority first)", async () => {
      const other = await domain.createGroup(admin, "lab");
      await domain.bind(admin, policy.id, other, { priority: 100 });
      const list = expectStatus(
        await admin.request("GET", `/api/v1/policy-bindings?policy_id=${policy.id}`),
        200,
      );
      assert.deepEqual(list.items.map((b: { priority: number }) => b.priority), [100, -20]);
      const byGroup = expectStatus(
        await admin.request("GET", `/api/v1/policy-bindings?node_group_id=${other}`),
        200,
      );
      assert.equal(byGroup.total, 1);
    });

    await t.step("delete", async () => {
      expectStatus(await admin.request("DELETE", `/api/v1/policy-bindings/${bindingId}`), 204);
      expectStatus(await admin.request("DELETE", `/api/v1/policy-bindings/${bindingId}`), 404);
    });

    await t.step("permissions: binding:view cannot create, binding:create cannot toggle", async () => {
      const viewer = await server.loginAs({ permissions: ["binding:view"] });
      expectStatus(await viewer.request("GET", "/api/v1/policy-bindings"), 200);
      expectStatus(
        await viewer.request("POST", "/api/v1/policy-bindings", {
          policy_id: policy.id,
          node_group_id: group,
        }),
        403,
      );
      const creator = await server.loginAs({ permissions: ["binding:create"] });
      const id = expectStatus(
        await creator.request("POST", "/api/v1/policy-bindings", {
          policy_id: policy.id,
          node_group_id: group,
        }),
        201,
      ).id;
      expectStatus(
        await creator.request("PUT", `/api/v1/policy-bindings/${id}`, { state: "enabled" }),
        403,
      );
      expectStatus(await creator.request("DELETE", `/api/v1/policy-bindings/${id}`), 403);
    });
  },
);

domain.domainTest(
  "enabling a binding and moving its policy to draft cannot both win a race",
  async ({ db, admin }) => {
    const group = await domain.createGroup(admin, "g");
    for (let round = 0; round < 10; round++) {
      const policy = await domain.createPolicy(admin, { name: `race-${round}` });
      await domain.setState(admin, policy.id, "released");
      const binding = await domain.bind(admin, policy.id, group);
      const results = await Promise.allSettled([
        db.transaction((tx) => updateBinding(tx, binding, { state: "enabled" })),
        db.transaction((tx) => changePolicyState(tx, policy.id, "draft")),
      ]);
      const [row] = await db.query<{ state: string; binding_state: string }>(
        `SELECT p.state, b.state AS binding_state FROM policies p JOIN policy_bindings b ON b.policy_id = p.id
       WHERE p.id = $1`,
        [policy.id],
      );
      assert.ok(
        !(row.state === "draft" && row.binding_state === "enabled"),
        `round ${round}: a draft policy ended up with an enabled binding (${results.map((r) => r.status)})`,
      );
      assert.ok(results.some((r) => r.status === "fulfilled"));
    }
  },
);
