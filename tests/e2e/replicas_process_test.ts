/**
 * Scale-out with two real svc-server processes on one PostgreSQL database and one shared CA (given to both
 * as ca.cert_file/ca.key_file). Everything is configured through replica A's REST API; a simulated agent
 * enrolls on B's web port and streams from B's policy port. Enabling a binding through A reaches the agent
 * on B (LISTEN/NOTIFY across processes); when B is SIGKILLed — no chance to clean up — A marks the node
 * offline once B's liveness row goes stale, and the agent reconnects to A with the certificate B issued.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { freshDb, TEST_DATABASE_URL } from "../helpers/db.ts";
import type { ServerProcess } from "../helpers/process.ts";
import { LOADED_MACHINE_DEADLINE_MS, login, startReplica } from "../helpers/replicas.ts";
import { eventually, subscribe } from "../helpers/agents.ts";
import { loadOrCreateCa } from "../../server/pki/mod.ts";
import { createClient, GrpcError, type ServiceClient } from "../../shared/grpc/adapter.ts";
import { EnrollmentService } from "../../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { EventType, PolicyService } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { generateKeyAndCsr } from "../../shared/pki/csr.ts";

const REPLICA_TIMEOUT_SECONDS = 3;
const FIREFOX_CONTENT = JSON.stringify({ DisableTelemetry: true });

// deno-lint-ignore no-explicit-any
type Json = any;

/** A policy-port client presenting the agent's certificate (issued by whichever replica enrolled it). */
function policyClient(
  caPem: string,
  port: number,
  cert: { certPem: string; keyPem: string },
): ServiceClient<typeof PolicyService> {
  return createClient(PolicyService, `localhost:${port}`, {
    credentials: grpc.credentials.createSsl(
      Buffer.from(caPem),
      Buffer.from(cert.keyPem),
      Buffer.from(cert.certPem),
    ),
  });
}

