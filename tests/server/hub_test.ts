// The hub with real agents on real streams: snapshots built once per distinct node-group set, a stuck agent
// that neither delays the others nor loses the latest state, resyncs whose notification was lost, event log
// compaction, replica liveness (a dead replica's nodes go offline; a replica taken for dead comes back; with
// the embedded database a previous process's streams are reaped at start), revocation keeping a node offline,
// and graceful shutdown.

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { dbTest } from "../helpers/db.ts";
import { type AgentServer } from "../helpers/agents.ts";
import * as kit from "../helpers/agents.ts";
import type { Db } from "../../server/db/db.ts";
import type { HubOptions } from "../../server/hub/hub.ts";
import { changePolicyState, createPolicy } from "../../server/domain/policies.ts";
import { createBinding, updateBinding } from "../../server/domain/bindings.ts";
import { addMembers } from "../../server/domain/node_groups.ts";
import { publishResync } from "../../server/events/hub_notice.ts";
import { recordStreamOpen } from "../../server/hub/node_status.ts";
import { revokeNode } from "../../server/domain/nodes.ts";
import { seedNode } from "./domain_helpers.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import { metricsRegistry } from "../../server/metrics/counters.ts";

/** Deadline of waits in this file: generous, because the suite runs beside browsers on 2 loaded cores. */
const LOADED_MACHINE_DEADLINE_MS = 120_000;

function withServer(db: Db, hub: HubOptions, fn: (server: AgentServer) => Promise<void>): Promise<void> {
  return kit.withAgentServer(db, fn, { hub });
}

/** Observations in the `svc_policy_propagation_seconds` histogram of this process. */
async function propagationCount(): Promise<number> {
  const text = await metricsRegistry.getSingleMetricAsString("svc_policy_propagation_seconds");
  return Number(/svc_policy_propagation_seconds_count (\d+)/.exec(text)?.[1] ?? NaN);
}

async function statusOf(db: Db, nodeId: string): Promise<{ status: string; status_reason: string }> {
  const [row] = await db.query<{ status: string; status_reason: string }>(
    "SELECT status, status_reason FROM nodes WHERE id = $1",
    [nodeId],
  );
  return row;
}

async function streamRows(db: Db, nodeId: string): Promise<number> {
  const rows = await db.query("SELECT 1 FROM node_streams WHERE node_id = $1", [nodeId]);
  return rows.length;
}

dbTest("snapshots are built once per distinct node-group set", async (db) => {
  await withServer(db, {}, async (server) => {
    const a = await kit.createGroup(db, "a");
    const b = await kit.createGroup(db, "b");
    const c = await kit.createGroup(db, "c");
    await kit.bind(db, await kit.releasedPolicy(db, { name: "pa" }), a);
    await kit.bind(db, await kit.releasedPolicy(db, { name: "pb" }), b);
    const layout: [string, string[]][] = [
      ...Array.from({ length: 6 }, (_, i): [string, string[]] => [`only-a-${i}`, [a]]),
      ...Array.from({ length: 4 }, (_, i): [string, string[]] => [`a-and-b-${i}`, [a, b]]),
      ...Array.from({ length: 2 }, (_, i): [string, string[]] => [`only-b-${i}`, [b]]),
      ["only-c", [c]],
    ];
    const agents = [];
    for (const [name, groups] of layout) {
      const agent = await kit.enrollAgent(server, { name, groupId: groups[0] });
      for (const g of groups.slice(1)) await db.transaction((tx) => addMembers(tx, g, [agent.nodeId]));
      agents.push(agent);
    }
    const before = server.hub.stats().snapshotBuilds;
    const streams = agents.map((agent) => kit.subscribe(agent.policy));
    const initial = await Promise.all(streams.map((s) => s.nextSnapshot()));
    assert.equal(
      server.hub.stats().snapshotBuilds - before,
      4,
      "one build per group set: {a}, {a,b}, {b}, {c}",
    );
    assert.deepEqual(initial.map((s) => s.policies.map((p) => p!.name).sort().join(",")), [
      ...Array(6).fill("pa"),
      ...Array(4).fill("pa,pb"),
      ...Array(2).fill("pb"),
      "",
    ]);

    const mid = server.hub.stats().snapshotBuilds;
    const propagated = await propagationCount();
    await db.transaction((tx) => publishResync(tx, [a, b]));
    await Promise.all(streams.slice(0, 12).map((s) => s.nextSnapshot()));
    assert.equal(server.hub.stats().snapshotBuilds - mid, 3, "{c} is not affected and not rebuilt");
    await kit.eventually(async () => (await propagationCount()) - propagated === 12, {
      what: "one propagation time per delivered snapshot in svc_policy_propagation_seconds",
    });
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(streams[12].snapshotCount(), 1);
    for (const s of streams) s.cancel();
    for (const agent of agents) agent.close();
  });
});

