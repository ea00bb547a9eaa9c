/**
 * gRPC connections of the agent: the enrollment connection (system trust store, or no
 * verification when `server.insecure_skip_verify` is set) and the policy-port connection
 * (mutual TLS, TLS 1.3 only, the server verified against the CA received at enrollment, never
 * skipped). Certificate failures are diagnosed into a cause a person can act on.
 *
 * @module
 */

import http2 from "node:http2";
import tls from "node:tls";
import * as grpc from "@grpc/grpc-js";
import { createClient, type ServiceClient } from "../shared/grpc/adapter.ts";
import { EnrollmentService } from "../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { PolicyService } from "./gen/svc/policy/v1/policy_pb.ts";
import { readFileIfExists } from "./fs.ts";

/** Typed client of the policy service. */
export type PolicyClient = ServiceClient<typeof PolicyService>;
/** Typed client of the enrollment service. */
export type EnrollmentClient = ServiceClient<typeof EnrollmentService>;

/** The agent's credentials for the policy port. */
export interface Identity {
  keyPem: string;
  certPem: string;
  caPem: string;
}

/** Largest message the agent accepts or sends (spec: 8 MiB). */
export const MAX_MESSAGE_BYTES = 8 * 1024 * 1024;

/** Where distributions keep the system trust store bundle; the first that exists is used. */
export const SYSTEM_CA_BUNDLES: readonly string[] = [
  "/etc/ssl/certs/ca-certificates.crt",
  "/etc/pki/tls/certs/ca-bundle.crt",
  "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
  "/etc/ssl/ca-bundle.pem",
  "/etc/ssl/cert.pem",
];

/**
 * The system trust store as PEM: `SSL_CERT_FILE` when set (the usual OpenSSL override), else
 * the distribution bundle, else the runtime's built-in roots.
 */
export async function systemTrustStore(): Promise<string> {
  const override = Deno.env.get("SSL_CERT_FILE");
  for (const path of override ? [override] : SYSTEM_CA_BUNDLES) {
    const bytes = await readFileIfExists(path);
    if (bytes?.length) return new TextDecoder().decode(bytes);
  }
  return tls.rootCertificates.join("\n");
}

