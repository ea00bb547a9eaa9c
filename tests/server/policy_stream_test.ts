// The policy stream against a real server (hub + grpc-js policy port over mTLS) and real agents that
// enrolled through the web port: the initial sync decision table row by row, snapshot content (delivery rule,
// priority = max over enabled bindings, typed content, empty snapshot), which mutations reach which streams,
// targeted commands, and the node status rule (online / offline / degraded).

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { dbTest } from "../helpers/db.ts";
import { type StreamWatcher } from "../helpers/agents.ts";
import * as kit from "../helpers/agents.ts";
import type { Db } from "../../server/db/db.ts";
import { deleteBinding, updateBinding } from "../../server/domain/bindings.ts";
import { addMembers } from "../../server/domain/node_groups.ts";
import { publishResync, sendNodeCommand } from "../../server/events/hub_notice.ts";
import { ComplianceStatus, EventType } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";

async function revision(db: Db): Promise<number> {
  const [row] = await db.query<{ revision: number }>("SELECT revision FROM hub_state");
  return row.revision;
}

/** Appends delta events the way a delta publisher would (the server itself publishes only resyncs). */
async function appendEvents(
  db: Db,
  events: { kind: "created" | "updated" | "deleted" | "resync"; policyId?: string; groups: string[] }[],
): Promise<number[]> {
  return await db.transaction(async (tx) => {
    const out: number[] = [];
    for (const e of events) {
      const [row] = await tx.query<{ revision: number }>(
        "UPDATE hub_state SET revision = revision + 1 WHERE id RETURNING revision",
      );
      await tx.query(
        "INSERT INTO hub_events (revision, kind, node_group_ids, policy_id) VALUES ($1, $2, $3::uuid[], $4)",
        [row.revision, e.kind, e.groups, e.policyId ?? null],
      );
      out.push(row.revision);
    }
    return out;
  });
}

/** Waits until the stream's initial sync is done (its node_streams row exists) — also when nothing was sent. */
async function registered(db: Db, nodeId: string, count = 1): Promise<void> {
  await kit.eventually(async () => {
    const rows = await db.query("SELECT 1 FROM node_streams WHERE node_id = $1", [nodeId]);
    return rows.length === count;
  }, { what: `${count} recorded stream(s) of node ${nodeId}` });
}

function names(snapshot: { policies: ({ name: string } | undefined)[] }): string[] {
  return snapshot.policies.map((p) => p!.name).sort();
}

/**
 * Proves that no other snapshot is on its way to `streams`: publishes a resync for all their groups and
 * checks each receives exactly one more (an extra snapshot from before would have arrived first).
 */
async function expectQuiet(db: Db, streams: StreamWatcher[], groups: string[]): Promise<void> {
  const before = streams.map((s) => s.snapshotCount());
  await db.transaction((tx) => publishResync(tx, groups));
  for (const s of streams) await s.nextSnapshot();
  await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(streams.map((s) => s.snapshotCount()), before.map((n) => n + 1));
}

dbTest("initial sync: revision 0 or ahead of the server gets a full snapshot", async (db) => {
  await kit.withAgentServer(db, async (server) => {
    const group = await kit.createGroup(db, "lab");
    await kit.bind(db, await kit.releasedPolicy(db, { name: "a" }), group);
    await kit.bind(db, await kit.releasedPolicy(db, { name: "b" }), group);
    const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
    const current = await revision(db);

    const fresh = kit.subscribe(agent.policy, { lastKnownRevision: 0 });
    const first = await fresh.nextSnapshot();
    assert.deepEqual(names(first), ["a", "b"]);
    assert.equal(first.revision, current);
    assert.equal(first.messages.length, 2);
    assert.deepEqual(first.messages.map((m) => m.snapshotComplete), [false, true]);
    assert.ok(first.messages.every((m) => Number(m.revision) === current));
    fresh.cancel();

    // An agent that saw a higher revision (e.g. before the database was restored) must be resynced.
    const ahead = kit.subscribe(agent.policy, { lastKnownRevision: current + 1000 });
    assert.deepEqual(names(await ahead.nextSnapshot()), ["a", "b"]);
    ahead.cancel();
    agent.close();
  });
});

