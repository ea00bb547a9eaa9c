/**
 * Agent-facing servers and simulated agents for tests: a real `ServerContext` (from
 * {@link createTestServer}), the real hub, policy port (grpc-js, mTLS) and web port (node:http2, enrollment
 * bridge + REST app), and agents that enroll with real CSRs over real TLS and keep real policy streams.
 *
 * ```ts
 * const server = await startAgentServer(db);
 * const group = await createGroup(db, "lab");
 * const agent = await enrollAgent(server, { name: "pc-1", groupId: group });
 * const stream = subscribe(agent);
 * const snapshot = await stream.nextSnapshot();
 * ```
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import type { Db } from "../../server/db/db.ts";
import type { ServerContext } from "../../server/context.ts";
import { createHub, type Hub, type HubOptions } from "../../server/hub/hub.ts";
import { startPolicyServer } from "../../server/grpc/policy_server.ts";
import { createEnrollmentHandlers } from "../../server/grpc/enrollment_service.ts";
import { startWebPort } from "../../server/web_port.ts";
import { createEnrollmentToken, createNodeGroup } from "../../server/domain/node_groups.ts";
import { changePolicyState, createPolicy } from "../../server/domain/policies.ts";
import { createBinding, updateBinding } from "../../server/domain/bindings.ts";
import { createClient, GrpcError, type ServerStream, type ServiceClient } from "../../shared/grpc/adapter.ts";
import { EnrollmentService } from "../../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { EventType, PolicyService, type PolicyUpdate } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { generateKeyAndCsr } from "../../shared/pki/csr.ts";
import { type ConfigOverrides, createTestServer, type TestServer, type TestServerOptions } from "./app.ts";

/** A running agent-facing server on a test database. */
export interface AgentServer {
  test: TestServer;
  ctx: ServerContext;
  hub: Hub;
  policyPort: number;
  webPort: number;
  /** Stops the ports and the hub (the database belongs to the caller). */
  stop(): Promise<void>;
}

/** Options of {@link startAgentServer}. */
export interface AgentServerOptions {
  hub?: HubOptions;
  config?: ConfigOverrides;
  /** REST routes to mount besides identity and audit (see {@link createTestServer}). */
  routes?: TestServerOptions["routes"];
  /** Least severe level captured in `test.logs`; default warn. */
  logLevel?: TestServerOptions["logLevel"];
}

/** Starts hub, policy port and web port (ephemeral ports on 127.0.0.1) on `db`. */
export async function startAgentServer(db: Db, options: AgentServerOptions = {}): Promise<AgentServer> {
  const test = await createTestServer({
    db,
    logLevel: options.logLevel ?? "warn",
    routes: options.routes,
    config: {
      ...options.config,
      server: { address: "127.0.0.1", ...options.config?.server, enrollmentPort: 0, policyPort: 0 },
    },
  });
  const ctx = test.ctx;
  const hub = createHub(ctx, { heartbeatIntervalMs: 500, ...options.hub });
  await hub.start();
  const policy = await startPolicyServer(ctx, hub);
  const web = await startWebPort(ctx, { fetch: test.fetch, enrollment: createEnrollmentHandlers(ctx) });
  let stopped = false;
  return {
    test,
    ctx,
    hub,
    policyPort: policy.port,
    webPort: web.port,
    async stop() {
      if (stopped) return;
      stopped = true;
      await web.stop();
      await policy.stop();
      await hub.stop();
      await test.close();
    },
  };
}

/** Creates a node group; returns its id. */
export async function createGroup(db: Db, name: string): Promise<string> {
  return (await db.transaction((tx) => createNodeGroup(tx, { name }))).id;
}

/** Creates and releases a policy; returns its id. Unknown types need no particular content. */
export async function releasedPolicy(
  db: Db,
  options: { name: string; type?: string; content?: string },
): Promise<string> {
  return await db.transaction(async (tx) => {
    const policy = await createPolicy(tx, {
      name: options.name,
      type: options.type ?? "TestType",
      content: options.content ?? JSON.stringify({ setting: options.name }),
      createdBy: "test",
    });
    await changePolicyState(tx, policy.id, "released");
    return policy.id;
  });
}

/** Binds a policy to a group (enabled unless said otherwise); returns the binding id. */
export async function bind(
  db: Db,
  policyId: string,
  groupId: string,
  options: { priority?: number; enabled?: boolean } = {},
): Promise<string> {
  return await db.transaction(async (tx) => {
    const binding = await createBinding(tx, {
      policyId,
      nodeGroupId: groupId,
      priority: options.priority ?? 0,
    });
    if (options.enabled !== false) await updateBinding(tx, binding.id, { state: "enabled" });
    return binding.id;
  });
}