/** `host:port` with IPv6 literals bracketed. */
export function target(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * Works around a crash of the Deno 2.9 runtime (docs/upstream/README.md): its `node:http2` client dies, by SIGSEGV
 * or by SIGABRT on nghttp2's `find_stream_on_goaway_func: Assertion 'stream->closed_next == NULL'`, because the
 * guard that should hold back a session's teardown and its sending while nghttp2 processes received frames
 * (`is_sending`) is never set in the release build. A session closed by a callback of that processing is freed
 * under nghttp2's feet, and it crashes once the memory is reused (a GC). grpc-js does exactly that: its transport
 * closes the session in its 'goaway' listener, which runs while the runtime parses the server's GOAWAY, and every
 * server restart sends one (bench/agent_restart_stress.ts counts the agent's deaths).
 *
 * Every client session made after this call does in JavaScript what that guard should: while the session's native
 * `receive` runs (found through the runtime's private `kHandle` symbol; should that ever be missing, while its
 * 'goaway' event is handled), a `close()` or `destroy()` is carried out on the next turn of the event loop, and
 * nothing is sent (`sendPending`) until `receive` has returned. The session closes a moment later, its frames go
 * out a moment later; nothing else changes. Remove this once the runtime is fixed (the reproduction in
 * docs/upstream/ then survives).
 */
export function deferHttp2ClosesOutOfFrameProcessing(): void {
  if (http2Guarded) return;
  http2Guarded = true;
  const connect = http2.connect;
  http2.connect = function (this: unknown, ...args: Parameters<typeof http2.connect>) {
    const session = connect.apply(this, args);
    guardSession(session);
    return session;
  } as typeof http2.connect;
}

let http2Guarded = false;

type NativeSession = Record<"receive" | "sendPending", ((...a: unknown[]) => unknown) | undefined>;

function guardSession(session: http2.ClientHttp2Session): void {
  let receiving = 0;
  let goaway = false;
  session.once("connect", () => {
    const key = Object.getOwnPropertySymbols(session).find((s) => s.description === "kHandle");
    const handle = key && (session as unknown as Record<symbol, NativeSession | undefined>)[key];
    const receive = handle?.receive;
    if (!handle || typeof receive !== "function" || typeof handle.sendPending !== "function") return;
    let heldBack = false;
    handle.receive = function (this: unknown, ...a: unknown[]) {
      receiving++;
      try {
        return receive.apply(this, a);
      } finally {
        receiving--;
        // What was held back goes out now (the runtime also flushes after most, not all, receives).
        if (receiving === 0 && heldBack) {
          heldBack = false;
          handle.sendPending?.();
        }
      }
    };
    const sendPending = handle.sendPending;
    handle.sendPending = function (this: unknown, ...a: unknown[]) {
      if (receiving > 0) {
        heldBack = true;
        return;
      }
      return sendPending.apply(this, a);
    };
  });
  session.prependListener("goaway", () => {
    goaway = true;
    setImmediate(() => goaway = false);
  });
  const target = session as unknown as Record<"close" | "destroy", (...a: unknown[]) => unknown>;
  for (const name of ["close", "destroy"] as const) {
    const original = target[name];
    target[name] = function (this: unknown, ...a: unknown[]) {
      if (receiving === 0 && !goaway) return original.apply(this, a);
      setImmediate(() => original.apply(session, a));
    };
  }
}

const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
  "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
  // Pings no more often than the server's enforcement minimum (10 s) allows.
  "grpc.keepalive_time_ms": 60_000,
  "grpc.keepalive_timeout_ms": 20_000,
  // One attempt per call: the agent's own loop decides when to reconnect.
  "grpc.enable_retries": 0,
  "grpc.initial_reconnect_backoff_ms": 1000,
  "grpc.max_reconnect_backoff_ms": 1000,
};

/** Options of {@linkcode createEnrollmentClient}. */
export interface EnrollmentClientOptions {
  address: string;
  port: number;
  /** Skip certificate verification (enrollment only). */
  insecureSkipVerify: boolean;
  /** Trusted roots (PEM); default {@linkcode systemTrustStore}. */
  trustStore?: string;
}

/** Client of the enrollment service on the web port. */
export async function createEnrollmentClient(options: EnrollmentClientOptions): Promise<EnrollmentClient> {
  deferHttp2ClosesOutOfFrameProcessing();
  const credentials = options.insecureSkipVerify
    ? grpc.credentials.createSsl(null, null, null, {
      rejectUnauthorized: false,
      checkServerIdentity: () => undefined,
    })
    : grpc.credentials.createFromSecureContext(
      tls.createSecureContext({ ca: options.trustStore ?? await systemTrustStore(), minVersion: "TLSv1.2" }),
    );
  return createClient(EnrollmentService, target(options.address, options.port), {
    credentials,
    channelOptions: CHANNEL_OPTIONS,
  });
}

/** Options of {@linkcode createPolicyClient}. */
export interface PolicyClientOptions {
  /**
   * Milliseconds without an answer after which the connection is given up (a keepalive ping, then its
   * timeout; at least 15 s, as pings may not come more often than every 10 s); default the channel's 80 s.
   */
  silenceTimeoutMs?: number;
}

/** The keepalive settings that detect a silent server within `silenceMs`: ping at 60% of it (at least 10.5 s). */
export function keepaliveFor(silenceMs: number): { timeMs: number; timeoutMs: number } {
  const timeMs = Math.max(10_500, Math.round(silenceMs * 0.6));
  return { timeMs, timeoutMs: Math.max(1_000, silenceMs - timeMs) };
}

/**
 * Client of the policy service: mutual TLS, TLS 1.3, server pinned to the received CA. A server that stops
 * answering (a hung or stopped replica) is noticed by the keepalive ping's timeout, which ends the stream so
 * the daemon reconnects (to a healthy replica behind the same name).
 */
export function createPolicyClient(
  address: string,
  port: number,
  identity: Identity,
  options: PolicyClientOptions = {},
): PolicyClient {
  deferHttp2ClosesOutOfFrameProcessing();
  const secureContext = tls.createSecureContext({
    ca: identity.caPem,
    key: identity.keyPem,
    cert: identity.certPem,
    minVersion: "TLSv1.3",
  });
  return createClient(PolicyService, target(address, port), {
    credentials: grpc.credentials.createFromSecureContext(secureContext, { rejectUnauthorized: true }),
    channelOptions: options.silenceTimeoutMs === undefined ? CHANNEL_OPTIONS : {
      ...CHANNEL_OPTIONS,
      "grpc.keepalive_time_ms": keepaliveFor(options.silenceTimeoutMs).timeMs,
      "grpc.keepalive_timeout_ms": keepaliveFor(options.silenceTimeoutMs).timeoutMs,
    },
  });
}

/** Why a TLS connection failed, in words a person can act on. */
export interface TlsDiagnosis {
  cause: "unknown authority" | "name mismatch" | "expired" | "connection" | "other";
  detail: string;
}

const UNKNOWN_AUTHORITY = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "CERT_UNTRUSTED",
  "CERT_SIGNATURE_FAILURE",
]);

/** Maps a Node TLS error to a {@linkcode TlsDiagnosis}. */
export function classifyTlsError(err: { code?: string; message?: string }): TlsDiagnosis {
  const code = err.code ?? "";
  const detail = `${code ? `${code}: ` : ""}${err.message ?? "unknown error"}`;
  if (UNKNOWN_AUTHORITY.has(code) || /unknown ?issuer|self.signed/i.test(err.message ?? "")) {
    return { cause: "unknown authority", detail };
  }
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID" || /not ?valid ?for ?name|altname/i.test(err.message ?? "")) {
    return { cause: "name mismatch", detail };
  }
  if (code === "CERT_HAS_EXPIRED" || code === "CERT_NOT_YET_VALID") return { cause: "expired", detail };
  if (["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "ETIMEDOUT", "ECONNRESET", "EAI_AGAIN"].includes(code)) {
    return { cause: "connection", detail };
  }
  return { cause: "other", detail };
}

/**
 * Opens one TLS connection the way the enrollment client does and reports why it fails, or
 * undefined when it succeeds. grpc-js only says "UNAVAILABLE", so this names the real cause.
 */
export function diagnoseTls(
  options: { address: string; port: number; trustStore: string; timeoutMs?: number },
): Promise<TlsDiagnosis | undefined> {
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: options.address,
      port: options.port,
      servername: /^[\d.]+$|:/.test(options.address) ? undefined : options.address,
      ca: options.trustStore,
      ALPNProtocols: ["h2"],
      minVersion: "TLSv1.2",
    }, () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.setTimeout(options.timeoutMs ?? 10_000, () => {
      socket.destroy();
      resolve({ cause: "connection", detail: "timed out" });
    });
    socket.on("error", (err: Error & { code?: string }) => resolve(classifyTlsError(err)));
  });
}