dbTest("initial sync: an up-to-date agent is sent nothing, then still gets later snapshots", async (db) => {
  await kit.withAgentServer(db, async (server) => {
    const group = await kit.createGroup(db, "lab");
    await kit.bind(db, await kit.releasedPolicy(db, { name: "a" }), group);
    const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
    const stream = kit.subscribe(agent.policy, { lastKnownRevision: await revision(db) });
    await registered(db, agent.nodeId);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(stream.messages.length, 0);
    assert.equal(await kit.nodeStatus(db, agent.nodeId), "online");

    await kit.bind(db, await kit.releasedPolicy(db, { name: "b" }), group);
    assert.deepEqual(names(await stream.nextSnapshot()), ["a", "b"]);
    stream.cancel();
    agent.close();
  });
});

dbTest("initial sync: events still logged and none a resync are replayed", async (db) => {
  await kit.withAgentServer(db, async (server) => {
    const group = await kit.createGroup(db, "lab");
    const other = await kit.createGroup(db, "elsewhere");
    const kept = await kit.releasedPolicy(db, { name: "kept" });
    const gone = await kit.releasedPolicy(db, { name: "gone" });
    await kit.bind(db, kept, group);
    const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
    const base = await revision(db);
    const [r1, , r3] = await appendEvents(db, [
      { kind: "updated", policyId: kept, groups: [group] },
      { kind: "created", policyId: kept, groups: [other] },
      { kind: "deleted", policyId: gone, groups: [group] },
    ]);

    const stream = kit.subscribe(agent.policy, { lastKnownRevision: base });
    const updated = await stream.waitFor((m) => m.type === EventType.UPDATED);
    const deleted = await stream.waitFor((m) => m.type === EventType.DELETED);
    // The event for another group is skipped; order and revisions are the log's.
    assert.deepEqual(stream.messages.slice(0, 2).map((m) => m.type), [EventType.UPDATED, EventType.DELETED]);
    assert.equal(updated.policy?.name, "kept");
    assert.equal(Number(updated.revision), r1);
    assert.deepEqual([deleted.policy?.id, deleted.policy?.type], [gone, "TestType"]);
    assert.equal(Number(deleted.revision), r3);
    assert.ok(!stream.messages.slice(0, 2).some((m) => m.type === EventType.SNAPSHOT));
    stream.cancel();
    agent.close();
  });
});

dbTest("initial sync: a compacted log or a resync among the events gives a full snapshot", async (db) => {
  await kit.withAgentServer(db, async (server) => {
    const group = await kit.createGroup(db, "lab");
    const policy = await kit.releasedPolicy(db, { name: "a" });
    await kit.bind(db, policy, group);
    const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });

    // Replayable events, but the first one was compacted away.
    let base = await revision(db);
    const [first] = await appendEvents(db, [
      { kind: "updated", policyId: policy, groups: [group] },
      { kind: "updated", policyId: policy, groups: [group] },
    ]);
    await db.query("DELETE FROM hub_events WHERE revision = $1", [first]);
    const compacted = kit.subscribe(agent.policy, { lastKnownRevision: base });
    const snap = await compacted.nextSnapshot();
    assert.deepEqual(names(snap), ["a"]);
    assert.equal(compacted.messages[0].type, EventType.SNAPSHOT);
    compacted.cancel();

    // All events present, but one of them is a resync signal.
    base = await revision(db);
    await appendEvents(db, [
      { kind: "updated", policyId: policy, groups: [group] },
      { kind: "resync", groups: [group] },
    ]);
    const resync = kit.subscribe(agent.policy, { lastKnownRevision: base });
    assert.deepEqual(names(await resync.nextSnapshot()), ["a"]);
    assert.equal(resync.messages[0].type, EventType.SNAPSHOT);
    resync.cancel();
    agent.close();
  });
});

dbTest(
  "snapshot: empty is one message without policy; only released policies with enabled bindings",
  async (db) => {
    await kit.withAgentServer(db, async (server) => {
      const group = await kit.createGroup(db, "lab");
      const other = await kit.createGroup(db, "other");
      await kit.bind(db, await kit.releasedPolicy(db, { name: "disabled-binding" }), group, {
        enabled: false,
      });
      await kit.bind(db, await kit.releasedPolicy(db, { name: "other-group" }), other);
      const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
      const stream = kit.subscribe(agent.policy);
      const empty = await stream.nextSnapshot();
      assert.equal(empty.messages.length, 1);
      assert.equal(empty.messages[0].policy, undefined);
      assert.equal(empty.messages[0].snapshotComplete, true);
      assert.equal(empty.messages[0].type, EventType.SNAPSHOT);

      // Archived (no longer released) policies leave the snapshot.
      const archived = await kit.releasedPolicy(db, { name: "archived" });
      await kit.bind(db, archived, group);
      assert.deepEqual(names(await stream.nextSnapshot()), ["archived"]);
      await db.query("UPDATE policies SET state = 'archived' WHERE id = $1", [archived]);
      await db.transaction((tx) => publishResync(tx, [group]));
      assert.equal((await stream.nextSnapshot()).policies.length, 0);
      stream.cancel();
      agent.close();
    });
  },
);

