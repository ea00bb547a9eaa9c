/**
 * Foundation, end to end with a real svc-server process: the start task, both HTTP versions, the TLS posture of
 * both ports (attacked with openssl s_client), gRPC and REST sharing the web port, and version without a database.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import postgres from "postgres";
import { type ServerProcess, startServerProcess } from "../helpers/process.ts";
import { freshDb, TEST_DATABASE_URL } from "../helpers/db.ts";
import { VERSION } from "../../shared/version.ts";
import { LOGIN_BOX_END, startTask } from "../helpers/task_start.ts";
import { EnrollmentService } from "../../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { createClient } from "../../shared/grpc/adapter.ts";
import { generateKeyAndCsr } from "../../shared/pki/csr.ts";

const OPTS = { sanitizeResources: false, sanitizeOps: false };

async function run(cmd: string, args: string[], stdin = ""): Promise<{ code: number; out: string }> {
  const child = new Deno.Command(cmd, { args, stdin: "piped", stdout: "piped", stderr: "piped" }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(stdin));
  await w.close();
  const { code, stdout, stderr } = await child.output();
  return { code, out: new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr) };
}

/** openssl s_client handshake; returns whether the handshake completed and the transcript. */
async function handshake(port: number, extra: string[]): Promise<{ ok: boolean; out: string }> {
  // The timeout only ends a hung s_client (it quits after the handshake); a loaded machine needs its margin.
  const { out } = await run("timeout", [
    "120",
    "openssl",
    "s_client",
    "-connect",
    `127.0.0.1:${port}`,
    "-servername",
    "localhost",
    ...extra,
  ], "Q\n");
  // A completed handshake prints the negotiated cipher; a refused one prints "Cipher is (NONE)" or an alert.
  const ok = /New, TLSv1\.[0-3], Cipher is (?!\(NONE\))/.test(out) && !/alert|handshake failure/i.test(out);
  return { ok, out };
}

/** GET over HTTP/1.1 with curl (ALPN offers only http/1.1); reports the protocol version actually used. */
async function h1Get(
  proc: ServerProcess,
  path: string,
): Promise<{ status: number; body: string; httpVersion: string }> {
  const res = await run("curl", [
    "-sS",
    "--http1.1",
    "--cacert",
    `${proc.dataDir}/pki/ca/ca.crt`,
    "-w",
    "\n%{http_code} %{http_version}",
    `https://127.0.0.1:${proc.webPort}${path}`,
  ]);
  const lines = res.out.trimEnd().split("\n");
  const [status, httpVersion] = lines.pop()!.split(" ");
  return { status: Number(status), body: lines.join("\n"), httpVersion };
}

function h2Request(
  proc: ServerProcess,
  ca: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; body: string; headers: http2.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`https://localhost:${proc.webPort}`, { ca, host: "127.0.0.1" } as never);
    session.on("error", reject);
    const req = session.request(headers);
    let data = "";
    let resHeaders: http2.IncomingHttpHeaders = {};
    req.on("response", (h) => (resHeaders = h));
    req.on("data", (d) => (data += d));
    req.on("end", () => {
      session.close();
      resolve({ status: Number(resHeaders[":status"]), body: data, headers: resHeaders });
    });
    req.on("error", reject);
    req.end(body);
  });
}

