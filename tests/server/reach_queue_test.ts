/**
 * Binding and policy changes too large to refresh the reach model in their own transaction (migrations/0022,
 * server/domain/reach.ts): they commit with one queue row, batches bring the model to its definition, a batch
 * done twice or rolled back changes nothing, several workers and concurrent changes still end exact, and the
 * backlog shows in the metrics. Every change here goes through the queue (`queueEveryChange`), so a few dozen
 * nodes stand for the 100,000 of bench/binding_change.ts.
 */
import assert from "node:assert/strict";
import type { Db, Queryable } from "../../server/db/db.ts";
import type { TestClient } from "../helpers/app.ts";
import { refreshReachStep } from "../../server/domain/reach.ts";
import { startReadModelWorker } from "../../server/hub/read_model_worker.ts";
import { collectDatabaseFamilies } from "../../server/metrics/collector.ts";
import { createLogger } from "../../server/core/log.ts";
import { dbTest, type TestDb } from "../helpers/db.ts";
import { eventually } from "../helpers/agents.ts";
import { putBinding } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";
import {
  assertCountersFollowPairs,
  assertReachConsistent,
  pendingRefreshes,
  queueEveryChange,
  reachedNodes,
  seedNodes,
  seedOverlappingFleet,
} from "./reach_helpers.ts";

/**
 * Runs `fn` on a database where every change goes through the refresh queue, with a domain server on it
 * and its Super Admin client; closes both.
 */
async function withQueuedServer(
  info: TestDb,
  fn: (fixture: { db: Db; admin: TestClient }) => Promise<void>,
): Promise<void> {
  const { db, close } = await queueEveryChange(info);
  const { server, admin } = await domain.domainServer(db);
  try {
    await fn({ db, admin });
  } finally {
    await server.close();
    await close();
  }
}

/** Drains the queue in batches of `batchNodes`; returns the steps taken. */
async function drain(db: Parameters<typeof refreshReachStep>[0], batchNodes = 25): Promise<number> {
  let steps = 0;
  while (await refreshReachStep(db, { batchNodes })) steps++;
  return steps;
}

async function cursor(q: Queryable): Promise<string | null> {
  const [row] = await q.query<{ after_node: string | null }>("SELECT after_node FROM reach_refresh_queue");
  return row?.after_node ?? null;
}