/** A fresh one-time token for a group (the plaintext). */
export async function enrollmentToken(db: Db, groupId: string): Promise<string> {
  return (await createEnrollmentToken(db, groupId, { createdBy: "test" })).token;
}

/** TLS credentials trusting the server's CA, without a client certificate. */
export function anonymousCredentials(server: AgentServer): grpc.ChannelCredentials {
  return grpc.credentials.createSsl(Buffer.from(server.ctx.ca.certPem));
}

/** An enrollment client on the web port (optionally presenting a client certificate). */
export function enrollmentClient(
  server: AgentServer,
  cert?: { certPem: string; keyPem: string },
): ServiceClient<typeof EnrollmentService> {
  const credentials = cert
    ? grpc.credentials.createSsl(
      Buffer.from(server.ctx.ca.certPem),
      Buffer.from(cert.keyPem),
      Buffer.from(cert.certPem),
    )
    : anonymousCredentials(server);
  return createClient(EnrollmentService, `localhost:${server.webPort}`, { credentials });
}

/** An enrolled simulated agent. */
export interface Agent {
  name: string;
  nodeId: string;
  certPem: string;
  keyPem: string;
  /** Policy service client on the server it enrolled with. */
  policy: ServiceClient<typeof PolicyService>;
  /** A policy client with this agent's certificate on another server (same CA), e.g. another replica. */
  policyClientFor(server: AgentServer): ServiceClient<typeof PolicyService>;
  close(): void;
}

/** Policy-port client presenting `cert`. */
export function policyClient(
  server: AgentServer,
  cert: { certPem: string; keyPem: string },
): ServiceClient<typeof PolicyService> {
  return createClient(PolicyService, `localhost:${server.policyPort}`, {
    credentials: grpc.credentials.createSsl(
      Buffer.from(server.ctx.ca.certPem),
      Buffer.from(cert.keyPem),
      Buffer.from(cert.certPem),
    ),
  });
}

/** Enrolls an agent through the web port with a fresh token for `groupId`. */
export async function enrollAgent(
  server: AgentServer,
  options: { name: string; groupId: string },
): Promise<Agent> {
  const token = await enrollmentToken(server.ctx.db, options.groupId);
  const { keyPem, csrPem } = await generateKeyAndCsr(options.name);
  const enrollment = enrollmentClient(server);
  try {
    const res = await enrollment.enroll({ enrollmentToken: token, csrPem, nodeName: options.name });
    const cert = { certPem: res.signedCertPem, keyPem };
    const clients: ServiceClient<typeof PolicyService>[] = [];
    const clientFor = (s: AgentServer) => {
      const c = policyClient(s, cert);
      clients.push(c);
      return c;
    };
    return {
      name: options.name,
      nodeId: res.nodeId,
      ...cert,
      policy: clientFor(server),
      policyClientFor: clientFor,
      close: () => clients.forEach((c) => c.close()),
    };
  } finally {
    enrollment.close();
  }
}

/** Runs `fn` with an agent-facing server on `db` (`options` as {@link startAgentServer} takes them), then stops it. */
export async function withAgentServer(
  db: Db,
  fn: (server: AgentServer) => Promise<void>,
  options: AgentServerOptions = {},
): Promise<void> {
  const server = await startAgentServer(db, options);
  try {
    await fn(server);
  } finally {
    await server.stop();
  }
}

/** Runs `fn` with a server and an agent `pc-1` enrolled into a new node group `lab`, then stops both. */
export async function withEnrolledAgent(
  db: Db,
  fn: (server: AgentServer, agent: Agent, groupId: string) => Promise<void>,
): Promise<void> {
  await withAgentServer(db, async (server) => {
    const groupId = await createGroup(db, "lab");
    const agent = await enrollAgent(server, { name: "pc-1", groupId });
    try {
      await fn(server, agent, groupId);
    } finally {
      agent.close();
    }
  });
}

/**
 * Asserts that `promise` fails with the gRPC status `code` and, when `message` is given, a message equal to it
 * (a string) or matching it (a pattern).
 */
export async function rejectsWithGrpc(
  promise: Promise<unknown>,
  code: grpc.status,
  message?: string | RegExp,
): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof GrpcError, `expected a GrpcError, got ${err}`);
    assert.equal(
      err.code,
      code,
      `expected ${grpc.status[code]}, got ${grpc.status[err.code]}: ${err.message}`,
    );
    if (typeof message === "string") assert.equal(err.message, message);
    else if (message) assert.match(err.message, message);
    return true;
  });
}