dbTest("snapshot: priority is the highest among enabled bindings; typed content is parsed", async (db) => {
  await kit.withAgentServer(db, async (server) => {
    const a = await kit.createGroup(db, "a");
    const b = await kit.createGroup(db, "b");
    const c = await kit.createGroup(db, "c");
    const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: a });
    await db.transaction((tx) => addMembers(tx, b, [agent.nodeId]));
    await db.transaction((tx) => addMembers(tx, c, [agent.nodeId]));
    const firefox = await kit.releasedPolicy(db, {
      name: "ff",
      type: "Firefox",
      content: '{"DisablePocket": true}',
    });
    // Written by a newer server that knows one more setting: the stream parse ignores what it does not know.
    await db.query(
      `UPDATE policies SET content = '{"DisablePocket": true, "SettingFromTheFuture": 1}' WHERE id = $1`,
      [
        firefox,
      ],
    );
    await kit.bind(db, firefox, a, { priority: 5 });
    await kit.bind(db, firefox, b, { priority: 7 });
    const highDisabled = await kit.bind(db, firefox, c, { priority: 100, enabled: false });

    const stream = kit.subscribe(agent.policy);
    const snap = await stream.nextSnapshot();
    assert.equal(snap.policies.length, 1);
    const p = snap.policies[0]!;
    assert.equal(p.priority, 7);
    assert.equal(p.typedContent.case, "firefoxPolicy");
    assert.equal((p.typedContent.value as { disablePocket?: boolean }).disablePocket, true);
    assert.equal(p.version, 1);

    await db.transaction((tx) => updateBinding(tx, highDisabled, { state: "enabled" }));
    assert.equal((await stream.nextSnapshot()).policies[0]!.priority, 100);
    stream.cancel();
    agent.close();
  });
});

dbTest("snapshot: content that does not parse is sent without typed content and logged", async (db) => {
  await kit.withAgentServer(db, async (server) => {
    const group = await kit.createGroup(db, "lab");
    // Stored before a validator existed (or by a newer server): a string where a boolean is expected.
    const [row] = await db.query<{ id: string }>(
      `INSERT INTO policies (name, type, content, state) VALUES ('legacy', 'Firefox', '{"DisablePocket": "yes"}', 'released')
       RETURNING id`,
    );
    await kit.bind(db, row.id, group);
    await kit.bind(db, await kit.releasedPolicy(db, { name: "fine" }), group);
    const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
    const stream = kit.subscribe(agent.policy);
    const snap = await stream.nextSnapshot();
    const legacy = snap.policies.find((p) => p!.name === "legacy")!;
    assert.equal(legacy.typedContent.case, undefined);
    assert.equal(legacy.content, '{"DisablePocket": "yes"}');
    assert.deepEqual(names(snap), ["fine", "legacy"]);
    assert.ok(server.test.logs.some((l) => l.includes("does not parse") && l.includes(row.id)));
    stream.cancel();
    agent.close();
  });
});

