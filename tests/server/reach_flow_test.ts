/**
 * While a large binding change is still being worked into the reach model (migrations/0022), the fleet keeps
 * moving: agents have the change at its commit, a new agent enrolls into the bound group, agents report on the
 * new policy and admins make further changes, all of it observed to complete while the queue still holds the
 * change (pending > 0), including, on PostgreSQL, while a batch holds its locks. Afterwards the model equals a
 * recomputation from scratch. Every change goes through the queue (`queueEveryChange`), so a hundred nodes
 * stand for bench/binding_change.ts's 100,000.
 */
import assert from "node:assert/strict";
import { refreshReachStep } from "../../server/domain/reach.ts";
import { domainRoutes } from "../../server/http/routes/mod.ts";
import { ComplianceStatus } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { dbTest } from "../helpers/db.ts";
import { type Agent, type AgentServer } from "../helpers/agents.ts";
import * as kit from "../helpers/agents.ts";
import type { TestClient } from "../helpers/app.ts";
import { putBinding } from "./domain_helpers.ts";
import {
  assertReachConsistent,
  pendingRefreshes,
  queueEveryChange,
  reachedNodes,
  seedNodes,
} from "./reach_helpers.ts";

/** A group of `count` seeded nodes and one streaming agent, and a released policy bound (disabled) to it. */
async function fleet(server: AgentServer, count: number) {
  const db = server.ctx.db;
  const group = await kit.createGroup(db, "fleet");
  await seedNodes(db, { prefix: "pc", count, groupId: group });
  const early = await kit.enrollAgent(server, { name: "early", groupId: group });
  const stream = kit.subscribe(early.policy);
  assert.deepEqual((await stream.nextSnapshot()).policies, []);
  const policy = await kit.releasedPolicy(db, { name: "browser" });
  const binding = await kit.bind(db, policy, group, { enabled: false });
  return { group, early, stream, policy, binding };
}

async function reportOn(agent: Agent, policyId: string, status: ComplianceStatus): Promise<void> {
  await agent.policy.reportCompliance({ clientId: agent.name, policyId, status, policyVersion: 1 });
}

async function resultsOf(server: AgentServer, nodeId: string): Promise<Record<string, number>> {
  const [row] = await server.ctx.db.query<Record<string, number>>(
    "SELECT compliant, non_compliant, error, unreported FROM node_compliance_counts WHERE node_id = $1",
    [nodeId],
  );
  return row;
}

async function withServer(
  info: Parameters<typeof queueEveryChange>[0],
  fn: (server: AgentServer, admin: TestClient) => Promise<void>,
): Promise<void> {
  const { db, close } = await queueEveryChange(info);
  const server = await kit.startAgentServer(db, { routes: (ctx) => domainRoutes(ctx) });
  try {
    await fn(server, await server.test.loginAs({ superAdmin: true }));
  } finally {
    await server.stop();
    await close();
  }
}

dbTest(
  "enrollments, reports and admin changes go through while a binding change catches up",
  async (_db, _t, info) => {
    await withServer(info, async (server, admin) => {
      const db = server.ctx.db;
      const { group, early, stream, policy, binding } = await fleet(server, 120);
      await putBinding(admin, binding, { state: "enabled" });
      // The agent has the change at its commit: snapshots read the binding tables, not the lagging model.
      assert.deepEqual((await stream.nextSnapshot()).policies.map((p) => p?.id), [policy]);
      assert.equal(await pendingRefreshes(db), 1);
      assert.equal(await reachedNodes(db, policy), 0);
      // The agent reports on the new policy before the model holds its pair: accepted (delivery is read from
      // the binding tables), and an error degrades the node at once.
      await reportOn(early, policy, ComplianceStatus.ERROR);
      await kit.eventually(async () => await kit.nodeStatus(db, early.nodeId) === "degraded", {
        what: "an error on a just-delivered policy to degrade the node",
      });
      assert.equal(await reachedNodes(db, policy), 0);
      assert.equal((await refreshReachStep(db, { batchNodes: 30 }))?.done, false);

      // Catch-up under way: a node enrolls into the bound group and has the policy, pair and counter at once.
      const late = await kit.enrollAgent(server, { name: "late", groupId: group });
      const lateStream = kit.subscribe(late.policy);
      assert.deepEqual((await lateStream.nextSnapshot()).policies.map((p) => p?.id), [policy]);
      assert.deepEqual(await resultsOf(server, late.nodeId), {
        compliant: 0,
        non_compliant: 0,
        error: 0,
        unreported: 1,
      });
      await reportOn(late, policy, ComplianceStatus.NON_COMPLIANT);
      assert.equal((await resultsOf(server, late.nodeId)).non_compliant, 1);
      // And another admin change: a priority change of the same binding reaches the agents.
      await putBinding(admin, binding, { priority: 9 });
      assert.equal((await stream.nextSnapshot()).policies[0]?.priority, 9);
      assert.equal(await pendingRefreshes(db), 1, "all of it happened while the catch-up was under way");

      while (await refreshReachStep(db, { batchNodes: 30 }));
      await assertReachConsistent(db, "the catch-up");
      assert.equal(await reachedNodes(db, policy), 122);
      assert.equal((await resultsOf(server, early.nodeId)).error, 1);
      assert.equal((await resultsOf(server, late.nodeId)).non_compliant, 1);
      for (const a of [early, late]) a.close();
      stream.cancel();
      lateStream.cancel();
    });
  },
);

dbTest(
  "a batch holding its locks keeps no enrollment, report or admin change of other nodes waiting",
  async (_db, _t, info) => {
    await withServer(info, async (server, admin) => {
      const db = server.ctx.db;
      const { group, early, stream, policy, binding } = await fleet(server, 120);
      await putBinding(admin, binding, { state: "enabled" });
      await stream.nextSnapshot();
      let opened = () => {};
      const batchOpen = new Promise<void>((resolve) => opened = resolve);
      let release = () => {};
      const released = new Promise<void>((resolve) => release = resolve);
      const held = refreshReachStep(db, {
        batchNodes: 40,
        beforeCommit: async () => {
          opened();
          await released;
        },
      });
      try {
        await batchOpen;
        // The batch has written its pairs and holds 40 nodes' locks, uncommitted. Meanwhile:
        const during = await kit.enrollAgent(server, { name: "during", groupId: group });
        await reportOn(during, policy, ComplianceStatus.COMPLIANT);
        await putBinding(admin, binding, { priority: 3 });
        const other = await kit.releasedPolicy(db, { name: "other" });
        await kit.bind(db, other, group);
        assert.equal(await pendingRefreshes(db), 2, "both changes still queued while the batch is open");
        during.close();
      } finally {
        release();
      }
      assert.equal((await held)?.nodes, 40);
      while (await refreshReachStep(db, { batchNodes: 40 }));
      await assertReachConsistent(db, "the held batch and what went on meanwhile");
      early.close();
      stream.cancel();
    });
  },
  // The embedded database runs one transaction at a time: an open batch holds everything there by design.
  { drivers: ["postgres"] },
);