dbTest(
  "a stuck stream does not delay others and receives the latest snapshot when it reads again",
  async (db) => {
    await withServer(db, {}, async (server) => {
      const group = await kit.createGroup(db, "lab");
      // Enough data per snapshot (60 x 48 KiB) that an agent that stops reading fills its flow-control
      // window.
      const bindingIds = await db.transaction(async (tx) => {
        const ids: string[] = [];
        for (let i = 0; i < 60; i++) {
          const p = await createPolicy(tx, {
            name: `bulk-${i}`,
            type: "TestBlob",
            content: JSON.stringify({ i, blob: "x".repeat(48 * 1024) }),
            createdBy: "test",
          });
          await changePolicyState(tx, p.id, "released");
          const b = await createBinding(tx, { policyId: p.id, nodeGroupId: group });
          await updateBinding(tx, b.id, { state: "enabled" });
          ids.push(b.id);
        }
        return ids;
      });
      const stuckAgent = await kit.enrollAgent(server, { name: "stuck", groupId: group });
      const fastAgent = await kit.enrollAgent(server, { name: "fast", groupId: group });
      const stuck = kit.subscribe(stuckAgent.policy);
      const fast = kit.subscribe(fastAgent.policy);
      await stuck.nextSnapshot(LOADED_MACHINE_DEADLINE_MS);
      await fast.nextSnapshot(LOADED_MACHINE_DEADLINE_MS);
      stuck.pause();

      const priorityOf = (snap: { policies: ({ name: string; priority: number } | undefined)[] }) =>
        snap.policies.find((p) => p!.name === "bulk-0")!.priority;
      const rounds = 8;
      // The reading agent receives every round while the stuck one still is not reading: had the hub waited
      // for the stuck stream, no round could arrive at all (an order, not a speed; speed is bench/fanout.ts).
      for (let k = 1; k <= rounds; k++) {
        await db.transaction((tx) => updateBinding(tx, bindingIds[0], { priority: k }));
        const snap = await fast.nextSnapshot(LOADED_MACHINE_DEADLINE_MS);
        assert.equal(priorityOf(snap), k);
      }

      stuck.resume();
      // It drains what was queued, then the coalesced pending resync brings it to the latest state.
      let latest = -1;
      while (latest !== rounds) latest = priorityOf(await stuck.nextSnapshot(LOADED_MACHINE_DEADLINE_MS));
      // Coalesced: the resyncs that arrived while it was stuck became one snapshot. It got the initial one, what
      // was already in flight when it stopped reading, and the latest; the reading agent got every one.
      assert.equal(fast.snapshotCount(), rounds + 1);
      assert.ok(stuck.snapshotCount() <= 4, `the stuck agent received ${stuck.snapshotCount()} snapshots`);
      stuck.cancel();
      fast.cancel();
      stuckAgent.close();
      fastAgent.close();
    });
  },
);

