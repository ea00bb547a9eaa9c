/**
 * ACME for the web port against Debian's `pebble` on 127.0.0.1 (its directory behind a TLS certificate made
 * here, trusted through `acme.ca_file`; names resolved by `pebble-challtestsrv`'s mock DNS to 127.0.0.1;
 * HTTP-01 answered on a free port given to both pebble and `acme.http_port`; external account binding
 * required, with the key given as `acme.eab_kid`/`acme.eab_hmac_key`). The server obtains a
 * certificate (pebble really validates the challenge: PEBBLE_VA_ALWAYS_VALID is not set) and serves it —
 * verified by openssl trusting pebble's root from its management endpoint — while the policy port keeps the
 * internal-CA certificate; a second server on the same database serves the same certificate from the
 * database without ordering; at two thirds of the lifetime the certificate is renewed and swapped in
 * without a restart, and the policy port's certificate is unchanged.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { opensslCertificate } from "../helpers/certificates.ts";
import { runCommand } from "../helpers/command.ts";
import { freePort } from "../helpers/process.ts";
import { freshDb } from "../helpers/db.ts";
import { resolveConfig } from "../../server/config/config.ts";
import { type RunningServer, startServer } from "../../server/server.ts";
import { decodeCertificate } from "../../shared/pki/csr.ts";

const NAME = "svc.acme.test";
const DEADLINE_MS = 120_000;

async function have(tool: string): Promise<boolean> {
  return await new Deno.Command("sh", { args: ["-c", `command -v ${tool}`], stdout: "null", stderr: "null" })
    .output().then((o) => o.success, () => false);
}

const missing = !(await have("pebble")) || !(await have("pebble-challtestsrv")) || !(await have("openssl"));
if (missing) {
  console.log(
    "skipped: the ACME test needs pebble and pebble-challtestsrv (apt-get install pebble) and openssl",
  );
}

/** The certificate chain a TLS port presents, as openssl prints it, verified against `caFile` for `name`. */
async function presented(
  port: number,
  caFile: string,
  name: string,
): Promise<{ text: string; leafPem: string }> {
  const { output: text } = await runCommand("openssl", [
    ...["s_client", "-connect", `127.0.0.1:${port}`, "-servername", name, "-CAfile", caFile],
    ...["-verify_hostname", name, "-showcerts"],
  ]);
  const leafPem = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(text)?.[0] ?? "";
  return { text, leafPem };
}

