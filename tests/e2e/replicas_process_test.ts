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
import { type ServerProcess, startServerProcess } from "../helpers/process.ts";
import { eventually, subscribe } from "../helpers/agents.ts";
import { loadOrCreateCa } from "../../server/pki/mod.ts";
import { CSRF_COOKIE, CSRF_HEADER } from "../../server/http/csrf.ts";
import { createClient, GrpcError, type ServiceClient } from "../../shared/grpc/adapter.ts";
import { EnrollmentService } from "../../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { EventType, PolicyService } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { generateKeyAndCsr } from "../../shared/pki/csr.ts";

const REPLICA_TIMEOUT_SECONDS = 3;
/** Deadline of waits in this file: generous, because the suite runs beside browsers on 2 loaded cores. */
const LOADED_MACHINE_DEADLINE_MS = 120_000;
const FIREFOX_CONTENT = JSON.stringify({ DisableTelemetry: true });

// deno-lint-ignore no-explicit-any
type Json = any;

/** A logged-in REST session: cookie jar plus the CSRF double submit, as the README tells scripts to do. */
interface Rest {
  /** The status and parsed body, whatever the status. */
  request(method: string, path: string, body?: unknown): Promise<{ status: number; json: Json }>;
  /** The parsed body of a 2xx answer; throws with the body otherwise. */
  call(method: string, path: string, body?: unknown): Promise<Json>;
  close(): void;
}

async function login(server: ServerProcess, caPem: string, password: string): Promise<Rest> {
  const client = Deno.createHttpClient({ caCerts: [caPem] });
  const jar = new Map<string, string>();
  const request = async (method: string, path: string, body?: unknown) => {
    const headers = new Headers();
    if (jar.size > 0) headers.set("cookie", [...jar].map(([k, v]) => `${k}=${v}`).join("; "));
    const csrf = jar.get(CSRF_COOKIE);
    if (csrf && method !== "GET") headers.set(CSRF_HEADER, csrf);
    if (body !== undefined) headers.set("content-type", "application/json");
    const res = await fetch(`${server.baseUrl}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      client,
      signal: AbortSignal.timeout(LOADED_MACHINE_DEADLINE_MS),
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const eq = pair.indexOf("=");
      jar.set(pair.slice(0, eq).trim(), decodeURIComponent(pair.slice(eq + 1).trim()));
    }
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  };
  const call = async (method: string, path: string, body?: unknown): Promise<Json> => {
    const res = await request(method, path, body);
    if (res.status < 200 || res.status > 299) {
      throw new Error(`${method} ${path} → ${res.status}: ${JSON.stringify(res.json)}`);
    }
    return res.json;
  };
  try {
    await call("POST", "/api/v1/auth/login", { username: "admin", password });
  } catch (err) {
    client.close();
    throw err;
  }
  assert.ok(jar.get(CSRF_COOKIE), "login sets the CSRF cookie");
  return { request, call, close: () => client.close() };
}

/** The line svc-server prints before exiting when it cannot start. */
const FATAL = "svc-server: cannot start:";

/**
 * Starts one replica. The process helper's readiness probe trusts `{data_dir}/pki/ca/ca.crt`, which a replica
 * given ca.cert_file never writes, so readiness is polled here with the shared CA instead. `freePort()` only
 * reserves a port until it returns, so a parallel test can take it first: on EADDRINUSE the replica starts
 * again on fresh ports, in the same data dir (which may already hold the initial admin password).
 */
async function startReplica(
  name: string,
  options: { caPem: string; config: Record<string, Record<string, unknown>> },
): Promise<ServerProcess> {
  const client = Deno.createHttpClient({ caCerts: [options.caPem] });
  let dataDir: string | undefined;
  try {
    for (let attempt = 1;; attempt++) {
      const proc = await startServerProcess({ config: options.config, dataDir, wait: false });
      dataDir = proc.dataDir;
      const state = await waitUntil(async () => {
        if (proc.output().includes(FATAL)) return "failed";
        try {
          const res = await fetch(`${proc.baseUrl}/api/v1/version`, {
            client,
            // Per attempt; waitUntil retries. Short attempts on a loaded machine would never succeed.
            signal: AbortSignal.timeout(10_000),
          });
          await res.body?.cancel();
          return res.ok ? "ready" : undefined;
        } catch {
          return undefined;
        }
      }, 30_000);
      if (state === "ready") return proc;
      await proc.stop("SIGKILL");
      if (state === "failed" && proc.output().includes("EADDRINUSE") && attempt < 3) continue;
      throw new Error(
        `replica ${name} did not start (${state ?? "no answer within 30 s"}):\n${proc.output()}`,
      );
    }
  } catch (err) {
    if (dataDir) await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    throw err;
  } finally {
    client.close();
  }
}

/** Polls `check` every 100 ms until it returns a value; undefined when `timeoutMs` passes first. */
async function waitUntil<T>(check: () => Promise<T | undefined>, timeoutMs: number): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  return undefined;
}

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