dbTest("a resync whose notification was lost is caught up from the event log", async (db) => {
  await withServer(db, { heartbeatIntervalMs: 200 }, async (server) => {
    const group = await kit.createGroup(db, "lab");
    const policy = await kit.releasedPolicy(db, { name: "p" });
    const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
    const stream = kit.subscribe(agent.policy);
    assert.equal((await stream.nextSnapshot()).policies.length, 0);
    // The binding and its hub event are written without NOTIFY (as if the LISTEN connection was down).
    await db.transaction(async (tx) => {
      await tx.query(
        "INSERT INTO policy_bindings (policy_id, node_group_id, state) VALUES ($1, $2, 'enabled')",
        [policy, group],
      );
      const [row] = await tx.query<{ revision: number }>(
        "UPDATE hub_state SET revision = revision + 1 WHERE id RETURNING revision",
      );
      await tx.query(
        "INSERT INTO hub_events (revision, kind, node_group_ids) VALUES ($1, 'resync', $2::uuid[])",
        [
          row.revision,
          [group],
        ],
      );
    });
    const snap = await stream.nextSnapshot(LOADED_MACHINE_DEADLINE_MS);
    assert.deepEqual(snap.policies.map((p) => p!.name), ["p"]);
    stream.cancel();
    agent.close();
  });
});

dbTest("old hub events are compacted", async (db) => {
  await withServer(db, { heartbeatIntervalMs: 100, eventRetention: 5 }, async () => {
    const group = await kit.createGroup(db, "lab");
    for (let i = 0; i < 12; i++) await db.transaction((tx) => publishResync(tx, [group]));
    await kit.eventually(async () => {
      const [row] = await db.query<{ n: number; min: number }>(
        "SELECT count(*)::int AS n, min(revision)::int AS min FROM hub_events",
      );
      return row.n === 5 && row.min === 8;
    }, { what: "compaction to the last 5 events" });
  });
});

dbTest("nodes streaming from a replica that stopped updating its liveness row go offline", async (db) => {
  await withServer(db, { heartbeatIntervalMs: 100, replicaTimeoutMs: 1_000 }, async (server) => {
    const group = await kit.createGroup(db, "lab");
    const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
    const local = await kit.enrollAgent(server, { name: "pc-2", groupId: group });
    const stream = kit.subscribe(local.policy);
    await stream.nextSnapshot();
    await kit.eventually(async () => (await streamRows(db, local.nodeId)) === 1, {
      what: "local stream recorded",
    });
    // Another replica, silent for a minute, holds pc-1's stream. One transaction: the reaper runs every
    // 100 ms and would otherwise remove the replica row between the inserts.
    await db.transaction(async (tx) => {
      await tx.query(
        "INSERT INTO server_replicas (id, last_seen) VALUES ('dead-replica', now() - interval '1 minute')",
      );
      await tx.query("INSERT INTO node_streams (node_id, replica_id) VALUES ($1, 'dead-replica')", [
        agent.nodeId,
      ]);
      await tx.query("UPDATE nodes SET status = 'online' WHERE id = $1", [agent.nodeId]);
    });
    await kit.eventually(async () => (await kit.nodeStatus(db, agent.nodeId)) === "offline", {
      what: "pc-1 offline",
    });
    const [reason] = await db.query<{ status_reason: string }>(
      "SELECT status_reason FROM nodes WHERE id = $1",
      [
        agent.nodeId,
      ],
    );
    assert.match(reason.status_reason, /replica/);
    assert.equal((await db.query("SELECT 1 FROM server_replicas WHERE id = 'dead-replica'")).length, 0);
    // This replica's own node is untouched.
    assert.equal(await kit.nodeStatus(db, local.nodeId), "online");
    stream.cancel();
    agent.close();
    local.close();
  });
});

