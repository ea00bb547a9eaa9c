/**
 * The web port: one TLS listener (HTTP/2 and HTTP/1.1) for the web UI, the REST API, the agent package
 * repository and the enrollment gRPC service.
 *
 * Routing (spec, "Web port routing"): an HTTP/2 request whose Content-Type starts with `application/grpc`
 * goes to the enrollment service through the unary gRPC bridge; every other request becomes a fetch
 * `Request` for the REST/SPA app (which adds security headers and CSRF checks itself).
 *
 * It is the unauthenticated, most exposed port, so its HTTP/2 sessions get the policy port's gRPC limits
 * (GRPC_LIMITS): 256 concurrent streams, 8 MiB messages (in the bridge), client pings no more often than
 * every 10 s without data in between (ping_policy.ts), and a server keepalive ping every hour that must be
 * answered within 20 s.
 *
 * TLS: TLS 1.2 minimum, ECDHE with AES-GCM only for TLS 1.2, curves X25519, P-256, P-384. A client
 * certificate is optional, but one that is presented must chain to the internal CA (otherwise the connection
 * is closed) and must not be revoked (otherwise every request on it is refused).
 */
import http2 from "node:http2";
import type { Http2ServerRequest, Http2ServerResponse, ServerHttp2Session } from "node:http2";
import type { Socket } from "node:net";
import type { TLSSocket } from "node:tls";
import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import type { ServerContext } from "./context.ts";
import { GrpcError } from "../shared/grpc/adapter.ts";
import { EnrollmentService } from "../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import {
  CERTIFICATE_EXEMPT_METHODS,
  type EnrollmentHandlers,
  type EnrollmentPeer,
} from "./grpc/enrollment_service.ts";
import {
  certificateFromPeer,
  createCertificateVerifier,
  type VerifiedCertificate,
} from "./grpc/peer_identity.ts";
import { type PeerHandler, percentEncode, serveGrpcUnary } from "./grpc/web_bridge.ts";
import { keepSessionOpenOnPeerGoaway } from "./grpc/http2_sessions.ts";
import { enforcePingPolicy, type KeepaliveOptions, keepSessionAlive } from "./grpc/ping_policy.ts";
import { GRPC_LIMITS } from "./grpc/policy_server.ts";
import { securityHeaderEntries } from "./http/security_headers.ts";

/** Header carrying the TCP peer address to the app; any client-sent copy is dropped first. */
export const REMOTE_ADDR_HEADER = "x-svc-remote-addr";

/** Largest request body passed to the app. */
export const MAX_BODY_BYTES = 8 << 20;

/**
 * TLS 1.2 suites: ECDHE key exchange with AES-GCM only (TLS 1.3 suites are all AEAD and stay enabled).
 * Deno's TLS (rustls) ignores this list: it never offers CBC, RC4, 3DES or static-RSA suites at all, but it
 * also accepts ECDHE with ChaCha20-Poly1305 for a TLS 1.2 client that offers no AES-GCM suite, so the
 * `secureConnection` handler closes such connections. The list is kept so the intent holds on a runtime that
 * honours it.
 *
 * Refusing the suite inside the handshake is not possible on Deno 2.9 (checked): `Deno.listenTls` and
 * `Deno.serve` take only a certificate, a key and ALPN protocols; and a ClientHello filter in front of the TLS
 * server cannot work, because the runtime terminates TLS below the JavaScript socket: a connection whose
 * first bytes were read in JavaScript and handed on (`emit("connection")` after `unshift`) never completes
 * its handshake. A TCP relay to an internal listener would work but hide every client's address (audit, rate
 * limits). Turning TLS 1.2 off would refuse it too, but the spec makes TLS 1.2 the minimum, not 1.3.
 */
const TLS12_CIPHERS = [
  "ECDHE-ECDSA-AES128-GCM-SHA256",
  "ECDHE-RSA-AES128-GCM-SHA256",
  "ECDHE-ECDSA-AES256-GCM-SHA384",
  "ECDHE-RSA-AES256-GCM-SHA384",
].join(":");

/** Connection-specific headers that must not be forwarded (and are forbidden in HTTP/2). */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
]);

/** Highest HTTP/2 stream id (GOAWAY that cancels no stream). */
const LAST_STREAM_ID = 2 ** 31 - 1;

/** How long `stop()` waits for requests in flight before cutting connections. */
const SHUTDOWN_GRACE_MS = 5_000;

