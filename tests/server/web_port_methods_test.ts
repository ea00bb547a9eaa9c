/**
 * Methods no route implements (TRACE, TRACK, CONNECT, PROPFIND…) on any web-port path are a clean 501 with the
 * security headers, over HTTP/1.1 and HTTP/2, and never an error in the server log. The fetch API refuses to
 * build a TRACE request at all, so these used to escape as a 500 logged at ERROR.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import { dbTest } from "../helpers/db.ts";
import { startAgentServer } from "../helpers/agents.ts";

const PATHS = ["/", "/api/v1/version", "/api/v1/auth/login", "/agent/ca.crt", "/policies/x"];

/** One HTTP/1.1 request over TLS written by hand (fetch refuses these methods); answers the status line and headers. */
async function http1(port: number, caCert: string, method: string, path: string): Promise<string> {
  const conn = await Deno.connectTls({
    hostname: "localhost",
    port,
    caCerts: [caCert],
    alpnProtocols: ["http/1.1"],
  });
  try {
    await conn.write(
      new TextEncoder().encode(`${method} ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`),
    );
    let text = "";
    const buf = new Uint8Array(16384);
    while (!text.includes("\r\n\r\n")) {
      // A connection the server cuts (the HTTP parser refuses the request) ends without close_notify.
      const n = await conn.read(buf).catch((err) => {
        if (err instanceof Deno.errors.UnexpectedEof) return null;
        throw err;
      });
      if (n === null) break;
      text += new TextDecoder().decode(buf.subarray(0, n));
    }
    return text;
  } finally {
    conn.close();
  }
}

/** One HTTP/2 request; answers the status and headers. */
function http2Request(
  port: number,
  caCert: string,
  method: string,
  path: string,
): Promise<http2.IncomingHttpHeaders> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`https://localhost:${port}`, { ca: caCert });
    session.on("error", reject);
    const stream = session.request(
      path === ""
        ? { ":method": method, ":authority": `localhost:${port}` }
        : { ":method": method, ":path": path },
    );
    stream.on("response", (headers) => {
      stream.resume();
      stream.on("end", () => {
        session.close();
        resolve(headers);
      });
    });
    stream.on("error", (err) => {
      session.close();
      reject(err);
    });
    stream.end();
  });
}

dbTest("methods no route implements are a 501 on every web-port path, never an error log", async (db) => {
  const server = await startAgentServer(db, { logLevel: "warn" });
  const ca = server.ctx.ca.certPem;
  try {
    for (const path of PATHS) {
      for (const method of ["TRACE", "PROPFIND"]) {
        const head = await http1(server.webPort, ca, method, path);
        assert.match(head, /^HTTP\/1\.1 501 /, `HTTP/1.1 ${method} ${path}: ${head.split("\r\n")[0]}`);
        assert.match(head, /\r\ncontent-type: application\/json/i);
        assert.match(head, /\r\nx-content-type-options: nosniff/i, "carries the security headers");
      }
      for (const method of ["TRACE", "TRACK", "CONNECT", "PROPFIND"]) {
        // CONNECT over HTTP/2 carries no :path (RFC 9113 8.5); node sends the authority alone.
        const headers = await http2Request(server.webPort, ca, method, method === "CONNECT" ? "" : path)
          .catch((err) => ({ ":status": `error ${err.message}` }));
        if (method === "CONNECT") {
          assert.ok(Number(headers[":status"]) !== 500, `HTTP/2 CONNECT: ${headers[":status"]}`);
          continue;
        }
        assert.equal(Number(headers[":status"]), 501, `HTTP/2 ${method} ${path}`);
      }
    }
    // TRACK and CONNECT over HTTP/1.1: the HTTP parser refuses TRACK and a CONNECT that is not a tunnel
    // request; either way never a 500.
    for (const method of ["TRACK", "CONNECT"]) {
      const head = await http1(server.webPort, ca, method, "/");
      assert.ok(!/^HTTP\/1\.1 5/.test(head), `HTTP/1.1 ${method}: ${head.split("\r\n")[0]}`);
    }
    const ok = await http1(server.webPort, ca, "GET", "/agent/ca.crt");
    assert.match(ok, /^HTTP\/1\.1 200 /, `GET still works: ${ok.slice(0, 300)}`);
    assert.deepEqual(server.test.logs.filter((line) => / ERROR /.test(line)), []);
  } finally {
    await server.stop();
  }
});
