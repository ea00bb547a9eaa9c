// Deno node:http2 client: a server that goes away (killed, or closing gracefully) while a large response streams
// to the client, again and again. Uses only node:http2 and node:child_process.
//
//   deno run -A http2_client_restart_crash.mjs [rounds]
//
// The parent is the client. It starts the server as a child process (same file, argument "server"), opens one
// long response stream (a 6 MiB body written in 16 KiB chunks) and a few short requests on one session, and at a
// random point kills the server with SIGKILL or SIGTERM (the server then closes its sessions with GOAWAY). The
// client closes the old session (as gRPC clients do on reconnect), starts the server again on the same port and
// repeats. Expected: the client process survives every round. Seen: it dies by a signal (SIGSEGV / SIGABRT with
// an nghttp2 assertion) — the exit status of this process says so.
import http2 from "node:http2";
import { execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import process from "node:process";

const PORT = Number(process.env.PORT ?? 41_999);
const BODY = 6 * 1024 * 1024;
const CHUNK = Buffer.alloc(16 * 1024, 120);
// TLS like a gRPC client (TLS=0 for cleartext): a throwaway self-signed certificate made with openssl.
const TLS = process.env.TLS !== "0";
const KEY = "/tmp/h2-restart-key.pem";
const CERT = "/tmp/h2-restart-cert.pem";
if (TLS && !existsSync(CERT)) {
  execFileSync("openssl", [
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-days",
    "2",
    "-subj",
    "/CN=localhost",
    "-addext",
    "subjectAltName=DNS:localhost",
    "-keyout",
    KEY,
    "-out",
    CERT,
  ], { stdio: "ignore" });
}

if (process.argv[2] === "server") {
  const sessions = new Set();
  const server = TLS
    ? http2.createSecureServer({ key: readFileSync(KEY), cert: readFileSync(CERT), allowHTTP1: false })
    : http2.createServer();
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
    s.on("error", () => {});
  });
  server.on("stream", (stream, headers) => {
    stream.on("error", () => {});
    stream.respond({ ":status": 200 });
    if (headers[":path"] !== "/big") return stream.end("ok");
    let sent = 0;
    const pump = () => {
      while (sent < BODY) {
        sent += CHUNK.length;
        if (!stream.write(CHUNK)) return stream.once("drain", pump);
      }
      stream.end();
    };
    pump();
  });
  process.on("SIGTERM", () => {
    server.close();
    for (const s of sessions) s.close();
    setTimeout(() => process.exit(0), 2000).unref();
  });
  server.listen(PORT, "127.0.0.1", () => process.stdout.write("ready\n"));
} else {
  const rounds = Number(process.argv[2] ?? 200);
  const startServer = () =>
    new Promise((resolve) => {
      const child = spawn(process.execPath, ["run", "-A", new URL(import.meta.url).pathname, "server"], {
        stdio: ["ignore", "pipe", "inherit"],
        env: { ...process.env, PORT: String(PORT) },
      });
      child.stdout.once("data", () => resolve(child));
    });
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  let session;
  for (let round = 1; round <= rounds; round++) {
    const server = await startServer();
    session?.close();
    session = TLS
      ? http2.connect(`https://localhost:${PORT}`, { ca: readFileSync(CERT) })
      : http2.connect(`http://127.0.0.1:${PORT}`);
    session.on("error", () => {});
    const big = session.request({ ":path": "/big", ":method": "POST" });
    big.on("error", () => {});
    big.end();
    let received = 0;
    big.on("data", (d) => (received += d.length));
    for (let i = 0; i < 4; i++) {
      const r = session.request({ ":path": "/small", ":method": "POST" });
      r.on("error", () => {});
      r.resume();
      r.end("x");
    }
    await sleep(Math.random() * 400);
    const signal = Math.random() < 0.5 ? "SIGKILL" : "SIGTERM";
    server.kill(signal);
    await new Promise((r) => server.once("exit", r));
    // Requests on the dying session, as a client does before it notices (heartbeats, reports).
    for (let i = 0; i < 4; i++) {
      try {
        const r = session.request({ ":path": "/small", ":method": "POST" });
        r.on("error", () => {});
        r.resume();
        r.end("x");
      } catch { /* session already closed */ }
    }
    console.log(`round ${round}: ${signal} after ${received} bytes`);
  }
  session?.close();
  console.log(`survived ${rounds} rounds on Deno ${process.versions.deno ?? "?"}`);
}
