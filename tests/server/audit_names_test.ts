/**
 * The audit log names things and says what changed: edits record `details.changes` (before → after of the
 * fields that changed; lists as added/removed; policy contents by setting), and the list answers the current
 * name of every id an entry mentions (resource, ids in the details), falling back to the bare id once the
 * thing is deleted.
 */
import assert from "node:assert/strict";
import { expectStatus, putBinding } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

interface Entry {
  action: string;
  resource_type: string;
  resource_id: string;
  resource_name: string;
  details: Record<string, unknown> & { changes?: Record<string, unknown> };
  names: Record<string, { type: string; name: string }>;
}

domain.domainTest("audit entries name objects and say what changed", async ({ db, server, admin }, t) => {
  const latest = async (action: string, resourceType?: string): Promise<Entry> => {
    const q = new URLSearchParams({
      action,
      per_page: "1",
      ...(resourceType ? { resource_type: resourceType } : {}),
    });
    const page = expectStatus(await admin.request("GET", `/api/v1/audit-logs?${q}`), 200);
    assert.ok(page.items.length, `an entry for ${action}`);
    return page.items[0];
  };
  const lab = await domain.createGroup(admin, "lab");
  let node = "";

  await t.step("binding priority and state: from → to, named policy → group", async () => {
    const policy = await domain.createPolicy(admin, { name: "Browser", type: "Firefox" });
    await domain.setState(admin, policy.id, "released");
    const binding = await domain.bind(admin, policy.id, lab);
    await putBinding(admin, binding, { priority: 10, state: "enabled" });
    const entry = await latest("update", "binding");
    assert.equal(entry.resource_name, "Browser → lab");
    assert.deepEqual(entry.details.changes, {
      state: { from: "disabled", to: "enabled" },
      priority: { from: 0, to: 10 },
    });
  });

  await t.step("a draft edit names the settings added, removed and changed, and the rename", async () => {
    const draft = await domain.createPolicy(admin, {
      name: "Draft",
      type: "Firefox",
      content: JSON.stringify({ DisableTelemetry: true, DisablePocket: true }),
    });
    expectStatus(
      await admin.request("PUT", `/api/v1/policies/all/${draft.id}`, {
        name: "Draft v2",
        content: JSON.stringify({ DisableTelemetry: false, DisableFirefoxStudies: true }),
      }),
      200,
    );
    const entry = await latest("update", "policy");
    assert.equal(entry.resource_name, "Draft v2");
    assert.deepEqual(entry.details.changes, {
      name: { from: "Draft", to: "Draft v2" },
      content: {
        added: ["DisableFirefoxStudies"],
        removed: ["DisablePocket"],
        changed: ["DisableTelemetry"],
      },
      version: { from: 1, to: 2 },
    });
  });

  await t.step("a node group rename and its new members, by name", async () => {
    expectStatus(await admin.request("PUT", `/api/v1/node-groups/${lab}`, { name: "lab-2" }), 200);
    const rename = await latest("update", "node_group");
    assert.deepEqual(rename.details.changes, { name: { from: "lab", to: "lab-2" } });
    node = await domain.seedNode(db, { name: "ws-17" });
    expectStatus(
      await admin.request("POST", `/api/v1/node-groups/${lab}/members`, { node_ids: [node] }),
      200,
    );
    const added = await latest("node_group.add_members");
    assert.deepEqual(added.details.added, [node]);
    assert.deepEqual(added.names[node], { type: "node", name: "ws-17" });
    assert.deepEqual(added.names[lab], { type: "node_group", name: "lab-2" });
  });

  await t.step("once the node is deleted, the entry falls back to its id", async () => {
    expectStatus(await admin.request("DELETE", `/api/v1/nodes/${node}`), 204);
    const again = await latest("node_group.add_members");
    assert.equal(again.names[node], undefined);
    assert.deepEqual(again.details.added, [node]);
    const deleted = await latest("delete", "node");
    assert.equal(deleted.resource_name, "ws-17", "the delete row keeps the name it was written with");
  });

  await t.step("a role's permissions as added/removed; a user's flag from → to", async () => {
    const role = expectStatus(
      await admin.request("POST", "/api/v1/roles", { name: "Readers", permissions: ["policy:view"] }),
      201,
    );
    expectStatus(
      await admin.request("PUT", `/api/v1/roles/${role.id}`, { permissions: ["node:view", "policy:view"] }),
      200,
    );
    const entry = await latest("update", "role");
    assert.deepEqual(entry.details.changes, { permissions: { added: ["node:view"], removed: [] } });
    const user = await server.loginAs({ permissions: ["policy:view"], username: "carol" });
    expectStatus(await admin.request("PUT", `/api/v1/users/${user.user.id}`, { enabled: false }), 200);
    const disabled = await latest("update", "user");
    assert.equal(disabled.resource_name, "carol");
    assert.deepEqual(disabled.details.changes, { enabled: { from: true, to: false } });
  });

  await t.step("an edit that changes nothing records no changes", async () => {
    const g = await domain.createGroup(admin, "same");
    expectStatus(await admin.request("PUT", `/api/v1/node-groups/${g}`, { name: "same" }), 200);
    const entry = await latest("update", "node_group");
    assert.equal(entry.details.changes, undefined);
  });
});