dbTest(
  "binding enable, disable, priority change and delete each send one snapshot to affected streams only",
  async (db) => {
    await kit.withAgentServer(db, async (server) => {
      const ga = await kit.createGroup(db, "ga");
      const gb = await kit.createGroup(db, "gb");
      const policy = await kit.releasedPolicy(db, { name: "p" });
      const binding = await kit.bind(db, policy, ga, { enabled: false });
      const a1 = await kit.enrollAgent(server, { name: "a1", groupId: ga });
      const a2 = await kit.enrollAgent(server, { name: "a2", groupId: ga });
      const b1 = await kit.enrollAgent(server, { name: "b1", groupId: gb });
      const [s1, s2, s3] = [kit.subscribe(a1.policy), kit.subscribe(a2.policy), kit.subscribe(b1.policy)];
      for (const s of [s1, s2, s3]) await s.nextSnapshot();

      const steps: [
        string,
        () => Promise<unknown>,
        (snap: Awaited<ReturnType<StreamWatcher["nextSnapshot"]>>) => void,
      ][] = [
        ["enable", () => db.transaction((tx) => updateBinding(tx, binding, { state: "enabled" })), (s) => {
          assert.deepEqual(names(s), ["p"]);
          assert.equal(s.policies[0]!.priority, 0);
        }],
        ["priority", () => db.transaction((tx) => updateBinding(tx, binding, { priority: 42 })), (s) => {
          assert.equal(s.policies[0]!.priority, 42);
        }],
        ["disable", () => db.transaction((tx) => updateBinding(tx, binding, { state: "disabled" })), (s) => {
          assert.equal(s.policies.length, 0);
        }],
        ["re-enable", () => db.transaction((tx) => updateBinding(tx, binding, { state: "enabled" })), (s) => {
          assert.deepEqual(names(s), ["p"]);
        }],
        ["delete", () => db.transaction((tx) => deleteBinding(tx, binding)), (s) => {
          assert.equal(s.policies.length, 0);
        }],
      ];
      for (const [label, mutate, check] of steps) {
        const unaffected = s3.snapshotCount();
        await mutate();
        for (const s of [s1, s2]) check(await s.nextSnapshot());
        await expectQuiet(db, [s1, s2], [ga]);
        assert.equal(s3.snapshotCount(), unaffected, `${label} must not reach the other group`);
      }
      await expectQuiet(db, [s1, s2, s3], [ga, gb]);
      for (const s of [s1, s2, s3]) s.cancel();
      for (const a of [a1, a2, b1]) a.close();
    });
  },
);

dbTest(
  "a stream opened after a change gets the change, although the group's old snapshot was cached",
  async (db) => {
    await kit.withAgentServer(db, async (server) => {
      const group = await kit.createGroup(db, "lab");
      const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
      const first = kit.subscribe(agent.policy);
      assert.equal((await first.nextSnapshot()).policies.length, 0);
      first.cancel();
      await kit.eventually(async () => (await kit.nodeStatus(db, agent.nodeId)) === "offline", {
        what: "offline",
      });
      // No stream of this group is open to rebuild the snapshot when the change is announced.
      await kit.bind(db, await kit.releasedPolicy(db, { name: "new" }), group);
      const second = kit.subscribe(agent.policy);
      assert.deepEqual(names(await second.nextSnapshot()), ["new"]);
      second.cancel();
      agent.close();
    });
  },
);

dbTest("membership changes reach the agent on its next reconnect, not before", async (db) => {
  await kit.withAgentServer(db, async (server) => {
    const ga = await kit.createGroup(db, "ga");
    const gb = await kit.createGroup(db, "gb");
    await kit.bind(db, await kit.releasedPolicy(db, { name: "in-b" }), gb);
    const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: ga });
    const stream = kit.subscribe(agent.policy);
    assert.equal((await stream.nextSnapshot()).policies.length, 0);
    await db.transaction((tx) => addMembers(tx, gb, [agent.nodeId]));
    // A resync for gb does not concern this stream: its groups were read when it opened.
    await db.transaction((tx) => publishResync(tx, [gb]));
    await expectQuiet(db, [stream], [ga]);
    assert.equal(stream.snapshotCount(), 2);
    stream.cancel();
    const again = kit.subscribe(agent.policy);
    assert.deepEqual(names(await again.nextSnapshot()), ["in-b"]);
    again.cancel();
    agent.close();
  });
});

dbTest(
  "METADATA_REQUEST and DISK_ENCRYPTION_TASK go to the targeted node only and keep the revision",
  async (db) => {
    await kit.withAgentServer(db, async (server) => {
      const group = await kit.createGroup(db, "lab");
      await kit.bind(db, await kit.releasedPolicy(db, { name: "p" }), group);
      const target = await kit.enrollAgent(server, { name: "target", groupId: group });
      const bystander = await kit.enrollAgent(server, { name: "bystander", groupId: group });
      const st = kit.subscribe(target.policy);
      const sb = kit.subscribe(bystander.policy);
      const snap = await st.nextSnapshot();
      await sb.nextSnapshot();
      await registered(db, target.nodeId);
      const revisionBefore = await revision(db);

      await sendNodeCommand(db, target.nodeId, "metadata_request");
      await sendNodeCommand(db, target.nodeId, "disk_encryption_task");
      const meta = await st.waitFor((m) => m.type === EventType.METADATA_REQUEST);
      const task = await st.waitFor((m) => m.type === EventType.DISK_ENCRYPTION_TASK);
      for (const m of [meta, task]) {
        assert.equal(m.policy, undefined);
        assert.equal(m.snapshotComplete, false);
        assert.equal(Number(m.revision), snap.revision);
      }
      assert.equal(await revision(db), revisionBefore);
      await expectQuiet(db, [st, sb], [group]);
      assert.ok(!sb.messages.some((m) => m.type !== EventType.SNAPSHOT));
      st.cancel();
      sb.cancel();
      target.close();
      bystander.close();
    });
  },
);

