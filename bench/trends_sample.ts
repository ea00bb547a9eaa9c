/**
 * Cost of the hourly trend sample (server/trends/sampling.ts) on PostgreSQL at fleet scale: seeds a fresh
 * database with `--nodes` nodes in 10 groups, `--policies` released policies bound to them (each released in
 * a month ago but `--recent` of them in the last hours, which get rollout points), and a result per reached pair
 * (a mix of statuses), then
 * prints the plan of every statement one sample runs (EXPLAIN ANALYZE, inside a transaction rolled back) and
 * the time of a real sample. Also the plans of the releases-in-flight and failing-settings reads.
 *
 *   SVC_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres deno run -A bench/trends_sample.ts \
 *     [--nodes 10000] [--policies 20] [--recent 5]
 *
 * Numbers, not pass/fail: what to look for is aggregate scans of the narrow counter table and index use for
 * the per-rollout pairs, never a plan that grows with the product of nodes and policies beyond the reached
 * pairs of the recent rollouts.
 */
import { parseArgs } from "node:util";
import type { Db, Queryable } from "../server/db/db.ts";
import { sampleTrends } from "../server/trends/sampling.ts";
import { releasesInFlight } from "../server/trends/points.ts";
import { failingSettings } from "../server/domain/compliance.ts";
import { freshDb, TEST_DATABASE_URL } from "../tests/helpers/db.ts";

const { values: args } = parseArgs({
  args: Deno.args,
  options: {
    nodes: { type: "string", default: "10000" },
    policies: { type: "string", default: "20" },
    recent: { type: "string", default: "5" },
  },
});
const NODES = Number(args.nodes);
const POLICIES = Number(args.policies);
const RECENT = Number(args.recent);
const RETENTION = { hourlyRetentionDays: 14, dailyRetentionDays: 400 };

if (!TEST_DATABASE_URL) {
  console.error("set SVC_TEST_DATABASE_URL to a PostgreSQL role that may create databases");
  Deno.exit(2);
}

/** Statements `fn` runs against `db`, recorded and then rolled back. */
async function recorded(db: Db, fn: (db: Db) => Promise<unknown>): Promise<Array<[string, unknown[]]>> {
  const seen: Array<[string, unknown[]]> = [];
  const rollback = new Error("rollback");
  await db.transaction(async (tx) => {
    const record: Queryable = {
      query(sql, params) {
        seen.push([sql, [...(params ?? [])]]);
        return tx.query(sql, params);
      },
    };
    await fn({ ...db, ...record, transaction: (f) => f(record) } as Db);
    throw rollback;
  }).catch((err) => {
    if (err !== rollback) throw err;
  });
  return seen;
}

/** EXPLAIN ANALYZE of each statement, each in a transaction rolled back. */
async function explain(db: Db, statements: Array<[string, unknown[]]>): Promise<void> {
  for (const [sql, params] of statements) {
    if (/pg_advisory/.test(sql)) continue;
    const rollback = new Error("rollback");
    await db.transaction(async (tx) => {
      const plan = await tx.query<{ "QUERY PLAN": string }>(
        `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${sql}`,
        params,
      );
      console.log(`\n--- ${sql.replace(/\s+/g, " ").trim().slice(0, 160)}`);
      for (const row of plan) console.log(row["QUERY PLAN"]);
      throw rollback;
    }).catch((err) => {
      if (err !== rollback) throw err;
    });
  }
}

const database = await freshDb("postgres");
const db = database.db;
try {
  const started = performance.now();
  await db.query("INSERT INTO node_groups (name) SELECT 'group-' || g FROM generate_series(1, 10) g");
  await db.query(
    `INSERT INTO nodes (name, status, last_seen)
     SELECT 'node-' || i, (ARRAY['online', 'offline', 'degraded', 'unknown'])[1 + i % 4],
            CASE WHEN i % 10 = 0 THEN NULL ELSE now() - (i % 50) * interval '1 minute' END
       FROM generate_series(1, $1) i`,
    [NODES],
  );
  await db.query(
    `INSERT INTO node_group_members (node_id, node_group_id)
     SELECT n.id, g.id FROM nodes n JOIN node_groups g ON g.name = 'group-' || (1 + abs(hashtext(n.name)) % 10)`,
  );
  await db.query(
    `INSERT INTO policies (name, type, content, state)
     SELECT 'policy-' || i, 'Firefox', '{"DisableTelemetry":true}', 'released' FROM generate_series(1, $1) i`,
    [POLICIES],
  );
  // Every policy bound to half the groups: each reaches about half the fleet.
  await db.query(
    `INSERT INTO policy_bindings (policy_id, node_group_id, state)
     SELECT p.id, g.id, 'enabled' FROM policies p JOIN node_groups g
         ON (abs(hashtext(p.name || g.name)) % 2) = 0`,
  );
  await db.query(
    `INSERT INTO compliance_results (node_id, policy_id, policy_version, status, items)
     SELECT pr.node_id, pr.policy_id, 1, s.status,
            jsonb_build_array(jsonb_build_object('schema_id', '', 'key', 'DisableTelemetry', 'status', s.status))
       FROM policy_reach pr
      CROSS JOIN LATERAL (SELECT (ARRAY['compliant', 'compliant', 'compliant', 'non_compliant', 'error'])
                                   [1 + abs(hashtext(pr.node_id::text || pr.policy_id::text)) % 5] AS status) s`,
  );
  await db.query(
    `UPDATE policy_rollouts SET started_at = now() - interval '30 days'
      WHERE policy_id IN (SELECT id FROM policies ORDER BY name OFFSET $1)`,
    [RECENT],
  );
  await db.query("ANALYZE");
  const [{ pairs }] = await db.query<{ pairs: number }>("SELECT count(*)::int AS pairs FROM policy_reach");
  console.log(
    `seeded ${NODES} nodes, ${POLICIES} policies, ${pairs} reached pairs with results in ${
      Math.round(performance.now() - started)
    } ms`,
  );

  await explain(db, await recorded(db, (d) => sampleTrends(d, RETENTION)));
  await explain(db, await recorded(db, (d) => releasesInFlight(d, 72)));
  await explain(db, await recorded(db, (d) => failingSettings(d, 5)));

  for (let i = 0; i < 3; i++) {
    await db.query("DELETE FROM fleet_trend_points; DELETE FROM policy_trend_points");
    const t = performance.now();
    const outcome = await sampleTrends(db, RETENTION);
    console.log(
      `sample ${i + 1}: ${Math.round(performance.now() - t)} ms (${outcome.rollouts} rollout points)`,
    );
  }
} finally {
  await database.dispose();
}