async function waitFor<T>(what: string, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + DEADLINE_MS;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what} did not happen within ${DEADLINE_MS / 1000} s: ${last}`);
}

Deno.test({
  name:
    "ACME (pebble): obtain, serve, share through the database, renew at two thirds; policy port unchanged",
  ignore: missing,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "svc-acme-" });
    const children: Deno.ChildProcess[] = [];
    const servers: RunningServer[] = [];
    const info = await freshDb("pglite");
    try {
      // TLS of pebble's own endpoints: a throwaway CA and a certificate for 127.0.0.1/localhost.
      const dirCa = await opensslCertificate(dir, {
        name: "dir-ca",
        subject: "/CN=ACME directory test CA",
        days: 2,
      });
      const dirTls = await opensslCertificate(dir, {
        name: "dir",
        subject: "/CN=localhost",
        days: 2,
        extensions: ["subjectAltName=DNS:localhost,IP:127.0.0.1", "basicConstraints=CA:FALSE"],
        issuer: dirCa,
      });
      const eabKey = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))
        .replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
      const [acmePort, mgmtPort, dnsPort, challMgmt, http01, tlsPort] = [1, 2, 3, 4, 5, 6].map(() =>
        freePort()
      );
      await Deno.writeTextFile(
        join(dir, "pebble.json"),
        JSON.stringify({
          pebble: {
            listenAddress: `127.0.0.1:${acmePort}`,
            managementListenAddress: `127.0.0.1:${mgmtPort}`,
            certificate: dirTls.certFile,
            privateKey: dirTls.keyFile,
            httpPort: http01,
            tlsPort,
            ocspResponderURL: "",
            // External account binding required: the server's account must carry the key below.
            externalAccountBindingRequired: true,
            externalAccountMACKeys: { "svc-test": eabKey },
          },
        }),
      );
      const spawn = (cmd: string, args: string[], env: Record<string, string> = {}) => {
        const child = new Deno.Command(cmd, { args, env, stdin: "null", stdout: "null", stderr: "null" })
          .spawn();
        children.push(child);
      };
      spawn("pebble-challtestsrv", [
        ...["-dns01", `127.0.0.1:${dnsPort}`, "-http01", "", "-https01", "", "-tlsalpn01", ""],
        ...["-management", `127.0.0.1:${challMgmt}`, "-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""],
      ]);
      spawn("pebble", ["-config", join(dir, "pebble.json"), "-dnsserver", `127.0.0.1:${dnsPort}`], {
        // No random validation delays; every nonce accepted (the client retries badNonce anyway).
        PEBBLE_VA_NOSLEEP: "1",
        PEBBLE_WFE_NONCEREJECT: "0",
      });
      const client = Deno.createHttpClient({ caCerts: [dirCa.cert] });
      try {
        await waitFor("pebble directory", async () => {
          const res = await fetch(`https://127.0.0.1:${acmePort}/dir`, { client });
          await res.body?.cancel();
          return res.ok ? true : undefined;
        });
      } finally {
        client.close();
      }

      const start = async (name: string, httpPort: number) => {
        const config = resolveConfig({}, {}, {
          "server.data_dir": join(dir, name),
          "server.address": "127.0.0.1",
          "server.enrollment_port": freePort(),
          "server.policy_port": freePort(),
          "metrics.listen_addr": `127.0.0.1:${freePort()}`,
          // Replicas share the key file that seals what the database keeps (CA, ACME key).
          "ca.key_encryption_key_file": join(dir, "secrets.kek"),
          "acme.enabled": true,
          "acme.directory_url": `https://127.0.0.1:${acmePort}/dir`,
          "acme.contact": ["admin@example.org"],
          "acme.hostnames": [NAME],
          "acme.ca_file": dirCa.certFile,
          "acme.http_port": httpPort,
          "acme.eab_kid": "svc-test",
          "acme.eab_hmac_key": eabKey,
          "security.admin_password": "acme-test-password-0123",
        });
        const server = await startServer(config, { db: info.db, print: () => {} });
        servers.push(server);
        return server;
      };
      const a = await start("a", http01);
      assert.ok(a.acme, "ACME job running");
      const first = a.acme.current();
      assert.ok(first, "a certificate was obtained at start");

      // pebble's root (changes every pebble start): fetched from its management endpoint.
      const mgmt = Deno.createHttpClient({ caCerts: [dirCa.cert] });
      const root = await (await fetch(`https://127.0.0.1:${mgmtPort}/roots/0`, { client: mgmt })).text();
      mgmt.close();
      await Deno.writeTextFile(join(dir, "pebble-root.pem"), root);

      const web1 = await presented(a.ports.web, join(dir, "pebble-root.pem"), NAME);
      assert.match(web1.text, /Verify return code: 0 \(ok\)/, web1.text);
      assert.equal(
        decodeCertificate(web1.leafPem).serialNumber,
        decodeCertificate(first.certPem).serialNumber,
      );
      // The policy port still presents the internal-CA certificate.
      const internalCa = join(dir, "a", "pki", "ca", "ca.crt");
      const policy1 = await presented(a.ports.policy, internalCa, "localhost");
      assert.match(decodeCertificate(policy1.leafPem).issuer, /svc Internal CA/);

      // A second server on the same database serves the stored certificate: same serial, no new order.
      const [{ n: ordersBefore }] = await info.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM server_secrets WHERE name = 'acme_cert'",
      );
      assert.equal(ordersBefore, 1);
      // (Its own HTTP-01 port: both run on this one host.)
      const b = await start("b", freePort());
      assert.equal(b.acme?.current()?.certPem, first.certPem);
      const webB = await presented(b.ports.web, join(dir, "pebble-root.pem"), NAME);
      assert.equal(
        decodeCertificate(webB.leafPem).serialNumber,
        decodeCertificate(first.certPem).serialNumber,
      );

      // Not due before two thirds of the lifetime; due after: renewed and swapped in without a restart.
      const life = first.notAfter.getTime() - first.notBefore.getTime();
      assert.equal(await a.acme.check(new Date(first.notBefore.getTime() + life * 0.6)), false);
      assert.equal(a.acme.current()?.certPem, first.certPem);
      assert.equal(await a.acme.check(new Date(first.notBefore.getTime() + life * 0.7)), true);
      const second = a.acme.current()!;
      assert.notEqual(second.certPem, first.certPem);
      const web2 = await presented(a.ports.web, join(dir, "pebble-root.pem"), NAME);
      assert.match(web2.text, /Verify return code: 0 \(ok\)/);
      assert.equal(
        decodeCertificate(web2.leafPem).serialNumber,
        decodeCertificate(second.certPem).serialNumber,
      );
      const policy2 = await presented(a.ports.policy, internalCa, "localhost");
      assert.equal(policy2.leafPem, policy1.leafPem, "the policy port's certificate is unchanged");
      // The other replica takes up the renewed certificate from the database at its next check.
      assert.equal(await b.acme!.check(), true);
      const webB2 = await presented(b.ports.web, join(dir, "pebble-root.pem"), NAME);
      assert.equal(
        decodeCertificate(webB2.leafPem).serialNumber,
        decodeCertificate(second.certPem).serialNumber,
      );
      // The challenge answers are gone once the order completed.
      const [{ n: left }] = await info.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM acme_challenges",
      );
      assert.equal(left, 0);
    } finally {
      for (const s of servers.reverse()) await s.stop();
      for (const c of children) {
        try {
          c.kill("SIGTERM");
        } catch { /* gone */ }
        await c.status;
      }
      await info.dispose();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