/** What the web port serves. */
export interface WebPortOptions {
  /** The REST/SPA app. */
  fetch: (req: Request) => Promise<Response>;
  /** Enrollment service handlers (served as gRPC). */
  enrollment: EnrollmentHandlers;
  /** The server's keepalive pings: GRPC_LIMITS (every hour, 20 s to answer) unless given (tests). */
  keepalive?: Pick<KeepaliveOptions, "timeMs" | "timeoutMs">;
}

/** A running web port. */
export interface WebPort {
  port: number;
  /**
   * Presents `cert` (PEM chain and key) to every later handshake, without a restart (ACME renewals);
   * connections already open keep the certificate they started with.
   */
  setCertificate(cert: { certPem: string; keyPem: string }): void;
  stop(): Promise<void>;
}

/** Starts the web port on `server.address`:`server.enrollment_port` (port 0 picks a free port). */
export async function startWebPort(ctx: ServerContext, options: WebPortOptions): Promise<WebPort> {
  const verifier = createCertificateVerifier(ctx.db);
  const contextOptions = (cert: { certPem: string; keyPem: string }) => ({
    cert: cert.certPem,
    key: cert.keyPem,
    ca: ctx.ca.certPem,
    minVersion: "TLSv1.2" as const,
    ciphers: TLS12_CIPHERS,
    ecdhCurve: "X25519:P-256:P-384",
  });
  const server = http2.createSecureServer({
    allowHTTP1: true,
    ...contextOptions(ctx.webCert),
    requestCert: true,
    rejectUnauthorized: false,
    ALPNProtocols: ["h2", "http/1.1"],
    settings: { maxConcurrentStreams: GRPC_LIMITS.maxConcurrentStreams },
  });
  const sockets = new Set<Socket>();
  const sessions = new Set<ServerHttp2Session>();
  /** HTTP/1.1 requests in flight per socket, so shutdown can close idle keep-alive connections at once. */
  const busy = new Map<Socket, number>();
  let stopping = false;
  const closeIfIdle = (socket: Socket) => {
    if (stopping && !busy.has(socket) && (socket as TLSSocket).alpnProtocol !== "h2") socket.end();
  };

  server.on("secureConnection", (socket: TLSSocket) => {
    // The runtime's TLS stack ignores `ciphers` and may settle TLS 1.2 on ChaCha20-Poly1305; the policy is
    // ECDHE with AES-GCM only for 1.2, so such a connection is closed before it can carry a request.
    const cipher = socket.getCipher?.();
    if (
      socket.getProtocol?.() === "TLSv1.2" &&
      !/^ECDHE-(ECDSA|RSA)-AES(128|256)-GCM-SHA(256|384)$/.test(cipher?.name ?? "")
    ) {
      ctx.log.debug("web port: refusing a TLS 1.2 cipher outside ECDHE+AES-GCM", {
        peer: socket.remoteAddress,
        cipher: cipher?.name ?? "unknown",
      });
      socket.destroy();
      return;
    }
    const presented = Object.keys(socket.getPeerCertificate() ?? {}).length > 0;
    if (presented && !socket.authorized) {
      ctx.log.debug("web port: refusing a client certificate that does not chain to the internal CA", {
        peer: socket.remoteAddress,
        reason: String(socket.authorizationError),
      });
      socket.destroy();
      return;
    }
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  server.on("session", (session: ServerHttp2Session) => {
    keepSessionOpenOnPeerGoaway(session);
    enforcePingPolicy(session, {
      minIntervalMs: GRPC_LIMITS.minClientPingIntervalMs,
      maxStrikes: 2,
      onViolation: (peer) =>
        ctx.log.warn("web port: client pings too often; closing its connection", { peer }),
    });
    keepSessionAlive(session, {
      timeMs: options.keepalive?.timeMs ?? GRPC_LIMITS.keepaliveTimeMs,
      timeoutMs: options.keepalive?.timeoutMs ?? GRPC_LIMITS.keepaliveTimeoutMs,
      onTimeout: (peer) =>
        ctx.log.info("web port: client did not answer a keepalive ping; closing", { peer }),
    });
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
  });
  server.on(
    "tlsClientError",
    (err: Error) => ctx.log.debug("web port: TLS handshake failed", { error: err.message }),
  );

  server.on("request", (req: Http2ServerRequest, res: Http2ServerResponse) => {
    if (req.httpVersionMajor === 1) {
      const socket = req.socket as Socket;
      busy.set(socket, (busy.get(socket) ?? 0) + 1);
      res.once("close", () => {
        const left = (busy.get(socket) ?? 1) - 1;
        if (left > 0) busy.set(socket, left);
        else busy.delete(socket);
        closeIfIdle(socket);
      });
    }
    handle(req, res).catch((err) => {
      ctx.log.error("web port: request failed", { path: req.url, error: String(err) });
      if (!res.headersSent) {
        res.writeHead(500, { "content-type": "application/json", ...ERROR_SECURITY_HEADERS });
        res.end(
          JSON.stringify({
            error: { code: "internal", message: "internal server error; the server log has details" },
          }),
        );
      } else {
        res.destroy();
      }
    });
  });

  async function handle(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    const socket = req.socket as TLSSocket;
    const remoteAddr = socket.remoteAddress ?? "";
    const isGrpc = req.httpVersionMajor === 2 &&
      String(req.headers["content-type"] ?? "").toLowerCase().startsWith("application/grpc");
    let verifiedCert: VerifiedCertificate | undefined;
    if (socket.authorized) {
      verifiedCert = certificateFromPeer(socket.getPeerCertificate());
      if (verifiedCert) {
        try {
          await verifier.verify(verifiedCert);
        } catch (err) {
          const message = err instanceof GrpcError ? err.message : "client certificate cannot be checked";
          if (!(err instanceof GrpcError)) {
            ctx.log.error("web port: certificate check failed", { error: String(err) });
          }
          return refuse(res, { isGrpc, message });
        }
      }
    }
    if (isGrpc) {
      const peer: EnrollmentPeer = {
        verifiedCert,
        remoteAddr,
        metadata: (name) => {
          const value = req.headers[name.toLowerCase()];
          return Array.isArray(value) ? value[0] : value;
        },
      };
      await serveGrpcUnary(req, res, {
        service: EnrollmentService,
        handlers: options.enrollment as unknown as Record<string, PeerHandler>,
        certificateExempt: CERTIFICATE_EXEMPT_METHODS,
        peer,
        log: ctx.log,
      });
      return;
    }
    const request = await toFetchRequest(req, remoteAddr);
    if (request instanceof Response) return await writeResponse(req, res, request);
    await writeResponse(req, res, await options.fetch(request));
  }

  const host = ctx.config.server.address || "0.0.0.0";
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) =>
      reject(
        new Error(
          `web port: cannot listen on ${host}:${ctx.config.server.enrollmentPort} (server.enrollment_port): ${err.message}`,
        ),
      );
    server.once("error", onError);
    server.listen(ctx.config.server.enrollmentPort, host, () => {
      server.off("error", onError);
      resolve();
    });
  });
  server.on("error", (err: Error) => ctx.log.error("web port: server error", { error: err.message }));
  const port = (server.address() as { port: number }).port;
  ctx.log.info("web port listening", { address: host, port });

  let stopped: Promise<void> | undefined;
  return {
    port,
    setCertificate(cert) {
      // A new context replaces every context option, so the CA and TLS settings are given again.
      server.setSecureContext(contextOptions(cert));
    },
    stop() {
      stopping = true;
      stopped ??= new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          for (const socket of sockets) socket.destroy();
        }, SHUTDOWN_GRACE_MS);
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        // HTTP/2 clients get GOAWAY (no new streams; those in flight finish) and close the connection; naming
        // the highest stream id keeps clear of the runtime's GOAWAY crash (see http2_sessions.ts). Idle
        // HTTP/1.1 keep-alive sockets are closed; whatever is left is cut after the grace period.
        for (const session of sessions) {
          if (!session.closed && !session.destroyed) {
            session.goaway(http2.constants.NGHTTP2_NO_ERROR, LAST_STREAM_ID);
          }
        }
        for (const socket of sockets) closeIfIdle(socket);
      });
      return stopped;
    },
  };
}

