/**
 * Keepalive enforcement on the policy port: a client may ping at most once every `minIntervalMs` (pings are
 * allowed on a connection without calls). grpc-js's server sends keepalive pings but does not police the
 * client's, so this watches each HTTP/2 session: a ping sooner than the interval after the previous one is
 * a strike, and past `maxStrikes` the connection gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings" (what gRPC
 * servers send, and what grpc clients react to by slowing their keepalive) and is closed.
 */
import http2 from "node:http2";
import { Buffer } from "node:buffer";

/** Options of {@link enforcePingPolicy}. */
export interface PingPolicy {
  minIntervalMs: number;
  /** Too-early pings tolerated before the connection is closed (gRPC's default is 2). */
  maxStrikes: number;
  onViolation?: (peer: string) => void;
}

/** How long a client gets after GOAWAY to finish in-flight calls before the connection is dropped. */
const GOAWAY_GRACE_MS = 1_000;

/**
 * Highest stream id: the GOAWAY then cancels no stream itself (which also keeps clear of the runtime's
 * GOAWAY crash described in `http2_sessions.ts`); the connection is destroyed after the grace period.
 */
const LAST_STREAM_ID = 2 ** 31 - 1;

/** Watches one session's pings. */
export function enforcePingPolicy(session: http2.ServerHttp2Session, policy: PingPolicy): void {
  let last = -Infinity;
  let strikes = 0;
  session.on("ping", () => {
    const now = performance.now();
    if (now - last < policy.minIntervalMs) strikes++;
    last = now;
    if (strikes <= policy.maxStrikes || session.closed || session.destroyed) return;
    const socket = session.socket;
    policy.onViolation?.(`${socket?.remoteAddress}:${socket?.remotePort}`);
    session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, LAST_STREAM_ID, Buffer.from("too_many_pings"));
    setTimeout(() => {
      if (!session.destroyed) session.destroy();
    }, GOAWAY_GRACE_MS);
  });
}
