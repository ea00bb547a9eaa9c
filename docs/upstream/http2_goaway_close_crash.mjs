// Deno's node:http2 client dies (SIGABRT on an nghttp2 assertion, or SIGSEGV) when a session is closed from
// its own 'goaway' listener. Uses only node:http2 and node:child_process.
//
//   deno run -A http2_goaway_close_crash.mjs [rounds]
//   deno run -A --v8-flags=--expose-gc http2_goaway_close_crash.mjs     # a GC in the listener: dies at once
//   LISTENER=0 deno run -A http2_goaway_close_crash.mjs                  # control: no close in the listener
//
// The parent process is the client; it starts the server (this file with the argument "server") as a child, so
// the exit status says which side died. The server closes every session it accepts (session.close(): a graceful
// GOAWAY) a few milliseconds after it starts. The client opens one session per round, cleartext, no request,
// and its 'goaway' listener closes the session, as @grpc/grpc-js does (its transport shuts down on GOAWAY), then
// does work that allocates (grpc-js reconnects), or runs a GC when one is exposed.
// Expected: "survived N rounds" and exit status 0. The same session.close() made by the runtime itself after the
// listeners (LISTENER=0) survives.
import http2 from "node:http2";
import { spawn } from "node:child_process";
import process from "node:process";

if (process.argv[2] === "server") {
  const server = http2.createServer();
  server.on("session", (session) => {
    session.on("error", () => {});
    setTimeout(() => session.close(), 20);
  });
  server.listen(0, "127.0.0.1", () => process.stdout.write(`${server.address().port}\n`));
  // Ends with the client, even when the client dies by a signal.
  process.stdin.on("end", () => process.exit(0)).resume();
} else {
  const rounds = Number(process.argv[2] ?? 2000);
  const listener = process.env.LISTENER !== "0";
  const file = new URL(import.meta.url).pathname;
  // The same script runs on Node.js too (node [--expose-gc] http2_goaway_close_crash.mjs), for comparison.
  const server = spawn(
    process.execPath,
    process.versions.deno ? ["run", "-A", file, "server"] : [file, "server"],
    {
      stdio: ["pipe", "pipe", "inherit"],
    },
  );
  const port = await new Promise((resolve) => server.stdout.once("data", (d) => resolve(Number(d))));
  let work;
  for (let round = 1; round <= rounds; round++) {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", () => {});
    if (listener) {
      session.once("goaway", () => {
        session.close();
        if (typeof globalThis.gc === "function") globalThis.gc();
        else work = Array.from({ length: 50_000 }, (_, i) => ({ i, text: `item ${i}` }));
      });
    }
    await new Promise((resolve) => session.once("close", resolve));
    if (round % 100 === 0) console.log(`round ${round}`);
  }
  void work;
  server.kill();
  const runtime = process.versions.deno ? `Deno ${process.versions.deno}` : `Node.js ${process.version}`;
  console.log(`survived ${rounds} rounds on ${runtime}`);
}