Deno.test({
  name:
    "replica processes: a change through A reaches an agent on B; SIGKILL B → node offline, agent moves to A",
  ignore: !TEST_DATABASE_URL,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const info = await freshDb("postgres");
    // The servers get the URL; this process keeps no connection of its own.
    await info.db.close();
    const tmp = await Deno.makeTempDir({ prefix: "svc-replicas-" });
    const procs: ServerProcess[] = [];
    // Client-side resources, released last-opened first (streams before their channels).
    const closers: (() => void)[] = [];
    const closeAll = () => {
      while (closers.length > 0) closers.pop()!();
    };
    try {
      await loadOrCreateCa({ dataDir: tmp });
      const caPem = await Deno.readTextFile(join(tmp, "pki/ca/ca.crt"));
      const config = {
        database: { url: info.url },
        ca: {
          cert_file: join(tmp, "pki/ca/ca.crt"),
          key_file: join(tmp, "pki/ca/ca.key"),
          // The session secret the first replica creates is sealed in the database with this shared key file.
          key_encryption_key_file: join(tmp, "secrets.kek"),
        },
        // Loopback only: the test needs no other interface.
        server: { address: "127.0.0.1", replica_timeout_seconds: REPLICA_TIMEOUT_SECONDS },
      };
      // A first, so A creates the initial admin and B finds it in the shared database.
      const a = await startReplica("A", { caPem, config });
      procs.push(a);
      const b = await startReplica("B", { caPem, config });
      procs.push(b);
      assert.notEqual(a.dataDir, b.dataDir);
      await assert.rejects(Deno.stat(join(b.dataDir, "initial_admin_password")), Deno.errors.NotFound);

      const api = await login(a, caPem, await a.adminPassword());
      closers.push(() => api.close());
      const group = await api.call("POST", "/api/v1/node-groups", { name: "lab" });
      const { token } = await api.call("POST", `/api/v1/node-groups/${group.id}/tokens`);
      const policy = await api.call("POST", "/api/v1/policies/all", {
        name: "ff-telemetry",
        type: "Firefox",
        content: FIREFOX_CONTENT,
      });
      await api.call("PUT", `/api/v1/policies/all/${policy.id}/state`, { state: "released" });
      const binding = await api.call("POST", "/api/v1/policy-bindings", {
        policy_id: policy.id,
        node_group_id: group.id,
        priority: 5,
      });
      assert.equal(binding.state, "disabled");

      // The agent enrolls on B's web port with the token A issued, then streams from B's policy port.
      const { keyPem, csrPem } = await generateKeyAndCsr("pc-1");
      const enrollment = createClient(EnrollmentService, `localhost:${b.webPort}`, {
        credentials: grpc.credentials.createSsl(Buffer.from(caPem)),
      });
      closers.push(() => enrollment.close());
      const enrolled = await enrollment.enroll({ enrollmentToken: token, csrPem, nodeName: "pc-1" });
      const cert = { certPem: enrolled.signedCertPem, keyPem };
      const nodeId = enrolled.nodeId;
      const clientB = policyClient(caPem, b.policyPort, cert);
      closers.push(() => clientB.close());
      const onB = subscribe(clientB);
      closers.push(() => onB.cancel());
      assert.deepEqual((await onB.nextSnapshot()).policies, [], "nothing bound yet");
      const node = () => api.call("GET", `/api/v1/nodes/${nodeId}`);
      await eventually(async () => (await node()).status === "online", {
        what: "A's REST to show pc-1 online",
      });

      // Enabling through A must reach the stream B holds: only the database connects the two processes.
      const enabledAt = Date.now();
      await api.call("PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled" });
      const fresh = await onB.nextSnapshot(LOADED_MACHINE_DEADLINE_MS);
      const crossMs = Date.now() - enabledAt;
      assert.deepEqual(
        fresh.policies.map((p) => [p!.id, p!.name, p!.type, JSON.parse(p!.content)]),
        [[policy.id, "ff-telemetry", "Firefox", { DisableTelemetry: true }]],
      );

      // Commands travel only by NOTIFY (no catch-up poll could deliver them late), so this one crossing from A's
      // REST call to B's stream proves the notification path between the processes.
      await api.call("POST", `/api/v1/nodes/${nodeId}/metadata-request`);
      await onB.waitFor((m) => m.type === EventType.METADATA_REQUEST, LOADED_MACHINE_DEADLINE_MS);

      // SIGKILL: B cannot close its streams, drop its replica row or mark anything offline.
      const killedAt = Date.now();
      assert.equal(await b.stop("SIGKILL"), 137);
      const ended = await onB.ended;
      assert.ok(ended instanceof GrpcError, `the stream on B ended with ${String(ended)}`);
      assert.equal(ended.code, grpc.status.UNAVAILABLE);
      // A killed replica cleans nothing up; only A's reaper can, and may have already: B's liveness lock
      // went with its process, so A need not wait for the replica timeout.
      const justAfter = await node();
      assert.ok(
        justAfter.status === "online" || /replica holding the stream stopped/.test(justAfter.status_reason),
        JSON.stringify(justAfter),
      );
      await eventually(async () => (await node()).status === "offline", {
        what: "A to mark pc-1 offline after B died",
        timeoutMs: LOADED_MACHINE_DEADLINE_MS,
      });
      const offlineMs = Date.now() - killedAt;
      const offline = await node();
      assert.match(
        offline.status_reason,
        /replica/,
        "A's liveness reaper, not a stream close, set it offline",
      );
      const refused = await api.request("POST", `/api/v1/nodes/${nodeId}/metadata-request`);
      assert.equal(refused.status, 409, "B's stream rows went with its replica row");

      // The agent reconnects to the survivor with the certificate B issued (same CA) and converges.
      const clientA = policyClient(caPem, a.policyPort, cert);
      closers.push(() => clientA.close());
      const onA = subscribe(clientA);
      closers.push(() => onA.cancel());
      const again = await onA.nextSnapshot(LOADED_MACHINE_DEADLINE_MS);
      assert.deepEqual(again.policies.map((p) => [p!.id, JSON.parse(p!.content)]), [[policy.id, {
        DisableTelemetry: true,
      }]]);
      await eventually(async () => (await node()).status === "online", {
        what: "pc-1 online again through A",
      });
      console.log(
        `replicas: A→B snapshot ${crossMs} ms after the REST call; node offline ${offlineMs} ms after SIGKILL`,
      );

      // Channels go before A's graceful stop: Deno 2.9.6 can abort the whole test process inside nghttp2 when a
      // server GOAWAY reaches a client session with a cancelled stream (denoland/deno#36788).
      closeAll();
      assert.equal(await a.stop(), 0, `A did not shut down cleanly:\n${a.output()}`);
    } finally {
      closeAll();
      for (const proc of procs) await proc.stop("SIGKILL").catch(() => {});
      await info.dispose();
      for (const proc of procs) await Deno.remove(proc.dataDir, { recursive: true }).catch(() => {});
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
    }
  },
});