dbTest("node status: online after the initial sync, offline only when its last stream closes", async (db) => {
  await kit.withAgentServer(db, async (server) => {
    const group = await kit.createGroup(db, "lab");
    const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
    assert.equal(await kit.nodeStatus(db, agent.nodeId), "unknown");
    const first = kit.subscribe(agent.policy);
    await first.nextSnapshot();
    await registered(db, agent.nodeId);
    assert.equal(await kit.nodeStatus(db, agent.nodeId), "online");

    const second = kit.subscribe(agent.policy);
    await second.nextSnapshot();
    await registered(db, agent.nodeId, 2);
    first.cancel();
    await registered(db, agent.nodeId, 1);
    assert.equal(await kit.nodeStatus(db, agent.nodeId), "online");
    second.cancel();
    await kit.eventually(async () => (await kit.nodeStatus(db, agent.nodeId)) === "offline", {
      what: "offline",
    });
    const [row] = await db.query<{ status_reason: string }>("SELECT status_reason FROM nodes WHERE id = $1", [
      agent.nodeId,
    ]);
    assert.equal(row.status_reason, "policy stream closed");
    agent.close();
  });
});

dbTest(
  "node status: degraded while the agent is unhealthy or a delivered policy reports ERROR",
  async (db) => {
    await kit.withAgentServer(db, async (server) => {
      const group = await kit.createGroup(db, "lab");
      const policy = await kit.releasedPolicy(db, { name: "p" });
      const binding = await kit.bind(db, policy, group);
      const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
      const stream = kit.subscribe(agent.policy);
      await stream.nextSnapshot();
      await registered(db, agent.nodeId);
      const reason = async () =>
        (await db.query<{ status: string; status_reason: string }>(
          "SELECT status, status_reason FROM nodes WHERE id = $1",
          [agent.nodeId],
        ))[0];

      await agent.policy.heartbeat({
        clientId: "pc-1",
        healthy: false,
        healthMessage: "dconf database unreadable",
      });
      assert.deepEqual(await reason(), {
        status: "degraded",
        status_reason: "agent reports it is unhealthy: dconf database unreadable",
      });
      await agent.policy.heartbeat({ clientId: "pc-1", healthy: true });
      assert.equal((await reason()).status, "online");
      // Agents too old to send the field count as healthy.
      await agent.policy.heartbeat({ clientId: "pc-1" });
      assert.equal((await reason()).status, "online");

      await agent.policy.reportCompliance({
        clientId: "pc-1",
        policyId: policy,
        status: ComplianceStatus.ERROR,
      });
      assert.deepEqual(await reason(), {
        status: "degraded",
        status_reason: 'compliance error on policy "p"',
      });
      await agent.policy.reportCompliance({
        clientId: "pc-1",
        policyId: policy,
        status: ComplianceStatus.COMPLIANT,
      });
      assert.equal((await reason()).status, "online");

      // An error result of a policy that no longer reaches the node does not count.
      await agent.policy.reportCompliance({
        clientId: "pc-1",
        policyId: policy,
        status: ComplianceStatus.ERROR,
      });
      assert.equal((await reason()).status, "degraded");
      await db.transaction((tx) => updateBinding(tx, binding, { state: "disabled" }));
      await agent.policy.heartbeat({ clientId: "pc-1", healthy: true });
      assert.equal((await reason()).status, "online");

      stream.cancel();
      await kit.eventually(async () => (await kit.nodeStatus(db, agent.nodeId)) === "offline", {
        what: "offline",
      });
      // Reports while disconnected never bring a node back online.
      await agent.policy.heartbeat({ clientId: "pc-1", healthy: true });
      assert.equal(await kit.nodeStatus(db, agent.nodeId), "offline");
      agent.close();
    });
  },
);

dbTest("a negative last_known_revision is refused", async (db) => {
  await kit.withAgentServer(db, async (server) => {
    const group = await kit.createGroup(db, "lab");
    const agent = await kit.enrollAgent(server, { name: "pc-1", groupId: group });
    const stream = kit.subscribe(agent.policy, { lastKnownRevision: -1 });
    const err = await stream.ended;
    assert.ok(err instanceof GrpcError);
    assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
    assert.match(err.message, /last_known_revision/);
    agent.close();
  });
});
