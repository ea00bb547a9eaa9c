/**
 * The reach model checked against its definition, recomputed from scratch: `policy_reach` as stored vs. a
 * released policy, an enabled binding, the node in the bound group; the per-node counters vs. the reached
 * pairs counted by their latest result. And the switch that sends every binding and policy change through the
 * refresh queue (migrations/0022), so small tests exercise the path a 100,000-node change takes.
 */
import assert from "node:assert/strict";
import { type Db, openPostgres, type Queryable } from "../../server/db/mod.ts";
import type { TestDb } from "../helpers/db.ts";

/** policy_reach as stored, and as the definition computes it from bindings, memberships and policy states. */
export async function reach(q: Queryable): Promise<{ stored: string[]; expected: string[] }> {
  const stored = await q.query<{ k: string }>(
    "SELECT policy_id || '/' || node_id || '/' || paths AS k FROM policy_reach ORDER BY 1",
  );
  const expected = await q.query<{ k: string }>(
    `SELECT b.policy_id || '/' || m.node_id || '/' || count(*) AS k
       FROM policy_bindings b JOIN node_group_members m ON m.node_group_id = b.node_group_id
       JOIN policies p ON p.id = b.policy_id
      WHERE b.state = 'enabled' AND p.state = 'released'
      GROUP BY b.policy_id, m.node_id ORDER BY 1`,
  );
  return { stored: stored.map((r) => r.k), expected: expected.map((r) => r.k) };
}

/** The per-node counters as stored, and recounted from the reached pairs and their results. */
export async function counters(q: Queryable): Promise<{ stored: string[]; expected: string[] }> {
  const stored = await q.query<{ k: string }>(
    `SELECT concat_ws('/', node_id, compliant, non_compliant, inapplicable, error, unknown, unreported) AS k
       FROM node_compliance_counts ORDER BY 1`,
  );
  const expected = await q.query<{ k: string }>(
    `WITH pairs AS (
       SELECT b.policy_id, m.node_id
         FROM policy_bindings b JOIN node_group_members m ON m.node_group_id = b.node_group_id
         JOIN policies p ON p.id = b.policy_id
        WHERE b.state = 'enabled' AND p.state = 'released' GROUP BY 1, 2
     )
     SELECT concat_ws('/', n.id,
              count(*) FILTER (WHERE r.status = 'compliant'), count(*) FILTER (WHERE r.status = 'non_compliant'),
              count(*) FILTER (WHERE r.status = 'inapplicable'), count(*) FILTER (WHERE r.status = 'error'),
              count(*) FILTER (WHERE r.status = 'unknown'),
              count(*) FILTER (WHERE pairs.node_id IS NOT NULL AND r.node_id IS NULL)) AS k
       FROM nodes n LEFT JOIN pairs ON pairs.node_id = n.id
       LEFT JOIN compliance_results r ON r.node_id = pairs.node_id AND r.policy_id = pairs.policy_id
      GROUP BY n.id ORDER BY 1`,
  );
  return { stored: stored.map((r) => r.k), expected: expected.map((r) => r.k) };
}

/** Fails unless the model equals a from-scratch recomputation. */
export async function assertReachConsistent(q: Queryable, label: string): Promise<void> {
  const r = await reach(q);
  assert.deepEqual(r.stored, r.expected, `policy_reach after ${label}`);
  const c = await counters(q);
  assert.deepEqual(c.stored, c.expected, `node_compliance_counts after ${label}`);
}

/**
 * Fails unless the counters count the pairs stored in policy_reach by their latest result: true at every
 * commit, also while policy_reach itself lags the binding tables.
 */
