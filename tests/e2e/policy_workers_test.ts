/**
 * `server.policy_workers: 2` on PostgreSQL, with the real svc-server process: two worker processes share the
 * policy port (reusePort). Simulated agents enroll on the web port and stream from the policy port until
 * both workers hold streams (told apart by the replica id in `node_streams`). Then: a binding enabled in the
 * database reaches every agent, whichever worker holds it; revoking a node closes its stream on the worker
 * that holds it; both workers' stream gauges appear in one scrape of the main process's metrics listener;
 * SIGKILL of one worker ends its streams, the supervisor restarts it, and its agents reconnect to a live
 * worker and get their policies again.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import { freshDb, TEST_DATABASE_URL } from "../helpers/db.ts";
import { type ServerProcess, startServerProcess } from "../helpers/process.ts";
import {
  bind,
  createGroup,
  enrollmentToken,
  eventually,
  type ReceivedSnapshot,
  releasedPolicy,
  type StreamWatcher,
  subscribe,
} from "../helpers/agents.ts";
import { revokeNode } from "../../server/domain/nodes.ts";
import { createClient, GrpcError, type ServiceClient } from "../../shared/grpc/adapter.ts";
import { EnrollmentService } from "../../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { PolicyService } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { generateKeyAndCsr } from "../../shared/pki/csr.ts";

interface TestAgent {
  name: string;
  nodeId: string;
  client: ServiceClient<typeof PolicyService>;
  stream: StreamWatcher;
}

/** The worker index a replica id belongs to (`<host>-w<N>-<random>`), or undefined for the main process. */
function workerOf(replicaId: string): number | undefined {
  const m = /-w(\d+)-[0-9a-f]{8}$/.exec(replicaId);
  return m ? Number(m[1]) : undefined;
}

/** `worker → pid` from the supervisor's "policy worker listening" lines (the latest per worker). */
function workerPids(output: string): Map<number, number> {
  const pids = new Map<number, number>();
  for (const m of output.matchAll(/policy worker listening worker=(\d+) pid=(\d+)/g)) {
    pids.set(Number(m[1]), Number(m[2]));
  }
  return pids;
}

/**
 * What an agent does after its stream broke: open a new one on the same channel, and while the channel still
 * reports the dead connection (UNAVAILABLE at once), try again after a short backoff.
 */
async function reconnect(a: TestAgent): Promise<ReceivedSnapshot> {
  const deadline = Date.now() + 30_000;
  for (let backoffMs = 100;; backoffMs = Math.min(backoffMs * 2, 2_000)) {
    a.stream = subscribe(a.client);
    try {
      return await a.stream.nextSnapshot(Math.max(1, deadline - Date.now()));
    } catch (err) {
      const ended = await Promise.race([a.stream.ended, Promise.resolve("open")]);
      const unavailable = ended instanceof GrpcError && ended.code === grpc.status.UNAVAILABLE;
      if (!unavailable || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, backoffMs));
    }
  }
}

