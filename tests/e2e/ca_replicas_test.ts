/**
 * One CA for all replicas by construction: two real svc-server processes start at the same moment on an
 * empty PostgreSQL database (not even migrated), given only the same key file — no CA files, no JWT
 * secret. They end with one CA (both data dirs' public copies, both `/agent/ca.crt` and both web
 * certificates agree), one initial admin, and one session secret (a session cookie from A is accepted by
 * B); an agent enrolled through B gets a certificate that A's policy port accepts.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { join } from "node:path";
import postgres from "postgres";
import * as grpc from "@grpc/grpc-js";
import { TEST_DATABASE_URL } from "../helpers/db.ts";
import { type ServerProcess, startServerProcess } from "../helpers/process.ts";
import { createKekFile } from "../../server/pki/envelope.ts";
import { CSRF_COOKIE, CSRF_HEADER } from "../../server/http/csrf.ts";
import { createClient } from "../../shared/grpc/adapter.ts";
import { EnrollmentService } from "../../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { PolicyService } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { decodeCertificate, generateKeyAndCsr } from "../../shared/pki/csr.ts";

const DEADLINE_MS = 120_000;

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = "/" + name;
  return u.toString();
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

Deno.test({
  name:
    "two replicas starting at once on an empty PostgreSQL database share one CA, one admin, one session key",
  ignore: !TEST_DATABASE_URL,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const name = `svc_ca_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
    const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} });
    await admin.unsafe(`CREATE DATABASE ${name}`);
    const url = withDatabase(TEST_DATABASE_URL, name);
    const tmp = await Deno.makeTempDir({ prefix: "svc-ca-replicas-" });
    const procs: ServerProcess[] = [];
    const closers: (() => void)[] = [];
    try {
      const keyFile = join(tmp, "secrets.kek");
      await createKekFile(keyFile);
      const config = {
        database: { url },
        ca: { key_encryption_key_file: keyFile },
        server: { address: "127.0.0.1" },
      };
      // Both at once: they race on the migrations, the CA, the session secret and the initial admin.
      const [a, b] = await Promise.all([startServerProcess({ config }), startServerProcess({ config })]);
      procs.push(a, b);

      const caA = await Deno.readTextFile(join(a.dataDir, "pki/ca/ca.crt"));
      const caB = await Deno.readTextFile(join(b.dataDir, "pki/ca/ca.crt"));
      assert.equal(caA, caB, "one CA");
      assert.ok(!(await exists(join(a.dataDir, "pki/ca/ca.key"))), "no CA key on disk");
      assert.ok(!(await exists(join(b.dataDir, "pki/ca/ca.key"))), "no CA key on disk");
      const db = postgres(url, { max: 1, onnotice: () => {} });
      try {
        const secrets = await db`SELECT name FROM server_secrets ORDER BY name`;
        assert.deepEqual(secrets.map((r) => r.name), ["ca", "jwt_secret", "totp_key"]);
        const users = await db`SELECT username FROM users`;
        assert.deepEqual(users.map((r) => r.username), ["admin"], "one initial admin");
      } finally {
        await db.end();
      }
      const withPassword = [];
      for (const p of [a, b]) {
        if (await exists(join(p.dataDir, "initial_admin_password"))) withPassword.push(p);
      }
      assert.equal(withPassword.length, 1, "exactly one replica created the admin and wrote its password");

      // Both web ports verify under the one CA, and both serve it at /agent/ca.crt.
      const client = Deno.createHttpClient({ caCerts: [caA] });
      closers.push(() => client.close());
      for (const p of [a, b]) {
        const res = await fetch(`${p.baseUrl}/agent/ca.crt`, {
          client,
          signal: AbortSignal.timeout(DEADLINE_MS),
        });
        assert.equal(await res.text(), caA);
      }

      // A session made on A is accepted by B: the signing secret is shared.
      const login = await fetch(`${a.baseUrl}/api/v1/auth/login`, {
        method: "POST",
        client,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ username: "admin", password: await withPassword[0].adminPassword() }),
        signal: AbortSignal.timeout(DEADLINE_MS),
      });
      assert.equal(login.status, 200, await login.clone().text());
      await login.body?.cancel();
      const jar = login.headers.getSetCookie().map((line) => line.split(";")[0]).join("; ");
      const csrf = login.headers.getSetCookie().map((l) => l.split(";")[0].split("="))
        .find(([k]) => k === CSRF_COOKIE)?.[1];
      const me = await fetch(`${b.baseUrl}/api/v1/auth/me`, {
        client,
        headers: { cookie: jar },
        signal: AbortSignal.timeout(DEADLINE_MS),
      });
      assert.equal(me.status, 200, `B accepts A's session: ${await me.clone().text()}`);
      assert.equal((await me.json()).user.username, "admin");

      // An agent enrolls through B with a token made on A, and A's policy port accepts its certificate.
      const group = await fetch(`${a.baseUrl}/api/v1/node-groups`, {
        method: "POST",
        client,
        headers: {
          cookie: jar,
          "content-type": "application/json",
          [CSRF_HEADER]: decodeURIComponent(csrf ?? ""),
        },
        body: JSON.stringify({ name: "lab" }),
        signal: AbortSignal.timeout(DEADLINE_MS),
      }).then((r) => r.json());
      const { token } = await fetch(`${a.baseUrl}/api/v1/node-groups/${group.id}/tokens`, {
        method: "POST",
        client,
        headers: { cookie: jar, [CSRF_HEADER]: decodeURIComponent(csrf ?? "") },
        signal: AbortSignal.timeout(DEADLINE_MS),
      }).then((r) => r.json());
      assert.ok(token, "enrollment token");
      const { keyPem, csrPem } = await generateKeyAndCsr("pc-1");
      const enrollment = createClient(EnrollmentService, `localhost:${b.webPort}`, {
        credentials: grpc.credentials.createSsl(Buffer.from(caA)),
      });
      closers.push(() => enrollment.close());
      const enrolled = await enrollment.enroll({ enrollmentToken: token, csrPem, nodeName: "pc-1" });
      assert.equal(enrolled.caCertPem, caA);
      assert.ok(
        await decodeCertificate(enrolled.signedCertPem).verify({
          publicKey: decodeCertificate(caA).publicKey,
          signatureOnly: true,
        }),
      );
      const policyA = createClient(PolicyService, `localhost:${a.policyPort}`, {
        credentials: grpc.credentials.createSsl(
          Buffer.from(caA),
          Buffer.from(keyPem),
          Buffer.from(enrolled.signedCertPem),
        ),
      });
      closers.push(() => policyA.close());
      // A heartbeat passes mutual TLS and the certificate-to-node check on A.
      await policyA.heartbeat({ clientId: "pc-1", healthy: true });
    } finally {
      while (closers.length > 0) closers.pop()!();
      for (const p of procs) await p.stop();
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
      await admin.end();
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
      for (const p of procs) await Deno.remove(p.dataDir, { recursive: true }).catch(() => {});
    }
  },
});