Deno.test({
  name: "svc-server process: versions, TLS posture, gRPC and REST on one port",
  ...OPTS,
  async fn(t) {
    // A CA in the data dir as versions before the database-kept CA made it: the server imports it at start
    // (and keeps the files), so the ALPN step below can sign a client certificate with it.
    const dataDir = await Deno.makeTempDir({ prefix: "svc-e2e-" });
    await (await import("../../server/pki/mod.ts")).loadOrCreateCa({ dataDir });
    const proc = await startServerProcess({ dataDir });
    try {
      const ca = await Deno.readTextFile(`${proc.dataDir}/pki/ca/ca.crt`);
      await t.step("GET /api/v1/version over HTTP/1.1 and HTTP/2", async () => {
        const one = await h1Get(proc, "/api/v1/version");
        assert.equal(one.status, 200);
        assert.equal(one.httpVersion, "1.1");
        assert.deepEqual(JSON.parse(one.body), { version: VERSION });
        const two = await h2Request(proc, ca, { ":path": "/api/v1/version", ":method": "GET" });
        assert.equal(two.status, 200);
        assert.deepEqual(JSON.parse(two.body), { version: VERSION });
        assert.match(String(two.headers["content-security-policy"]), /script-src 'self'/);
      });
      await t.step("GET /agent/ca.crt serves the internal CA without login", async () => {
        const res = await h1Get(proc, "/agent/ca.crt");
        assert.equal(res.status, 200);
        assert.equal(res.body.trim(), ca.trim());
      });
      await t.step("web port refuses TLS 1.1 and non-GCM TLS 1.2 suites, accepts ECDHE-GCM", async () => {
        const tls11 = await handshake(proc.webPort, ["-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"]);
        assert.equal(tls11.ok, false, tls11.out);
        const cbc = await handshake(proc.webPort, [
          "-tls1_2",
          "-cipher",
          "ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA",
        ]);
        assert.equal(cbc.ok, false, cbc.out);
        const gcm = await handshake(proc.webPort, ["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"]);
        assert.equal(gcm.ok, true, gcm.out);
        const tls13 = await handshake(proc.webPort, ["-tls1_3"]);
        assert.equal(tls13.ok, true, tls13.out);
        // ChaCha20 is a fine AEAD, but the TLS 1.2 policy is AES-GCM only: no request may be served over it.
        /** curl asks for the version at most over TLS 1.2 (`exactly`: only 1.2) with `cipher` alone. */
        const curlTls12 = (cipher: string, exactly: boolean) =>
          run("curl", [
            "-sS",
            ...(exactly ? ["--tlsv1.2"] : []),
            "--tls-max",
            "1.2",
            "--ciphers",
            cipher,
            "--cacert",
            `${proc.dataDir}/pki/ca/ca.crt`,
            `https://127.0.0.1:${proc.webPort}/api/v1/version`,
          ]);
        const chacha = await curlTls12("ECDHE-ECDSA-CHACHA20-POLY1305", true);
        assert.notEqual(chacha.code, 0, `TLS 1.2 ChaCha20 served a request: ${chacha.out}`);
        // The exact behaviour (README, Security notes): the runtime completes the ChaCha20 handshake, then the
        // server drops the connection before reading the request, so not one HTTP byte comes back.
        const raw = await run("timeout", [
          "120",
          "openssl",
          "s_client",
          "-connect",
          `127.0.0.1:${proc.webPort}`,
          "-servername",
          "localhost",
          "-tls1_2",
          "-cipher",
          "ECDHE-ECDSA-CHACHA20-POLY1305",
          "-ign_eof",
        ], "GET /api/v1/version HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        assert.match(raw.out, /New, TLSv1\.2, Cipher is ECDHE-ECDSA-CHACHA20-POLY1305/, raw.out);
        assert.doesNotMatch(
          raw.out,
          /HTTP\/1\.[01] \d{3}|"version"/,
          `an HTTP answer over ChaCha20: ${raw.out}`,
        );
        const aesGcm = await curlTls12("ECDHE-ECDSA-AES256-GCM-SHA384", false);
        assert.equal(aesGcm.code, 0, aesGcm.out);
      });
      await t.step("web port refuses a client certificate that does not chain to the CA", async () => {
        const dir = await Deno.makeTempDir();
        try {
          await run("openssl", [
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            "/CN=intruder",
            "-keyout",
            `${dir}/k.pem`,
            "-out",
            `${dir}/c.pem`,
            "-days",
            "1",
          ]);
          const res = await run("curl", [
            "-sS",
            "--cacert",
            `${proc.dataDir}/pki/ca/ca.crt`,
            "--cert",
            `${dir}/c.pem`,
            "--key",
            `${dir}/k.pem`,
            `https://127.0.0.1:${proc.webPort}/api/v1/version`,
          ]);
          assert.notEqual(res.code, 0, `self-signed client certificate was accepted: ${res.out}`);
        } finally {
          await Deno.remove(dir, { recursive: true });
        }
      });
      await t.step("policy port: TLS 1.2 refused, no client certificate refused", async () => {
        const tls12 = await handshake(proc.policyPort, ["-tls1_2"]);
        assert.equal(tls12.ok, false, tls12.out);
        // In TLS 1.3 the server checks the client certificate after the client's Finished, so the refusal is an
        // alert the client reads once it sends data: "certificate required" (alert 116), and no data flows back.
        const { out } = await run("timeout", [
          "10",
          "openssl",
          "s_client",
          "-connect",
          `127.0.0.1:${proc.policyPort}`,
          "-tls1_3",
          "-alpn",
          "h2",
          "-ign_eof",
          "-CAfile",
          `${proc.dataDir}/pki/ca/ca.crt`,
          "-servername",
          "localhost",
        ], "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        // Depending on timing the client reads the alert or only sees the connection closed; either way the
        // server refused before any application data.
        assert.match(out, /alert certificate required|unexpected eof while reading/, out);
        const noCert = await run("curl", [
          "-sS",
          "--http2",
          "--cacert",
          `${proc.dataDir}/pki/ca/ca.crt`,
          `https://127.0.0.1:${proc.policyPort}/svc.policy.v1.PolicyService/Heartbeat`,
        ]);
        assert.notEqual(
          noCert.code,
          0,
          `a request without a client certificate got an answer: ${noCert.out}`,
        );
      });
      await t.step("policy port negotiates ALPN h2 with a CA-signed client certificate", async () => {
        const dir = await Deno.makeTempDir();
        try {
          const { keyPem, csrPem } = await generateKeyAndCsr("alpn-probe");
          const { loadOrCreateCa } = await import("../../server/pki/mod.ts");
          const caObj = await loadOrCreateCa({ dataDir: proc.dataDir });
          const signed = await caObj.signCsr(csrPem, { commonName: "alpn-probe" });
          await Deno.writeTextFile(`${dir}/k.pem`, keyPem);
          await Deno.writeTextFile(`${dir}/c.pem`, signed.certPem);
          const clientCert = ["-cert", `${dir}/c.pem`, "-key", `${dir}/k.pem`];
          const h = await handshake(proc.policyPort, ["-tls1_3", "-alpn", "h2", ...clientCert]);
          assert.match(h.out, /ALPN protocol: h2/, h.out);
          const http1 = await handshake(proc.policyPort, ["-tls1_3", "-alpn", "http/1.1", ...clientCert]);
          assert.doesNotMatch(http1.out, /ALPN protocol: http\/1\.1/, "policy port must not speak HTTP/1.1");
        } finally {
          await Deno.remove(dir, { recursive: true });
        }
      });
      await t.step("a grpc-js client reaches the enrollment service on the web port", async () => {
        const client = createClient(EnrollmentService, `localhost:${proc.webPort}`, {
          credentials: grpc.credentials.createSsl(Buffer.from(ca)),
        });
        try {
          const { csrPem } = await generateKeyAndCsr("probe");
          await assert.rejects(
            client.enroll({ enrollmentToken: "not-a-token", csrPem, nodeName: "probe" }),
            (err: grpc.ServiceError) => err.code === grpc.status.UNAUTHENTICATED,
          );
        } finally {
          client.close();
        }
      });
      await t.step("a non-gRPC POST on the same port reaches REST (CSRF answers)", async () => {
        const res = await h2Request(proc, ca, {
          ":path": "/api/v1/policies/all",
          ":method": "POST",
          "content-type": "application/json",
        }, "{}");
        assert.equal(res.status, 403);
        assert.equal(JSON.parse(res.body).error.code, "csrf_missing");
      });
    } finally {
      const code = await proc.stop();
      assert.equal(code, 0, `graceful stop on SIGTERM:\n${proc.output()}`);
    }
  },
});

Deno.test({
  name: "deno task start runs the server on the embedded database with a printed admin login",
  ...OPTS,
  async fn() {
    const cwd = await Deno.makeTempDir({ prefix: "svc-start-" });
    const repo = new URL("../../", import.meta.url).pathname;
    const task = startTask({
      args: ["task", "--config", `${repo}deno.json`, "start"],
      // The task's default data dir is ./.svc-data in the checkout; the environment moves it to a temp dir so
      // the test never shares state with a developer's running server.
      env: { SVC_SERVER_DATA_DIR: `${cwd}/.svc-data` },
    });
    const { web } = task.ports;
    const out = task.output;
    try {
      // Wait on the condition (the bottom of the login box), with a deadline a loaded machine cannot miss.
      await task.loginBox(120_000);
      const [stdout, stderr] = [task.stdout(), task.stderr()];
      assert.match(stderr, /svc-server started/, out());
      assert.match(stdout, /initial admin login: admin \/ \S{12,}/, "the admin login is printed");
      assert.match(stdout, new RegExp(`https://localhost:${web}/`), "with the URL to open");
      assert.match(stdout, LOGIN_BOX_END, `the login box is the last thing printed:\n${out()}`);
      assert.doesNotMatch(stdout + stderr, /Initialize|Download|approve-scripts/, "no package noise");
      const password = (await Deno.readTextFile(`${cwd}/.svc-data/initial_admin_password`)).trim();
      assert.ok(stdout.includes(password));
      assert.equal((await Deno.stat(`${cwd}/.svc-data/initial_admin_password`)).mode! & 0o777, 0o600);
      assert.ok((await Deno.stat(`${cwd}/.svc-data/db`)).isDirectory, "embedded database under .svc-data/db");
    } finally {
      await task.stop();
      await Deno.remove(cwd, { recursive: true });
    }
  },
});

Deno.test({
  name: "version answers while the database is down",
  ignore: !TEST_DATABASE_URL,
  ...OPTS,
  async fn() {
    const tdb = await freshDb("postgres");
    await tdb.db.close();
    const proc = await startServerProcess({ config: { database: { url: tdb.url } } });
    try {
      const client = Deno.createHttpClient({
        caCerts: [await Deno.readTextFile(`${proc.dataDir}/pki/ca/ca.crt`)],
      });
      const dbName = new URL(tdb.url).pathname.slice(1);
      const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} });
      await admin.unsafe(`DROP DATABASE ${dbName} WITH (FORCE)`);
      await admin.end();
      const res = await fetch(`${proc.baseUrl}/api/v1/version`, { client });
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { version: VERSION });
      const me = await fetch(`${proc.baseUrl}/api/v1/auth/me`, { client });
      await me.body?.cancel();
      assert.notEqual(me.status, 200, "anything needing the database fails while it is down");
      client.close();
    } finally {
      await proc.stop();
      await tdb.dispose().catch(() => {});
    }
  },
});