dbTest(
  "a binding change over the queue commits without writing reach, and batches bring the model to its definition",
  async (_db, t, info) => {
    await withQueuedServer(info, async ({ db, admin }) => {
      const office = await domain.createGroup(admin, "office");
      const lab = await domain.createGroup(admin, "lab");
      const officeNodes = await seedNodes(db, { prefix: "pc", count: 60, groupId: office });
      await seedNodes(db, { prefix: "lab", count: 15, groupId: lab });
      // A tenth of the office is in the lab too: those pairs have two paths once both bindings are on.
      await db.query(
        "INSERT INTO node_group_members (node_id, node_group_id) SELECT unnest($1::uuid[]), $2",
        [officeNodes.slice(0, 6), lab],
      );
      const browser = await domain.createPolicy(admin, { name: "browser" });
      await domain.setState(admin, browser.id, "released");
      const officeBinding = await domain.bind(admin, browser.id, office);
      const labBinding = await domain.bind(admin, browser.id, lab);
      // A result that waits for its pair: counted once the pair exists.
      await domain.report(db, officeNodes[0], browser.id, "non_compliant");
      const put = (id: string, body: unknown) => putBinding(admin, id, body);

      await t.step("enabling commits one queue row and no pair yet", async () => {
        await put(officeBinding, { state: "enabled" });
        assert.equal(await pendingRefreshes(db), 1);
        assert.equal(await reachedNodes(db, browser.id), 0);
        await assertCountersFollowPairs(db, "the commit");
      });

      await t.step("a batch at a time: the cursor moves, pairs and counters follow", async () => {
        const first = await refreshReachStep(db, { batchNodes: 25 });
        assert.deepEqual({ ...first, jobId: 0 }, {
          jobId: 0,
          policyId: browser.id,
          nodes: 25,
          absorbed: 0,
          done: false,
        });
        assert.equal(await reachedNodes(db, browser.id), 25);
        assert.equal(await cursor(db), officeNodes[24]);
        await assertCountersFollowPairs(db, "one batch");
        // A crash after the batch's writes but before its cursor moved leaves the cursor behind: the batch runs
        // again and changes nothing.
        const before = await db.query("SELECT * FROM node_compliance_counts ORDER BY node_id");
        await db.query("UPDATE reach_refresh_queue SET after_node = NULL");
        assert.equal((await refreshReachStep(db, { batchNodes: 25 }))?.nodes, 25);
        assert.deepEqual(await db.query("SELECT * FROM node_compliance_counts ORDER BY node_id"), before);
        assert.equal(await drain(db), 2);
        assert.equal(await pendingRefreshes(db), 0);
        await assertReachConsistent(db, "the catch-up");
      });

      await t.step("changes before a job starts share its row; later ones are absorbed", async () => {
        await put(labBinding, { state: "enabled" });
        await put(officeBinding, { state: "disabled" });
        await put(officeBinding, { state: "enabled" });
        assert.equal(await pendingRefreshes(db), 1, "unstarted changes of one policy share a row");
        await refreshReachStep(db, { batchNodes: 25 });
        // The job has started: a new change gets a row of its own, which the job folds in and restarts with.
        await put(officeBinding, { state: "disabled" });
        assert.equal(await pendingRefreshes(db), 2);
        const next = await refreshReachStep(db, { batchNodes: 25 });
        assert.equal(next?.absorbed, 1);
        assert.equal(await pendingRefreshes(db), 1);
        await drain(db);
        await assertReachConsistent(db, "enable, disable, enable, disable");
        assert.equal(await reachedNodes(db, browser.id), 21, "the lab's 15 and the 6 office nodes in it");
      });

      await t.step("a priority change touches no pair and queues nothing", async () => {
        await put(labBinding, { priority: 7 });
        assert.equal(await pendingRefreshes(db), 0);
      });

      await t.step("memberships, results, node deletions and a release between batches", async () => {
        await put(officeBinding, { state: "enabled" });
        const screen = await domain.createPolicy(admin, { name: "screen", type: "Dconf" });
        const screenOffice = await domain.bind(admin, screen.id, office);
        await domain.setState(admin, screen.id, "released");
        await put(screenOffice, { state: "enabled" });
        await refreshReachStep(db, { batchNodes: 10 });
        await db.query("DELETE FROM nodes WHERE id = $1", [officeNodes[30]]);
        await db.query("DELETE FROM node_group_members WHERE node_id = $1 AND node_group_id = $2", [
          officeNodes[40],
          office,
        ]);
        const late = await seedNodes(db, { prefix: "late", count: 3, groupId: office });
        await domain.report(db, officeNodes[50], browser.id, "compliant");
        await domain.report(db, late[0], screen.id, "error");
        await refreshReachStep(db, { batchNodes: 10 });
        await domain.setState(admin, browser.id, "archived");
        await assertCountersFollowPairs(db, "interleaved changes");
        await drain(db, 10);
        await assertReachConsistent(db, "interleaved changes");
        assert.equal(await reachedNodes(db, browser.id), 0);
      });
    });
  },
);

dbTest(
  "a batch that fails before its commit leaves the queue as it was; a new worker finishes",
  async (_db, _t, info) => {
    await withQueuedServer(info, async ({ db, admin }) => {
      const group = await domain.createGroup(admin, "fleet");
      const nodes = await seedNodes(db, { prefix: "pc", count: 50, groupId: group });
      const policy = await domain.createPolicy(admin, { name: "browser" });
      await domain.setState(admin, policy.id, "released");
      const binding = await domain.bind(admin, policy.id, group);
      await putBinding(admin, binding, { state: "enabled" });
      await refreshReachStep(db, { batchNodes: 20 });
      // The process dies after the second batch wrote its pairs, before it committed.
      await assert.rejects(
        refreshReachStep(db, {
          batchNodes: 20,
          beforeCommit: async (tx) => {
            const [{ n }] = await tx.query<{ n: number }>(
              "SELECT count(*)::int AS n FROM policy_reach WHERE policy_id = $1",
              [policy.id],
            );
            assert.equal(n, 40, "the batch wrote its pairs");
            throw new Error("killed");
          },
        }),
        /killed/,
      );
      assert.equal(await reachedNodes(db, policy.id), 20);
      assert.equal(await cursor(db), nodes[19]);
      await assertCountersFollowPairs(db, "the lost batch");
      const worker = await startReadModelWorker({ db, log: createLogger("error") }, { batchNodes: 20 });
      try {
        await eventually(async () => await pendingRefreshes(db) === 0, { what: "the queue to drain" });
      } finally {
        await worker.stop();
      }
      await assertReachConsistent(db, "the restarted catch-up");
    });
  },
);