/** A snapshot as received: policies by id, and the revision it carried. */
export interface ReceivedSnapshot {
  revision: number;
  policies: PolicyUpdate["policy"][];
  /** Messages that made up the snapshot. */
  messages: PolicyUpdate[];
}

/** A policy stream being read in the background. */
export interface StreamWatcher {
  /** Every message received so far. */
  messages: PolicyUpdate[];
  /** Resolves with the next complete snapshot after the ones already taken. */
  nextSnapshot(timeoutMs?: number): Promise<ReceivedSnapshot>;
  /** Resolves when a received message satisfies `predicate` (scanning from the start). */
  waitFor(predicate: (m: PolicyUpdate) => boolean, timeoutMs?: number): Promise<PolicyUpdate>;
  /** Number of complete snapshots received so far. */
  snapshotCount(): number;
  /** Resolves with the error that ended the stream (or undefined when it ended cleanly). */
  ended: Promise<unknown>;
  stream: ServerStream<PolicyUpdate>;
  cancel(): void;
  /** Stops reading (like a stuck agent): messages pile up in flow control and the server's buffers. */
  pause(): void;
  /** Reads again. */
  resume(): void;
}

/** Opens `SubscribePolicyUpdates` and reads it in the background. */
export function subscribe(
  client: ServiceClient<typeof PolicyService>,
  request: { clientId?: string; lastKnownRevision?: number } = {},
): StreamWatcher {
  const stream = client.subscribePolicyUpdates({
    clientId: request.clientId ?? "",
    lastKnownRevision: BigInt(request.lastKnownRevision ?? 0),
  });
  const messages: PolicyUpdate[] = [];
  let taken = 0;
  let gate: { promise: Promise<void>; open: () => void } | undefined;
  let wake: (() => void) | undefined;
  let finished: unknown = null;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const ended = (async () => {
    try {
      for await (const m of stream) {
        messages.push(m);
        notify();
        // While paused nothing pulls the next message, so nothing more is read from the connection.
        if (gate) await gate.promise;
      }
      finished = undefined;
    } catch (err) {
      finished = err;
    }
    notify();
    return finished;
  })();

  async function until<T>(check: () => T | undefined, timeoutMs: number, what: string): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    while (true) {
      const found = check();
      if (found !== undefined) return found;
      if (finished !== null) throw new Error(`stream ended while waiting for ${what}: ${String(finished)}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  const completes = () => messages.filter((m) => m.type === EventType.SNAPSHOT && m.snapshotComplete).length;

  return {
    messages,
    stream,
    ended,
    snapshotCount: completes,
    cancel() {
      gate?.open();
      gate = undefined;
      stream.cancel();
    },
    pause() {
      if (gate) return;
      let open = () => {};
      const promise = new Promise<void>((resolve) => (open = resolve));
      gate = { promise, open };
    },
    resume() {
      const g = gate;
      gate = undefined;
      g?.open();
    },
    nextSnapshot(timeoutMs = 10_000) {
      return until(
        () => {
          let seen = 0;
          let start = 0;
          for (let i = 0; i < messages.length; i++) {
            const m = messages[i];
            if (m.type !== EventType.SNAPSHOT) continue;
            if (!m.snapshotComplete) continue;
            if (seen === taken) {
              taken++;
              const parts = messages.slice(start, i + 1).filter((p) => p.type === EventType.SNAPSHOT);
              return {
                revision: Number(m.revision),
                policies: parts.filter((p) => p.policy !== undefined).map((p) => p.policy),
                messages: parts,
              };
            }
            seen++;
            start = i + 1;
          }
          return undefined;
        },
        timeoutMs,
        `snapshot #${taken + 1}`,
      );
    },
    waitFor(predicate, timeoutMs = 10_000) {
      return until(() => messages.find(predicate), timeoutMs, "a matching stream message");
    },
  };
}

/** Polls `check` until it returns true (database state written asynchronously by the server). */
export async function eventually(
  check: () => Promise<boolean>,
  options: { timeoutMs?: number; what: string },
) {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${options.what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The status column of a node. */
export async function nodeStatus(db: Db, nodeId: string): Promise<string> {
  const [row] = await db.query<{ status: string }>("SELECT status FROM nodes WHERE id = $1", [nodeId]);
  return row?.status ?? "(deleted)";
}
