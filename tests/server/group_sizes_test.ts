/**
 * Node group sizes (`node_count` of the group and binding lists) are kept as signed deltas per membership
 * statement (migrations/0022) and folded by the read-model worker: exact after every kind of membership change,
 * before and after folding.
 */
import assert from "node:assert/strict";
import type { Queryable } from "../../server/db/db.ts";
import { foldGroupSizes } from "../../server/domain/node_groups.ts";
import { expectStatus } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

/** Sizes as the lists read them, and as counted from the memberships. */
async function sizes(q: Queryable): Promise<{ kept: string[]; counted: string[] }> {
  const kept = await q.query<{ k: string }>(
    `SELECT g.name || '=' || coalesce(sum(s.n), 0) AS k FROM node_groups g
       LEFT JOIN node_group_sizes s ON s.node_group_id = g.id GROUP BY g.name ORDER BY 1`,
  );
  const counted = await q.query<{ k: string }>(
    `SELECT g.name || '=' || count(m.node_id) AS k FROM node_groups g
       LEFT JOIN node_group_members m ON m.node_group_id = g.id GROUP BY g.name ORDER BY 1`,
  );
  return { kept: kept.map((r) => r.k), counted: counted.map((r) => r.k) };
}

async function assertSizes(q: Queryable, label: string): Promise<void> {
  const { kept, counted } = await sizes(q);
  assert.deepEqual(kept, counted, label);
}

domain.domainTest(
  "group sizes follow members added, removed, nodes and groups deleted, and survive folding",
  async ({ db, admin }) => {
    const office = await domain.createGroup(admin, "office");
    const lab = await domain.createGroup(admin, "lab");
    const nodes = [];
    for (let i = 0; i < 5; i++) {
      nodes.push(await domain.seedNode(db, { name: `pc-${i}`, groups: [office] }));
    }
    expectStatus(
      await admin.request("POST", `/api/v1/node-groups/${lab}/members`, { node_ids: nodes.slice(0, 3) }),
      200,
    );
    await assertSizes(db, "after adding");
    const policy = await domain.createPolicy(admin, { name: "browser" });
    const binding = await domain.bind(admin, policy.id, lab);
    assert.equal(
      expectStatus(await admin.request("GET", `/api/v1/policy-bindings/${binding}`), 200).node_count,
      3,
    );
    const list = expectStatus(
      await admin.request("GET", "/api/v1/node-groups?sort=node_count&order=desc"),
      200,
    );
    assert.deepEqual(list.items.map((g: { name: string; node_count: number }) => [g.name, g.node_count]), [
      ["office", 5],
      ["lab", 3],
    ]);
    await foldGroupSizes(db);
    const [{ rows }] = await db.query<{ rows: number }>(
      "SELECT count(*)::int AS rows FROM node_group_sizes",
    );
    assert.equal(rows, 2, "one row per group once folded");
    await assertSizes(db, "after folding");
    const removed = await admin.request("DELETE", `/api/v1/node-groups/${lab}/members/${nodes[0]}`);
    assert.ok(removed.status === 200 || removed.status === 204, removed.text);
    await db.query("DELETE FROM nodes WHERE id = $1", [nodes[1]]);
    await assertSizes(db, "after a removal and a node deletion");
    const gone = await admin.request("DELETE", `/api/v1/node-groups/${office}?force=true`);
    assert.ok(gone.status === 200 || gone.status === 204, gone.text);
    await foldGroupSizes(db);
    await assertSizes(db, "after deleting a group and folding");
  },
);
