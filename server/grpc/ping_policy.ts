/**
 * Keepalive enforcement for HTTP/2 sessions that carry gRPC (the policy port, and the enrollment service on
 * the web port), following gRPC's own server policy:
 * - a client may ping at most once every `minIntervalMs` while the server sends nothing; pings are allowed on
 *   a connection without calls (`permit_without_stream`);
 * - a ping that arrives after the server sent HEADERS or DATA since the previous ping is never a strike: gRPC
 *   clients in Go, Python and C++ ping while they receive (flow-control/BDP probes), and a reading agent
 *   must keep its stream;
 * - past `maxStrikes` too-early pings the connection gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings" (what
 *   gRPC servers send, and what gRPC clients react to by slowing their keepalive) and is closed.
 * grpc-js's server sends keepalive pings but does not police the client's, so this watches each session.
 *
 * "Sent since the previous ping" is read from two signals: a stream of the session answering (`respond`,
 * `write`, `end`), and the bytes the session wrote to its socket beyond the acknowledgement of a ping (a
 * large message goes out in many DATA frames long after its one `write`).
 *
 * {@link keepSessionAlive} is the server's own keepalive for sessions of a `node:http2` server (grpc-js does
 * its own on the policy port): a ping every `timeMs`, the connection closed when one is not answered within
 * `timeoutMs`.
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

/**
 * Bytes the session may write between two pings without having sent HEADERS or DATA: the acknowledgement of
 * the ping (17) and a few control frames (SETTINGS acknowledgements, WINDOW_UPDATE, RST_STREAM).
 */
const CONTROL_BYTES = 17 + 32;

/** The stream methods that put HEADERS or DATA on the wire. */
const SENDING_METHODS = ["respond", "write", "end"] as const;

/** Calls `mark` whenever a stream of `session` sends headers or data. */
function onStreamOutput(session: http2.ServerHttp2Session, mark: () => void): void {
  session.on("stream", (stream: http2.ServerHttp2Stream) => {
    for (const name of SENDING_METHODS) {
      const original = stream[name] as (...args: unknown[]) => unknown;
      (stream as unknown as Record<string, unknown>)[name] = function (this: unknown, ...args: unknown[]) {
        mark();
        return original.apply(this, args);
      };
    }
  });
}

/** Watches one session's pings. */
export function enforcePingPolicy(session: http2.ServerHttp2Session, policy: PingPolicy): void {
  let last = -Infinity;
  let strikes = 0;
  let streamsSent = false;
  const written = () => session.socket?.bytesWritten ?? 0;
  let writtenAtPing = written();
  onStreamOutput(session, () => streamsSent = true);
  session.on("ping", () => {
    const now = performance.now();
    const sentData = streamsSent || written() - writtenAtPing > CONTROL_BYTES;
    streamsSent = false;
    writtenAtPing = written();
    if (sentData) {
      // gRPC: sending data or headers resets the strikes and the ping clock.
      strikes = 0;
      last = now;
      return;
    }
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

/** Options of {@link keepSessionAlive}. */
export interface KeepaliveOptions {
  timeMs: number;
  timeoutMs: number;
  onTimeout?: (peer: string) => void;
}

/** Pings the client every `timeMs`; closes the session when a ping is not answered within `timeoutMs`. */
export function keepSessionAlive(session: http2.ServerHttp2Session, options: KeepaliveOptions): void {
  const interval = setInterval(() => {
    if (session.closed || session.destroyed) return;
    const timer = setTimeout(() => {
      const socket = session.socket;
      options.onTimeout?.(`${socket?.remoteAddress}:${socket?.remotePort}`);
      if (!session.destroyed) session.destroy();
    }, options.timeoutMs);
    Deno.unrefTimer(timer);
    const sent = session.ping((err) => {
      clearTimeout(timer);
      if (err && !session.destroyed) session.destroy();
    });
    if (!sent) clearTimeout(timer);
  }, options.timeMs);
  Deno.unrefTimer(interval);
  session.once("close", () => clearInterval(interval));
}
