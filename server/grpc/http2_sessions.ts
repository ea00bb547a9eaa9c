/**
 * HTTP/2 session hooks shared by both ports.
 *
 * Deno 2.9's `node:http2` (nghttp2) aborts the whole process with
 * `nghttp2_session.c: find_stream_on_goaway_func: Assertion 'stream->closed_next == NULL' failed` (or
 * `free(): invalid pointer`) when a server session answers a peer's GOAWAY while recently closed streams are
 * still tracked — exactly what a grpc-js client does when it closes its channel after a burst of calls (an
 * agent after enrolling, or restarting). Reproduced with a bare `http2.createSecureServer` and a grpc-js
 * client in another process: 500 unary calls, 16 at a time, then `client.close()` kills the server within a
 * round or two. The server's own reply is a `session.close()` issued synchronously right after the `goaway`
 * event; skipping that one call avoids the crash (120 closes, no abort) and loses nothing: the peer has
 * already announced that it opens no new streams and closes the connection itself when its calls finish.
 */
import type http2 from "node:http2";
import type * as grpc from "@grpc/grpc-js";

/** NO_ERROR: the peer closes gracefully (other codes make the runtime destroy the session, which is safe). */
const NO_ERROR = 0;

/** Applies the GOAWAY workaround to one server session (see the module comment). */
export function keepSessionOpenOnPeerGoaway(session: http2.ServerHttp2Session): void {
  session.on("goaway", (code: number) => {
    if (code !== NO_ERROR) return;
    const close = session.close;
    session.close = function skipReplyToPeerGoaway() {
      session.close = close;
    } as typeof session.close;
    // Only the call made in the same tick as the event is skipped; later closes (shutdown) work as usual.
    queueMicrotask(() => {
      session.close = close;
    });
  });
}

/**
 * Runs `fn` for every HTTP/2 session a bound grpc-js server accepts. grpc-js does not expose its HTTP/2
 * servers, so this reads its (pinned-version) private map, and fails loudly if that ever changes rather than
 * silently leaving the sessions unguarded.
 */
export function onGrpcSessions(server: grpc.Server, fn: (session: http2.ServerHttp2Session) => void): void {
  const servers = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(servers instanceof Map) || servers.size === 0) {
    throw new Error(
      "cannot watch the policy port's HTTP/2 sessions: grpc-js internals changed (http2Servers)",
    );
  }
  for (const http2Server of servers.keys() as Iterable<http2.Http2SecureServer>) {
    http2Server.on("session", fn);
  }
}