dbTest("a replica that was taken for dead records its streams again", async (db) => {
  await withServer(db, { heartbeatIntervalMs: 100, replicaTimeoutMs: 60_000 }, async (server) => {
    const group = await kit.createGroup(db, "lab");
    const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
    const stream = kit.subscribe(agent.policy);
    await stream.nextSnapshot();
    await kit.eventually(async () => (await streamRows(db, agent.nodeId)) === 1, { what: "stream recorded" });
    // What a survivor does to a replica it believes dead.
    await db.query("DELETE FROM server_replicas WHERE id = $1", [server.ctx.replicaId]);
    await db.query("UPDATE nodes SET status = 'offline' WHERE id = $1", [agent.nodeId]);
    assert.equal(await streamRows(db, agent.nodeId), 0);
    await kit.eventually(async () => (await streamRows(db, agent.nodeId)) === 1, {
      what: "stream recorded again",
    });
    await kit.eventually(async () => (await kit.nodeStatus(db, agent.nodeId)) === "online", {
      what: "online again",
    });
    stream.cancel();
    agent.close();
  });
});

dbTest(
  "stopping the hub ends streams with UNAVAILABLE, marks nodes offline and removes the replica",
  async (db) => {
    const server = await kit.startAgentServer(db);
    let stopped = false;
    try {
      const group = await kit.createGroup(db, "lab");
      const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
      const stream = kit.subscribe(agent.policy);
      await stream.nextSnapshot();
      await kit.eventually(async () => (await kit.nodeStatus(db, agent.nodeId)) === "online", {
        what: "online",
      });
      await server.stop();
      stopped = true;
      const err = await stream.ended;
      assert.ok(err instanceof GrpcError);
      assert.equal(err.code, grpc.status.UNAVAILABLE);
      assert.equal(await kit.nodeStatus(db, agent.nodeId), "offline");
      assert.equal(
        (await db.query("SELECT 1 FROM server_replicas WHERE id = $1", [server.ctx.replicaId])).length,
        0,
      );
      assert.equal((await db.query("SELECT 1 FROM node_streams")).length, 0);
      agent.close();
    } finally {
      if (!stopped) await server.stop();
    }
  },
);

dbTest(
  "a previous process's streams are reaped at start on the embedded database; on PostgreSQL they wait for the timeout",
  async (db) => {
    // What a server killed with SIGKILL right after its liveness update leaves behind: a fresh replica row,
    // its stream rows and their nodes marked connected.
    const online = await seedNode(db, { name: "pc-online", status: "online" });
    const degraded = await seedNode(db, { name: "pc-degraded", status: "degraded" });
    const never = await seedNode(db, { name: "pc-never", status: "unknown" });
    const gone = await seedNode(db, { name: "pc-gone", status: "offline" });
    await db.query("UPDATE nodes SET status_reason = 'policy stream closed' WHERE id = $1", [gone]);
    await db.query("INSERT INTO server_replicas (id, hostname) VALUES ('previous-process', 'desk')");
    for (const node of [online, degraded]) {
      await db.query("INSERT INTO node_streams (node_id, replica_id) VALUES ($1, 'previous-process')", [
        node,
      ]);
    }
    await withServer(db, { replicaTimeoutMs: 60_000 }, async (server) => {
      const replicas = (await db.query<{ id: string }>("SELECT id FROM server_replicas ORDER BY id")).map((
        r,
      ) => r.id);
      if (db.driver === "pglite") {
        // No waiting: the moment start() returns, nothing of the previous process is left.
        assert.deepEqual(replicas, [server.ctx.replicaId]);
        assert.equal((await db.query("SELECT 1 FROM node_streams")).length, 0);
        for (const node of [online, degraded]) {
          assert.deepEqual(await statusOf(db, node), {
            status: "offline",
            status_reason: "server restarted; waiting for the agent to reconnect",
          });
        }
      } else {
        // Another live replica may hold these streams: only the replica timeout may declare it dead.
        assert.deepEqual(replicas, ["previous-process", server.ctx.replicaId].sort());
        assert.equal((await db.query("SELECT 1 FROM node_streams")).length, 2);
        assert.equal(await kit.nodeStatus(db, online), "online");
        assert.equal(await kit.nodeStatus(db, degraded), "degraded");
      }
      assert.deepEqual(await statusOf(db, never), { status: "unknown", status_reason: "" });
      assert.deepEqual(await statusOf(db, gone), {
        status: "offline",
        status_reason: "policy stream closed",
      });

      // The new process serves agents as usual.
      const group = await kit.createGroup(db, "lab");
      const agent = await kit.enrollAgent(server, { name: "pc-new", groupId: group });
      const stream = kit.subscribe(agent.policy);
      await stream.nextSnapshot();
      await kit.eventually(async () => (await kit.nodeStatus(db, agent.nodeId)) === "online", {
        what: "online",
      });
      stream.cancel();
      agent.close();
    });
  },
);

