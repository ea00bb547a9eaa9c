/**
 * The policy port: a grpc-js server for `svc.policy.v1.PolicyService`, agents only. Mutual TLS is required
 * (client certificates verified against the internal CA; TLS 1.3; ALPN h2), and the gRPC limits follow the
 * spec: 256 concurrent streams per connection, 8 MiB messages, keepalive pings from clients no more often
 * than every 10 s (allowed without calls), server keepalive pings every hour with a 20 s timeout.
 */
import * as grpc from "@grpc/grpc-js";
import type { ServerContext } from "../context.ts";
import type { Hub } from "../hub/hub.ts";
import { createServiceDefinition, createServiceImplementation } from "../../shared/grpc/adapter.ts";
import { PolicyService } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { PolicyPortCredentials } from "./tls_credentials.ts";
import { createCertificateVerifier } from "./peer_identity.ts";
import { createPolicyHandlers } from "./policy_service.ts";
import { enforcePingPolicy } from "./ping_policy.ts";
import { keepSessionOpenOnPeerGoaway, onGrpcSessions } from "./http2_sessions.ts";
import { grpcErrorOf } from "./errors.ts";

/** gRPC limits of both ports (spec, Limits). */
export const GRPC_LIMITS = {
  maxConcurrentStreams: 256,
  maxMessageBytes: 8 << 20,
  minClientPingIntervalMs: 10_000,
  keepaliveTimeMs: 60 * 60 * 1000,
  keepaliveTimeoutMs: 20_000,
} as const;

/** How long `stop()` lets calls finish before cutting connections. */
const SHUTDOWN_GRACE_MS = 5_000;

/** A running policy port. */
export interface PolicyServer {
  port: number;
  stop(): Promise<void>;
}

/** Options of {@link startPolicyServer}. */
export interface PolicyServerOptions {
  /** Listen on this port instead of `server.policy_port` (a policy worker joining the port). */
  port?: number;
  /**
   * Share the port with other processes (SO_REUSEPORT): each policy worker binds the same port and the
   * kernel spreads new connections over them.
   */
  reusePort?: boolean;
}

/** Starts the policy port on `server.address`:`server.policy_port` (port 0 picks a free port). */
export async function startPolicyServer(
  ctx: ServerContext,
  hub: Hub,
  options: PolicyServerOptions = {},
): Promise<PolicyServer> {
  const verifier = createCertificateVerifier(ctx.db);
  const server = new grpc.Server({
    "grpc.max_concurrent_streams": GRPC_LIMITS.maxConcurrentStreams,
    "grpc.max_receive_message_length": GRPC_LIMITS.maxMessageBytes,
    "grpc.max_send_message_length": GRPC_LIMITS.maxMessageBytes,
    "grpc.keepalive_time_ms": GRPC_LIMITS.keepaliveTimeMs,
    "grpc.keepalive_timeout_ms": GRPC_LIMITS.keepaliveTimeoutMs,
    // Nothing reads channelz here; its per-connection bookkeeping cost ~1 KiB per stream (bench/stream_memory.ts).
    "grpc.enable_channelz": 0,
  });
  server.addService(
    createServiceDefinition(PolicyService),
    createServiceImplementation(PolicyService, createPolicyHandlers(ctx, { hub, verifier }), {
      translateError: grpcErrorOf,
      onUnexpectedError: (error, path) =>
        ctx.log.error("policy port: call failed", {
          method: path,
          error: error instanceof Error ? error.message : String(error),
        }),
    }),
  );
  const credentials = new PolicyPortCredentials({
    caPem: ctx.ca.certPem,
    certPem: ctx.internalCert.certPem,
    keyPem: ctx.internalCert.keyPem,
  });
  if (options.reusePort) listenWithReusePort(server);
  const host = ctx.config.server.address || "0.0.0.0";
  const wanted = options.port ?? ctx.config.server.policyPort;
  const target = host.includes(":") ? `[${host}]:${wanted}` : `${host}:${wanted}`;
  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(target, credentials, (err, bound) => err ? reject(err) : resolve(bound))
    );
  } catch (err) {
    throw new Error(
      `policy port: cannot listen on ${target} (server.policy_port): ${(err as Error).message}`,
    );
  }
  onGrpcSessions(server, (session) => {
    keepSessionOpenOnPeerGoaway(session);
    enforcePingPolicy(session, {
      minIntervalMs: GRPC_LIMITS.minClientPingIntervalMs,
      maxStrikes: 2,
      onViolation: (peer) =>
        ctx.log.warn("policy port: client pings too often; closing its connection", { peer }),
    });
  });
  ctx.log.info("policy port listening", { address: host, port });

  let stopped = false;
  return {
    port,
    async stop() {
      if (stopped) return;
      stopped = true;
      // Streams never end on their own: close them first (agents reconnect, possibly to another replica).
      await hub.closeAllStreams("server is shutting down; reconnect");
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, SHUTDOWN_GRACE_MS);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}

/**
 * Makes every listener of a grpc-js server bind with `reusePort`. grpc-js has no option for it; it calls
 * `listen(address, callback)` with an address object on the HTTP/2 server it creates per address, and
 * `node:net` (Deno included) reads `reusePort` from that object. Like `onGrpcSessions`, this relies on a
 * (pinned-version) private method and fails loudly rather than silently binding an exclusive port.
 */
function listenWithReusePort(server: grpc.Server): void {
  type Listen = (address: unknown, callback: () => void) => unknown;
  const internals = server as unknown as { createHttp2Server?: (credentials: unknown) => { listen: Listen } };
  const create = internals.createHttp2Server;
  if (typeof create !== "function") {
    throw new Error(
      "cannot share the policy port between workers: grpc-js internals changed (createHttp2Server)",
    );
  }
  internals.createHttp2Server = (credentials) => {
    const http2Server = create.call(server, credentials);
    const listen = http2Server.listen;
    http2Server.listen = (address, callback) => {
      if (typeof address !== "object" || address === null || !("port" in address)) {
        throw new Error("cannot share the policy port between workers: grpc-js listens on a non-TCP address");
      }
      return listen.call(http2Server, { ...address, reusePort: true }, callback);
    };
    return http2Server;
  };
}