function refuse(res: Http2ServerResponse, options: { isGrpc: boolean; message: string }): void {
  if (options.isGrpc) {
    res.writeHead(200, { "content-type": "application/grpc+proto" });
    res.addTrailers({
      "grpc-status": String(grpc.status.UNAUTHENTICATED),
      "grpc-message": percentEncode(options.message),
    });
  } else {
    res.writeHead(403, { "content-type": "application/json", ...ERROR_SECURITY_HEADERS });
    res.write(JSON.stringify({ error: { code: "forbidden", message: options.message } }));
  }
  res.end();
}

/** Answers written before a request reaches the app carry the app's security headers too. */
const ERROR_SECURITY_HEADERS = Object.fromEntries(securityHeaderEntries("/api/"));

function jsonError(status: number, code: string, message: string): Response {
  return new Response(JSON.stringify({ error: { code, message } }), {
    status,
    headers: { "content-type": "application/json", ...ERROR_SECURITY_HEADERS },
  });
}

/**
 * The methods some route of the web port implements. Any other (TRACE, CONNECT, TRACK, WebDAV verbs…) is
 * answered 501 here: the fetch API refuses to build a TRACE/CONNECT/TRACK request at all, and no resource of
 * this server could serve the others.
 */
const IMPLEMENTED_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/** Converts a compat request into a fetch Request, or an error Response for a request the app must not see. */
async function toFetchRequest(req: Http2ServerRequest, remoteAddr: string): Promise<Request | Response> {
  const method = req.method ?? "GET";
  if (!IMPLEMENTED_METHODS.has(method)) {
    return jsonError(
      501,
      "not_implemented",
      `method ${method.slice(0, 20)} is not implemented; this server answers ${
        [...IMPLEMENTED_METHODS].join(", ")
      }`,
    );
  }
  const authority = req.headers[":authority"] ?? req.headers.host ?? "localhost";
  if (!req.url.startsWith("/")) return jsonError(400, "bad_request", "request target must be a path");
  let url: URL;
  const headers = new Headers();
  try {
    url = new URL(`https://${authority}${req.url}`);
    for (const [name, value] of Object.entries(req.headers)) {
      if (
        name.startsWith(":") || name === REMOTE_ADDR_HEADER || HOP_BY_HOP.has(name) || value === undefined
      ) continue;
      if (Array.isArray(value)) { for (const v of value) headers.append(name, v); }
      else headers.set(name, value);
    }
  } catch {
    return jsonError(400, "bad_request", "request has a malformed host or header");
  }
  headers.set(REMOTE_ADDR_HEADER, remoteAddr);
  let body: Uint8Array<ArrayBuffer> | undefined;
  if (method !== "GET" && method !== "HEAD") {
    const declared = Number(req.headers["content-length"] ?? 0);
    const tooLarge = () =>
      jsonError(413, "payload_too_large", `request body exceeds ${MAX_BODY_BYTES} bytes`);
    if (declared > MAX_BODY_BYTES) return tooLarge();
    const chunks: Uint8Array[] = [];
    let total = 0;
    for await (const chunk of req as AsyncIterable<Uint8Array>) {
      total += chunk.byteLength;
      if (total > MAX_BODY_BYTES) return tooLarge();
      chunks.push(chunk);
    }
    body = new Uint8Array(Buffer.concat(chunks));
  }
  return new Request(url, { method, headers, body });
}