Deno.test({
  name: "policy workers: agents on both workers get changes, revocation and SIGKILL failover, one scrape",
  ignore: !TEST_DATABASE_URL,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const info = await freshDb("postgres");
    const db = info.db;
    let server: ServerProcess | undefined;
    const agents: TestAgent[] = [];
    const closeAgents = () => {
      for (const a of agents) {
        a.stream.cancel();
        a.client.close();
      }
    };
    try {
      server = await startServerProcess({
        config: {
          database: { url: info.url },
          server: { address: "127.0.0.1", policy_workers: 2, replica_timeout_seconds: 3 },
        },
      });
      const proc = server;
      await eventually(() => Promise.resolve(workerPids(proc.output()).size === 2), {
        what: "both policy workers to listen",
        timeoutMs: 30_000,
      });
      const caPem = await Deno.readTextFile(`${proc.dataDir}/pki/ca/ca.crt`);
      const group = await createGroup(db, "lab");
      const policy = await releasedPolicy(db, { name: "p1" });

      const streamRows = async () =>
        new Map(
          (await db.query<{ node_id: string; replica_id: string }>(
            "SELECT node_id, replica_id FROM node_streams",
          ))
            .map((r) => [r.node_id, r.replica_id]),
        );
      const enrollment = createClient(EnrollmentService, `localhost:${proc.webPort}`, {
        credentials: grpc.credentials.createSsl(Buffer.from(caPem)),
      });
      // Each agent has its own connection, so the kernel picks a worker per agent: keep adding agents until
      // both workers hold two streams (thirty agents fall short with odds below one in ten million).
      try {
        for (let i = 1; i <= 30; i++) {
          const name = `pc-${i}`;
          const { keyPem, csrPem } = await generateKeyAndCsr(name);
          const token = await enrollmentToken(db, group);
          const res = await enrollment.enroll({ enrollmentToken: token, csrPem, nodeName: name });
          const client = createClient(PolicyService, `localhost:${proc.policyPort}`, {
            credentials: grpc.credentials.createSsl(
              Buffer.from(caPem),
              Buffer.from(keyPem),
              Buffer.from(res.signedCertPem),
            ),
          });
          const stream = subscribe(client);
          agents.push({ name, nodeId: res.nodeId, client, stream });
          assert.deepEqual((await stream.nextSnapshot(20_000)).policies, [], `${name}: nothing bound yet`);
          await eventually(async () => (await streamRows()).has(res.nodeId), {
            what: `${name}'s stream row`,
            timeoutMs: 20_000,
          });
          const held = [...(await streamRows()).values()].map(workerOf);
          // Two per worker: one to revoke, one to move when its worker is killed.
          if (held.filter((w) => w === 1).length >= 2 && held.filter((w) => w === 2).length >= 2) break;
        }
      } finally {
        enrollment.close();
      }
      const rows = await streamRows();
      const on = (w: number) => agents.filter((a) => workerOf(rows.get(a.nodeId)!) === w);
      assert.ok(on(1).length >= 2 && on(2).length >= 2, "at least two agents on each worker");
      assert.equal(on(1).length + on(2).length, agents.length, "every stream is on a worker, none on main");

      // A change reaches every agent, whichever worker holds its stream (LISTEN/NOTIFY in each worker).
      await bind(db, policy, group);
      for (const a of agents) {
        const snapshot = await a.stream.nextSnapshot(20_000);
        assert.deepEqual(snapshot.policies.map((p) => p!.id), [policy], `${a.name} got the change`);
      }

      // One scrape shows both workers' open streams.
      const scrape = async () => {
        const res = await fetch(`http://127.0.0.1:${proc.metricsPort}/metrics`);
        return await res.text();
      };
      const openOn = (text: string, w: number) =>
        Number(new RegExp(`^svc_policy_streams_open\\{worker="${w}"\\} (\\d+)$`, "m").exec(text)?.[1] ?? NaN);
      await eventually(async () => {
        const text = await scrape();
        return openOn(text, 1) === on(1).length && openOn(text, 2) === on(2).length;
      }, { what: "svc_policy_streams_open per worker in one scrape", timeoutMs: 20_000 });
      // The propagation time is recorded once the worker has read when the change was published.
      await eventually(async () => {
        const text = await scrape();
        return /^svc_policy_propagation_seconds_count\{worker="1"\} [1-9]/m.test(text) &&
          /^svc_policy_propagation_seconds_count\{worker="2"\} [1-9]/m.test(text);
      }, { what: "both workers' propagation histograms in one scrape", timeoutMs: 20_000 });
      assert.match(await scrape(), /^process_resident_memory_bytes\{worker="2"\} \d+/m);

      // Revoking a node closes its stream on the worker that holds it (one agent per worker).
      const revoked = [on(1)[0], on(2)[0]];
      for (const a of revoked) await db.transaction((tx) => revokeNode(tx, a.nodeId));
      for (const a of revoked) {
        const ended = await a.stream.ended;
        assert.ok(ended instanceof GrpcError, `${a.name}'s stream ended with ${String(ended)}`);
        assert.equal(ended.code, grpc.status.UNAUTHENTICATED);
      }
      const remaining = agents.filter((a) => !revoked.includes(a));

      // SIGKILL worker 2: its streams end, the supervisor restarts it, and its agents reconnect to a live worker.
      const victims = remaining.filter((a) => workerOf(rows.get(a.nodeId)!) === 2);
      assert.ok(victims.length > 0, "worker 2 still holds an agent");
      const killedReplica = rows.get(victims[0]?.nodeId ?? "");
      const pid = workerPids(proc.output()).get(2)!;
      Deno.kill(pid, "SIGKILL");
      for (const a of victims) {
        const ended = await a.stream.ended;
        assert.ok(ended instanceof GrpcError, `${a.name}'s stream ended with ${String(ended)}`);
        assert.equal(ended.code, grpc.status.UNAVAILABLE);
      }
      for (const a of victims) {
        const again = await reconnect(a);
        assert.deepEqual(again.policies.map((p) => p!.id), [policy], `${a.name} converged after failover`);
      }
      await eventually(async () => {
        const now = await streamRows();
        return victims.every((a) => now.has(a.nodeId) && now.get(a.nodeId) !== killedReplica);
      }, { what: "the killed worker's agents to stream from a live worker", timeoutMs: 30_000 });
      for (const a of remaining) {
        const [row] = await db.query<{ status: string }>("SELECT status FROM nodes WHERE id = $1", [
          a.nodeId,
        ]);
        assert.equal(row.status, "online", `${a.name} is online`);
      }
      await eventually(() => Promise.resolve(workerPids(proc.output()).get(2) !== pid), {
        what: "the supervisor to restart worker 2",
        timeoutMs: 30_000,
      });
      assert.match(proc.output(), /WARN policy worker exited; restarting it worker=2 code=/);
      await eventually(async () => {
        const t = await scrape();
        return Number.isFinite(openOn(t, 1)) && Number.isFinite(openOn(t, 2));
      }, { what: "both workers in the scrape after the restart", timeoutMs: 20_000 });

      console.log(
        `policy workers: ${on(1).length} agents on worker 1, ${on(2).length} on worker 2; ` +
          `${victims.length} moved after SIGKILL of worker 2`,
      );
      closeAgents();
      assert.equal(await proc.stop(), 0, `svc-server did not shut down cleanly:\n${proc.output()}`);
      const gone = await db.query("SELECT id FROM server_replicas");
      assert.deepEqual(gone, [], "every worker removed its replica row on a clean stop");
    } finally {
      closeAgents();
      await server?.stop("SIGKILL").catch(() => {});
      await info.dispose();
      if (server) await Deno.remove(server.dataDir, { recursive: true }).catch(() => {});
    }
  },
});
