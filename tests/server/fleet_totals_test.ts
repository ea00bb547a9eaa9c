/**
 * The fleet totals kept as signed deltas (migrations/0024): the compliance totals equal the sums over
 * node_compliance_counts, and the node status totals the nodes counted by status, at every committed state,
 * while reports, memberships, binding and policy changes (through the reach queue), node enrollments, status
 * changes and deletions run concurrently with queue workers and folds. And the dashboard's certificate buckets,
 * counted through the expiry index, equal the node list's bucket expression over every node.
 */
import assert from "node:assert/strict";
import type { Queryable } from "../../server/db/db.ts";
import { refreshReachStep } from "../../server/domain/reach.ts";
import { fleetSummary } from "../../server/domain/compliance.ts";
import { foldFleetTotals, foldNodeStatusSizes } from "../../server/db/fleet_totals.ts";
import { certificateExpiryCounts, nodeStatusCounts } from "../../server/domain/dashboard.ts";
import { EXPIRY_BUCKET_SQL } from "../../server/domain/nodes.ts";
import { dbTest } from "../helpers/db.ts";
import { assertCountersFollowPairs, queueEveryChange, seedOverlappingFleet } from "./reach_helpers.ts";

/** Totals as kept and as counted, read in one statement (one snapshot). */
async function totals(q: Queryable): Promise<{ kept: string; counted: string }> {
  const [row] = await q.query<{ kept: string; counted: string }>(
    `SELECT (SELECT concat_ws('/', coalesce(sum(compliant), 0), coalesce(sum(non_compliant), 0),
                     coalesce(sum(inapplicable), 0), coalesce(sum(error), 0), coalesce(sum(unknown), 0),
                     coalesce(sum(unreported), 0), coalesce(sum(nodes), 0), coalesce(sum(bad), 0),
                     coalesce(sum(good), 0), coalesce(sum(none), 0))
               FROM fleet_compliance_sizes)
            || ' ' || (SELECT coalesce(string_agg(status || '=' || n, ',' ORDER BY status), '')
                         FROM (SELECT status, sum(n) AS n FROM node_status_sizes GROUP BY 1 HAVING sum(n) <> 0) s)
              AS kept,
            (SELECT concat_ws('/', coalesce(sum(compliant), 0), coalesce(sum(non_compliant), 0),
                     coalesce(sum(inapplicable), 0), coalesce(sum(error), 0), coalesce(sum(unknown), 0),
                     coalesce(sum(unreported), 0), count(*), count(*) FILTER (WHERE error + non_compliant > 0),
                     count(*) FILTER (WHERE error + non_compliant = 0 AND unknown + unreported = 0
                                        AND compliant + inapplicable > 0),
                     count(*) FILTER (WHERE compliant + non_compliant + inapplicable + error + unknown
                                            + unreported = 0))
               FROM node_compliance_counts)
            || ' ' || (SELECT coalesce(string_agg(status || '=' || n, ',' ORDER BY status), '')
                         FROM (SELECT status, count(*) AS n FROM nodes GROUP BY 1) s) AS counted`,
  );
  return row;
}