/** Writes a fetch Response through the compat response, streaming the body with backpressure. */
async function writeResponse(
  req: Http2ServerRequest,
  res: Http2ServerResponse,
  response: Response,
): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    if (name !== "set-cookie" && !HOP_BY_HOP.has(name)) headers[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  res.writeHead(response.status, headers);
  if (!response.body || req.method === "HEAD") {
    await response.body?.cancel();
    res.end();
    return;
  }
  const reader = response.body.getReader();
  const closed = new Promise<void>((resolve) => res.once("close", resolve));
  try {
    while (true) {
      const { done, value } = await Promise.race([
        reader.read(),
        closed.then(() => ({ done: true, value: undefined })),
      ]);
      if (done || value === undefined || res.destroyed) break;
      if (!res.write(value)) {
        await Promise.race([new Promise<void>((resolve) => res.once("drain", resolve)), closed]);
      }
    }
  } catch (err) {
    // A body that fails half-way (an export losing its database) must not look complete: reset the HTTP/2
    // stream with an error code, or cut the HTTP/1.1 connection before the last chunk.
    if (req.httpVersionMajor === 2) res.stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    else req.socket.destroy();
    throw err;
  } finally {
    // A client that went away cancels the body (and whatever produces it).
    reader.cancel().catch(() => {});
  }
  if (!res.destroyed) res.end();
}