export async function assertCountersFollowPairs(q: Queryable, label: string): Promise<void> {
  const stored = await q.query<{ k: string }>(
    `SELECT concat_ws('/', node_id, compliant, non_compliant, inapplicable, error, unknown, unreported) AS k
       FROM node_compliance_counts ORDER BY 1`,
  );
  const expected = await q.query<{ k: string }>(
    `SELECT concat_ws('/', n.id,
              count(*) FILTER (WHERE r.status = 'compliant'), count(*) FILTER (WHERE r.status = 'non_compliant'),
              count(*) FILTER (WHERE r.status = 'inapplicable'), count(*) FILTER (WHERE r.status = 'error'),
              count(*) FILTER (WHERE r.status = 'unknown'),
              count(*) FILTER (WHERE pr.node_id IS NOT NULL AND r.node_id IS NULL)) AS k
       FROM nodes n LEFT JOIN policy_reach pr ON pr.node_id = n.id
       LEFT JOIN compliance_results r ON r.node_id = pr.node_id AND r.policy_id = pr.policy_id
      GROUP BY n.id ORDER BY 1`,
  );
  assert.deepEqual(stored.map((r) => r.k), expected.map((r) => r.k), `counters vs stored pairs ${label}`);
}

/** Nodes policy `policyId` reaches in the model as stored. */
export async function reachedNodes(q: Queryable, policyId: string): Promise<number> {
  const [row] = await q.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM policy_reach WHERE policy_id = $1",
    [policyId],
  );
  return row.n;
}

/** Rows waiting in the refresh queue. */
export async function pendingRefreshes(q: Queryable): Promise<number> {
  const [row] = await q.query<{ n: number }>("SELECT count(*)::int AS n FROM reach_refresh_queue");
  return row.n;
}

/**
 * A handle on the test database on which every binding and policy change queues its reach refresh however few
 * nodes it concerns (`svc.reach_inline_nodes` 0). PGlite: its one session, so `info.db` itself. PostgreSQL: a
 * database default, so a new pool, which the caller closes (`close`; a no-op for PGlite).
 */
export async function queueEveryChange(info: TestDb): Promise<{ db: Db; close(): Promise<void> }> {
  if (info.driver === "pglite") {
    await info.db.query("SET svc.reach_inline_nodes = 0");
    return { db: info.db, close: () => Promise.resolve() };
  }
  const name = new URL(info.url).pathname.slice(1);
  await info.db.query(`ALTER DATABASE ${name} SET svc.reach_inline_nodes = 0`);
  const db = await openPostgres(info.url, { max: 6 });
  return { db, close: () => db.close() };
}

/** Seeds `count` nodes in `groupId` (two statements: a node's counters exist before it joins); ids in order. */
export async function seedNodes(
  q: Queryable,
  options: { prefix: string; count: number; groupId: string },
): Promise<string[]> {
  const rows = await q.query<{ id: string }>(
    "INSERT INTO nodes (name) SELECT $1 || '-' || i FROM generate_series(1, $2::int) i RETURNING id",
    [options.prefix, options.count],
  );
  const ids = rows.map((r) => r.id).sort();
  await q.query(
    "INSERT INTO node_group_members (node_id, node_group_id) SELECT unnest($1::uuid[]), $2",
    [ids, options.groupId],
  );
  return ids;
}

/**
 * A small fleet whose reach overlaps: 4 groups, 3 released policies bound (enabled) to the first 3 groups, and
 * 40 nodes each in two neighbouring groups, so most nodes are reached by a policy through two bindings.
 */
export async function seedOverlappingFleet(
  db: Queryable,
): Promise<{ groups: { id: string }[]; policies: { id: string }[]; nodes: { id: string }[] }> {
  const groups = await db.query<{ id: string }>(
    "INSERT INTO node_groups (name) SELECT 'g' || i FROM generate_series(1, 4) i RETURNING id",
  );
  const policies = await db.query<{ id: string }>(
    `INSERT INTO policies (name, type, content, state) SELECT 'p' || i, 'Firefox', '{}', 'released'
     FROM generate_series(1, 3) i RETURNING id`,
  );
  const nodes = await db.query<{ id: string }>(
    "INSERT INTO nodes (name) SELECT 'node' || i FROM generate_series(1, 40) i RETURNING id",
  );
  for (const [i, n] of nodes.entries()) {
    await db.query(
      "INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2), ($1, $3)",
      [n.id, groups[i % 4].id, groups[(i + 1) % 4].id],
    );
  }
  for (const p of policies) {
    for (const g of groups.slice(0, 3)) {
      await db.query(
        "INSERT INTO policy_bindings (policy_id, node_group_id, state) VALUES ($1, $2, 'enabled')",
        [p.id, g.id],
      );
    }
  }
  return { groups, policies, nodes };
}