dbTest(
  "fleet totals equal the per-node counters and node statuses at every commit, under concurrent changes and folds",
  async (_db, _t, info) => {
    const { db, close } = await queueEveryChange(info);
    try {
      const { groups, policies, nodes } = await seedOverlappingFleet(db);
      while (await refreshReachStep(db, { batchNodes: 10 }));
      const statuses = ["compliant", "non_compliant", "inapplicable", "error", "unknown"];
      for (const [i, n] of nodes.entries()) {
        if (i % 4 === 3) continue; // some pairs stay unreported
        await db.query(
          "INSERT INTO compliance_results (node_id, policy_id, status) VALUES ($1, $2, $3)",
          [n.id, policies[i % 3].id, statuses[i % 5]],
        );
      }
      const start = await totals(db);
      assert.equal(start.kept, start.counted, "after setup");
      assert.notEqual(start.counted.split(" ")[0], "0/0/0/0/0/0/40/0/0/40", "setup reaches and reports");

      const changes: Array<(q: Queryable) => Promise<unknown>> = [];
      for (const [i, n] of nodes.entries()) {
        if (i % 3 === 0) {
          changes.push((q) =>
            q.query("DELETE FROM node_group_members WHERE node_id = $1 AND node_group_id = $2", [
              n.id,
              groups[i % 4].id,
            ])
          );
        }
        // Reports: new results, status changes, and the same status again (no change to count).
        changes.push((q) =>
          q.query(
            `INSERT INTO compliance_results (node_id, policy_id, status) VALUES ($1, $2, $3)
             ON CONFLICT (node_id, policy_id) DO UPDATE SET status = EXCLUDED.status`,
            [n.id, policies[(i + 1) % 3].id, statuses[(i * 7) % 5]],
          )
        );
        if (i % 4 === 1) {
          changes.push((q) =>
            q.query("UPDATE nodes SET status = $2, last_seen = now() WHERE id = $1", [
              n.id,
              ["online", "degraded", "offline"][i % 3],
            ])
          );
          // A heartbeat: no status change, nothing appended.
          changes.push((q) => q.query("UPDATE nodes SET last_seen = now() WHERE id = $1", [n.id]));
        }
      }
      for (const [i, g] of groups.entries()) {
        changes.push((q) =>
          q.query("UPDATE policy_bindings SET state = $3 WHERE node_group_id = $1 AND policy_id = $2", [
            g.id,
            policies[i % 3].id,
            i % 2 === 0 ? "disabled" : "enabled",
          ])
        );
        changes.push((q) =>
          q.query(
            `INSERT INTO policy_bindings (policy_id, node_group_id, state) VALUES ($1, $2, 'enabled')
             ON CONFLICT (policy_id, node_group_id) DO UPDATE SET state = 'enabled'`,
            [policies[(i + 1) % 3].id, g.id],
          )
        );
        // An enrollment into the group: a node, its counters, its membership.
        changes.push(async (q) => {
          const [n] = await q.query<{ id: string }>(
            "INSERT INTO nodes (name, status) VALUES ($1, 'online') RETURNING id",
            [`new${i}`],
          );
          await q.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [
            n.id,
            g.id,
          ]);
        });
      }
      changes.push((q) => q.query("UPDATE policies SET state = 'archived' WHERE id = $1", [policies[1].id]));
      changes.push((q) => q.query("DELETE FROM nodes WHERE id = $1", [nodes[7].id]));
      changes.push((q) =>
        q.query("DELETE FROM nodes WHERE id = ANY ($1::uuid[])", [[nodes[20].id, nodes[21].id]])
      );
      // A change rolled back leaves no delta behind.
      changes.push(async (q) => {
        await q.query("DELETE FROM nodes WHERE id = $1", [nodes[30].id]);
        throw new Error("rolled back on purpose");
      });

      let changing = true;
      const mismatches: string[] = [];
      let checks = 0;
      const worker = async () => {
        while (changing) {
          try {
            if (!await refreshReachStep(db, { batchNodes: 4 })) await new Promise((r) => setTimeout(r, 5));
          } catch (err) {
            // A batch that loses a deadlock is rolled back whole and taken again.
            assert.match(String(err), /deadlock/, String(err));
          }
        }
      };
      const folder = async () => {
        while (changing) {
          await foldFleetTotals(db);
          await foldNodeStatusSizes(db);
          await new Promise((r) => setTimeout(r, 3));
        }
      };
      const checker = async () => {
        while (changing) {
          const t = await totals(db);
          checks++;
          if (t.kept !== t.counted) mismatches.push(`${t.kept} ≠ ${t.counted}`);
        }
      };
      const background = [worker(), worker(), folder(), checker()];
      const outcomes = await Promise.allSettled(changes.map((change) =>
        db.transaction(async (tx) => {
          await change(tx);
          await tx.query("SELECT pg_sleep(0.01)");
        })
      ));
      changing = false;
      await Promise.all(background);
      for (const o of outcomes) {
        if (o.status === "rejected") {
          assert.match(String(o.reason), /deadlock|rolled back on purpose/, String(o.reason));
        }
      }
      assert.ok(outcomes.filter((o) => o.status === "fulfilled").length >= changes.length / 2);
      assert.ok(checks > 0);
      assert.deepEqual(mismatches, [], "totals read while changes committed");
      await assertCountersFollowPairs(db, "concurrent changes");
      while (await refreshReachStep(db, { batchNodes: 4 }));
      const end = await totals(db);
      assert.equal(end.kept, end.counted, "after the queue drained");
      await foldFleetTotals(db);
      await foldNodeStatusSizes(db);
      const folded = await totals(db);
      assert.equal(folded.kept, folded.counted, "after a fold");
      const [rows] = await db.query<{ fleet: number; statuses: number }>(
        `SELECT (SELECT count(*)::int FROM fleet_compliance_sizes) AS fleet,
                (SELECT count(*)::int FROM node_status_sizes) AS statuses`,
      );
      assert.ok(rows.fleet <= 1 && rows.statuses <= 4, `folded to a row each: ${JSON.stringify(rows)}`);
      // The readers agree with the counters.
      const summary = await fleetSummary(db);
      const [c] = await db.query<{ nodes: number; compliant: number }>(
        "SELECT count(*)::int AS nodes, coalesce(sum(compliant), 0)::int AS compliant FROM node_compliance_counts",
      );
      assert.equal(summary.nodes.total, c.nodes);
      assert.equal(summary.results.compliant, c.compliant);
      assert.equal((await nodeStatusCounts(db)).total, c.nodes);
    } finally {
      await close();
    }
  },
);

dbTest(
  "certificate expiry counts through the index equal the bucket expression over every node",
  async (db) => {
    await db.query(
      `INSERT INTO nodes (name, status, cert_serial, cert_not_after)
     SELECT 'n' || i, 'online', CASE WHEN i % 11 = 0 THEN NULL ELSE to_hex(4096 + i) END,
            CASE WHEN i % 13 = 0 THEN NULL ELSE now() + (i % 200 - 20) * interval '1 day' END
       FROM generate_series(1, 400) i`,
    );
    // Revoked certificates in every dated bucket, one without an expiry, and one that no node holds.
    await db.query(
      `INSERT INTO revoked_certificates (serial)
     SELECT to_hex(4096 + i) FROM generate_series(1, 400) i WHERE i % 7 = 0
     UNION ALL SELECT 'abcdef0123'`,
    );
    const rows = await db.query<{ key: string; n: number }>(
      `SELECT ${EXPIRY_BUCKET_SQL} AS key, count(*)::int AS n FROM nodes n GROUP BY 1`,
    );
    const expected: Record<string, number> = { total: 0 };
    for (const r of rows) {
      expected[r.key] = r.n;
      expected.total += r.n;
    }
    const counted = await certificateExpiryCounts(db);
    for (const [key, n] of Object.entries(counted)) {
      assert.equal(n, expected[key] ?? 0, `bucket ${key}`);
    }
    assert.ok(
      ["expired", "within_7_days", "within_30_days", "within_90_days", "later", "none", "revoked"]
        .every((k) => (expected[k] ?? 0) > 0),
      `every bucket occupied: ${JSON.stringify(expected)}`,
    );
  },
);