dbTest(
  "the worker wakes on the queue's notification, and the backlog shows in the metrics",
  async (_db, _t, info) => {
    await withQueuedServer(info, async ({ db, admin }) => {
      const log = createLogger("error");
      const backlog = async () => {
        const families = await collectDatabaseFamilies(db, log);
        const value = (name: string) => families.find((f) => f.name === name)?.samples[0];
        return { pending: value("svc_read_model_pending_changes"), lag: value("svc_read_model_lag_seconds") };
      };
      const group = await domain.createGroup(admin, "fleet");
      await seedNodes(db, { prefix: "pc", count: 30, groupId: group });
      const policy = await domain.createPolicy(admin, { name: "browser" });
      await domain.setState(admin, policy.id, "released");
      const binding = await domain.bind(admin, policy.id, group);
      const idle = await backlog();
      assert.deepEqual(idle.pending, {
        name: "svc_read_model_pending_changes",
        labels: { model: "policy_reach" },
        value: 0,
      });
      assert.equal(idle.lag?.value, 0);
      await putBinding(admin, binding, { state: "enabled" });
      await eventually(async () => ((await backlog()).lag?.value ?? 0) > 0, { what: "the lag to show" });
      assert.equal((await backlog()).pending?.value, 1);
      // Polling an hour apart: only the start-up look and the notification can drain the queue here.
      const worker = await startReadModelWorker({ db, log }, { batchNodes: 7, pollMs: 3_600_000 });
      try {
        await eventually(async () => await pendingRefreshes(db) === 0, { what: "the start-up drain" });
        await assertReachConsistent(db, "the start-up drain");
        await putBinding(admin, binding, { state: "disabled" });
        await eventually(async () => await pendingRefreshes(db) === 0, { what: "the notified drain" });
        assert.equal(await reachedNodes(db, policy.id), 0);
        await assertReachConsistent(db, "the notified drain");
        assert.deepEqual((await backlog()).lag?.value, 0);
      } finally {
        await worker.stop();
      }
    });
  },
);

dbTest(
  "concurrent memberships, bindings, policy states and node deletions, worked off by two workers, end exact",
  async (_db, _t, info) => {
    const { db, close } = await queueEveryChange(info);
    try {
      const { groups, policies, nodes } = await seedOverlappingFleet(db);
      await drain(db);
      await assertReachConsistent(db, "setup");

      const hold = "SELECT pg_sleep(0.01)";
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
        if (i % 5 === 0) {
          changes.push((q) =>
            q.query(
              `INSERT INTO compliance_results (node_id, policy_id, status) VALUES ($1, $2, 'error')
               ON CONFLICT (node_id, policy_id) DO UPDATE SET status = 'compliant'`,
              [n.id, policies[i % 3].id],
            )
          );
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
      }
      changes.push((q) => q.query("UPDATE policies SET state = 'archived' WHERE id = $1", [policies[1].id]));
      changes.push((q) => q.query("DELETE FROM nodes WHERE id = $1", [nodes[7].id]));
      changes.push((q) => q.query("DELETE FROM nodes WHERE id = $1", [nodes[20].id]));
      let changing = true;
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
      const workers = [worker(), worker()];
      const outcomes = await Promise.allSettled(changes.map((change) =>
        db.transaction(async (tx) => {
          await change(tx);
          await tx.query(hold);
        })
      ));
      changing = false;
      await Promise.all(workers);
      for (const o of outcomes) {
        if (o.status === "rejected") assert.match(String(o.reason), /deadlock/, String(o.reason));
      }
      assert.ok(outcomes.filter((o) => o.status === "fulfilled").length >= changes.length / 2);
      await assertCountersFollowPairs(db, "concurrent changes");
      await drain(db, 4);
      await assertReachConsistent(db, "concurrent changes and two workers");
    } finally {
      await close();
    }
  },
);