dbTest(
  "a revoked node is offline at once, and neither its closing stream nor a reconnect flips it back",
  async (db) => {
    await withServer(db, { heartbeatIntervalMs: 100 }, async (server) => {
      const group = await kit.createGroup(db, "lab");
      const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
      const stream = kit.subscribe(agent.policy);
      await stream.nextSnapshot();
      await kit.eventually(async () => (await streamRows(db, agent.nodeId)) === 1, {
        what: "stream recorded",
      });
      assert.equal(await kit.nodeStatus(db, agent.nodeId), "online");

      await db.transaction((tx) => revokeNode(tx, agent.nodeId));
      // Read right after the commit, before the stream's close is recorded: the revocation itself did it.
      const revoked = { status: "offline", status_reason: "certificate revoked" };
      assert.deepEqual(await statusOf(db, agent.nodeId), revoked);
      assert.equal(await streamRows(db, agent.nodeId), 0);

      const err = await stream.ended;
      assert.ok(err instanceof GrpcError);
      assert.equal(err.code, grpc.status.UNAUTHENTICATED);
      await kit.eventually(() => Promise.resolve(server.hub.stats().streams === 0), {
        what: "stream closed on the server",
      });
      // Several hub ticks (close bookkeeping, reconciliation of this replica's streams) have run.
      await new Promise((r) => setTimeout(r, 500));
      assert.deepEqual(await statusOf(db, agent.nodeId), revoked);

      const retry = kit.subscribe(agent.policy);
      const refused = await retry.ended;
      assert.ok(refused instanceof GrpcError);
      assert.equal(refused.code, grpc.status.UNAUTHENTICATED);
      await assert.rejects(agent.policy.heartbeat({ clientId: "pc-1" }), GrpcError);
      await new Promise((r) => setTimeout(r, 300));
      assert.deepEqual(await statusOf(db, agent.nodeId), revoked);
      assert.equal(await streamRows(db, agent.nodeId), 0);
      agent.close();
    });
  },
);

dbTest(
  "a stream that completes its initial sync after the revocation committed is not recorded",
  async (db) => {
    // The race the hub cannot see coming: the stream passed the certificate check, then the node was revoked
    // while its initial sync was being sent. Recording it must not bring the node back online.
    const node = await seedNode(db, { name: "pc-1", status: "online", serials: ["0a1b"] });
    const other = await seedNode(db, { name: "pc-2", serials: ["0c2d"] });
    await db.query("INSERT INTO server_replicas (id) VALUES ('replica-a')");
    await db.transaction((tx) => revokeNode(tx, node));
    const stream = { id: crypto.randomUUID(), nodeId: node, replicaId: "replica-a", serial: "0a1b" };
    assert.equal(await recordStreamOpen(db, stream), false);
    assert.equal(await streamRows(db, node), 0);
    assert.deepEqual(await statusOf(db, node), { status: "offline", status_reason: "certificate revoked" });
    // Control: a stream with a valid serial is recorded and its node goes online.
    const valid = { id: crypto.randomUUID(), nodeId: other, replicaId: "replica-a", serial: "0c2d" };
    assert.equal(await recordStreamOpen(db, valid), true);
    assert.equal(await kit.nodeStatus(db, other), "online");
  },
);
