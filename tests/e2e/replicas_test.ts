// Two server replicas on one PostgreSQL database, each with its own connection pool, hub, policy port and
// web port (in one test process, sharing the CA as replicas share ca.cert_file/ca.key_file). A change made
// through replica A reaches an agent streaming from replica B (LISTEN/NOTIFY); targeted commands cross
// replicas too; when B dies without cleaning up, A marks B's nodes offline once B's liveness row goes stale.

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { freshDb, TEST_DATABASE_URL } from "../helpers/db.ts";
import {
  type AgentServer,
  bind,
  createGroup,
  enrollAgent,
  eventually,
  nodeStatus,
  releasedPolicy,
  startAgentServer,
  subscribe,
} from "../helpers/agents.ts";
import { openPostgres } from "../../server/db/mod.ts";
import { updateBinding } from "../../server/domain/bindings.ts";
import { sendNodeCommand } from "../../server/events/hub_notice.ts";
import { EventType } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";

const HUB = { heartbeatIntervalMs: 200, replicaTimeoutMs: 1_500 };

Deno.test({
  name: "replicas: a change through A reaches an agent on B; when B dies its nodes go offline",
  ignore: !TEST_DATABASE_URL,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const info = await freshDb("postgres");
    const dbB = await openPostgres(info.url, { max: 5 });
    let a: AgentServer | undefined;
    let b: AgentServer | undefined;
    try {
      a = await startAgentServer(info.db, { hub: HUB });
      b = await startAgentServer(dbB, { hub: HUB });
      const replicas = await info.db.query<{ id: string }>("SELECT id FROM server_replicas ORDER BY id");
      assert.deepEqual(replicas.map((r) => r.id), [a.ctx.replicaId, b.ctx.replicaId].sort());

      const group = await createGroup(info.db, "lab");
      const agent = await enrollAgent(a, { name: "pc-1", groupId: group });
      const bystander = await enrollAgent(a, { name: "pc-2", groupId: group });
      const onB = subscribe(agent.policyClientFor(b));
      const onA = subscribe(bystander.policy);
      assert.equal((await onB.nextSnapshot()).policies.length, 0);
      await onA.nextSnapshot();
      await eventually(async () => (await nodeStatus(info.db, agent.nodeId)) === "online", {
        what: "pc-1 online",
      });
      const [row] = await info.db.query<{ replica_id: string }>(
        "SELECT replica_id FROM node_streams WHERE node_id = $1",
        [agent.nodeId],
      );
      assert.equal(row.replica_id, b.ctx.replicaId);

      // Mutations through A's connection; the agent streams from B.
      const policy = await releasedPolicy(info.db, { name: "p" });
      const binding = await bind(info.db, policy, group, { priority: 3 });
      const first = await onB.nextSnapshot();
      assert.deepEqual(first.policies.map((p) => [p!.name, p!.priority]), [["p", 3]]);
      await info.db.transaction((tx) => updateBinding(tx, binding, { priority: 8 }));
      assert.equal((await onB.nextSnapshot()).policies[0]!.priority, 8);
      await sendNodeCommand(info.db, agent.nodeId, "metadata_request");
      await onB.waitFor((m) => m.type === EventType.METADATA_REQUEST);

      // B dies: its database connection goes first, so it cannot clean up its rows or refresh its liveness.
      await dbB.close();
      const dead = b;
      b = undefined;
      await dead.stop().catch(() => {});
      const ended = await onB.ended;
      assert.ok(ended instanceof GrpcError);
      assert.equal(ended.code, grpc.status.UNAVAILABLE);
      // Nothing cleaned up on B's side: the node is still online, or A already took it offline (B's liveness
      // lock went with its connection, so A need not wait for the replica timeout).
      const [after] = await info.db.query<{ status: string; status_reason: string }>(
        "SELECT status, status_reason FROM nodes WHERE id = $1",
        [agent.nodeId],
      );
      assert.ok(
        after.status === "online" || /replica holding the stream stopped/.test(after.status_reason),
        JSON.stringify(after),
      );
      await eventually(async () => (await nodeStatus(info.db, agent.nodeId)) === "offline", {
        what: "A to mark B's node offline",
        timeoutMs: 120_000,
      });
      const [node] = await info.db.query<{ status_reason: string }>(
        "SELECT status_reason FROM nodes WHERE id = $1",
        [
          agent.nodeId,
        ],
      );
      assert.match(node.status_reason, /replica/);
      assert.equal(await nodeStatus(info.db, bystander.nodeId), "online", "A's own node is untouched");
      assert.deepEqual(
        (await info.db.query<{ id: string }>("SELECT id FROM server_replicas")).map((r) => r.id),
        [a.ctx.replicaId],
      );

      // The agent reconnects to the survivor.
      const again = subscribe(agent.policy);
      assert.equal((await again.nextSnapshot()).policies[0]!.priority, 8);
      await eventually(async () => (await nodeStatus(info.db, agent.nodeId)) === "online", {
        what: "online on A",
      });
      again.cancel();
      onA.cancel();
      agent.close();
      bystander.close();
    } finally {
      await b?.stop().catch(() => {});
      await a?.stop();
      await dbB.close().catch(() => {});
      await info.dispose();
    }
  },
});
