/**
 * The CA key on a PKCS#11 token: Debian's SoftHSM2 with a throwaway token under a temporary directory
 * (SOFTHSM2_CONF), an EC P-256 key made on the token by `pkcs11-tool` (opensc). The CA certificate is
 * self-signed by the token, a server started with `ca.key_file` = the token's URI signs an agent's
 * enrollment on the token (openssl verifies the agent certificate under the CA), and a wrong PIN, an
 * unknown token or key label and a PIN in the URI are refused with messages naming them.
 */
import { mustRun } from "../helpers/command.ts";
import { leaseProcessEnv } from "../helpers/process_env.ts";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { freshDb } from "../helpers/db.ts";
import { freePort } from "../helpers/process.ts";
import { createGroup, enrollmentToken } from "../helpers/agents.ts";
import { resolveConfig } from "../../server/config/config.ts";
import { startServer } from "../../server/server.ts";
import { loadOrCreateCa } from "../../server/pki/ca.ts";
import { openTokenKey, parsePkcs11Uri } from "../../server/pki/pkcs11.ts";
import { createClient } from "../../shared/grpc/adapter.ts";
import { EnrollmentService } from "../../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { decodeCertificate, generateKeyAndCsr, toPem, x509 } from "../../shared/pki/csr.ts";

const MODULE = "/usr/lib/softhsm/libsofthsm2.so";

async function have(tool: string): Promise<boolean> {
  return await new Deno.Command("sh", { args: ["-c", `command -v ${tool}`], stdout: "null", stderr: "null" })
    .output().then((o) => o.success, () => false);
}
const missing = !(await have("softhsm2-util")) || !(await have("pkcs11-tool")) ||
  !(await Deno.stat(MODULE).then(() => true, () => false));
if (missing) {
  console.log("skipped: the PKCS#11 test needs SoftHSM2 and pkcs11-tool (apt-get install softhsm2 opensc)");
}

Deno.test({
  name: "PKCS#11 (SoftHSM2): the CA key stays on the token, which signs the CA and an agent's enrollment",
  ignore: missing,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "svc-pkcs11-" });
    const envLease = await leaseProcessEnv(["SOFTHSM2_CONF"]);
    const info = await freshDb("pglite");
    try {
      await Deno.mkdir(join(dir, "tokens"));
      await Deno.writeTextFile(
        join(dir, "softhsm2.conf"),
        `directories.tokendir = ${join(dir, "tokens")}\nobjectstore.backend = file\nlog.level = ERROR\n`,
      );
      // The module reads this when it is initialized, which happens in this process.
      Deno.env.set("SOFTHSM2_CONF", join(dir, "softhsm2.conf"));
      const env = { SOFTHSM2_CONF: join(dir, "softhsm2.conf") };
      await mustRun("softhsm2-util", [
        ...["--init-token", "--free", "--label", "svc-ca", "--so-pin", "87654321", "--pin", "2468"],
      ], { env });
      await mustRun("pkcs11-tool", [
        ...["--module", MODULE, "--token-label", "svc-ca", "--login", "--pin", "2468"],
        ...["--keypairgen", "--key-type", "EC:prime256v1", "--label", "ca-key", "--id", "01"],
      ], { env });
      await mustRun("pkcs11-tool", [
        ...["--module", MODULE, "--token-label", "svc-ca", "--read-object", "--type", "pubkey"],
        ...["--label", "ca-key", "-o", join(dir, "pub.der")],
      ], { env });
      await Deno.writeTextFile(join(dir, "pin"), "2468\n", { mode: 0o600 });
      const uri = `pkcs11:token=svc-ca;object=ca-key?module-path=${MODULE}&pin-source=file:${
        join(dir, "pin")
      }`;

      // A wrong PIN is refused (checked before any login: PKCS#11 logins are per application, not per session).
      const withPin = (pin: string) => Deno.writeTextFile(join(dir, "bad-pin"), pin);
      await withPin("1111");
      // (Any CA certificate: the PIN is refused before the key is compared with it.)
      await loadOrCreateCa({ dataDir: join(dir, "other") });
      await assert.rejects(
        loadOrCreateCa({
          dataDir: dir,
          certFile: join(dir, "other", "pki", "ca", "ca.crt"),
          keyFile: uri.replace(join(dir, "pin"), join(dir, "bad-pin")),
        }),
        /the PIN in .*bad-pin is wrong/,
      );
      // The CA certificate, self-signed by the token key.
      const token = await openTokenKey(parsePkcs11Uri(uri), "P-256");
      const spki = await Deno.readFile(join(dir, "pub.der"));
      const now = Date.now();
      const caCert = await x509.X509CertificateGenerator.create({
        serialNumber: "01",
        subject: "CN=svc Token CA",
        issuer: "CN=svc Token CA",
        notBefore: new Date(now - 60_000),
        notAfter: new Date(now + 365 * 86_400_000),
        publicKey: spki,
        signingKey: token.key,
        signingAlgorithm: { name: "ECDSA", hash: "SHA-256" },
        extensions: [
          new x509.BasicConstraintsExtension(true, 0, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        ],
      });
      const caPem = toPem(caCert.rawData, "CERTIFICATE");
      await Deno.writeTextFile(join(dir, "ca.crt"), caPem);
      await mustRun("openssl", ["verify", "-CAfile", "ca.crt", "ca.crt"], { env, cwd: dir });

      await assert.rejects(
        loadOrCreateCa({
          dataDir: dir,
          certFile: join(dir, "ca.crt"),
          keyFile: uri.replace("token=svc-ca", "token=nope"),
        }),
        /token "nope" not found .*tokens: "svc-ca"/,
      );
      await assert.rejects(
        loadOrCreateCa({
          dataDir: dir,
          certFile: join(dir, "ca.crt"),
          keyFile: uri.replace("object=ca-key", "object=nope"),
        }),
        /no private key labelled "nope"/,
      );
      assert.throws(
        () => parsePkcs11Uri(`pkcs11:token=svc-ca;object=ca-key?module-path=${MODULE}&pin-value=2468`),
        /use pin-source=file/,
      );

      // A server whose CA key is on the token: an agent enrolls and gets a certificate the token signed.
      const config = resolveConfig({}, {}, {
        "server.data_dir": join(dir, "server"),
        "server.address": "127.0.0.1",
        "server.enrollment_port": freePort(),
        "server.policy_port": freePort(),
        "metrics.listen_addr": `127.0.0.1:${freePort()}`,
        "ca.cert_file": join(dir, "ca.crt"),
        "ca.key_file": uri,
        "security.admin_password": "pkcs11-test-password-0123",
      });
      const server = await startServer(config, { db: info.db, print: () => {} });
      try {
        assert.equal(server.ctx.ca.certPem, caPem);
        const group = await createGroup(info.db, "lab");
        const token = await enrollmentToken(info.db, group);
        const { csrPem } = await generateKeyAndCsr("pc-hsm");
        const client = createClient(EnrollmentService, `localhost:${server.ports.web}`, {
          credentials: grpc.credentials.createSsl(Buffer.from(caPem)),
        });
        try {
          const res = await client.enroll({ enrollmentToken: token, csrPem, nodeName: "pc-hsm" });
          const cert = decodeCertificate(res.signedCertPem);
          assert.equal(cert.issuer, "CN=svc Token CA");
          await Deno.writeTextFile(join(dir, "agent.crt"), res.signedCertPem);
          assert.match(
            (await mustRun("openssl", ["verify", "-CAfile", "ca.crt", "agent.crt"], { env, cwd: dir }))
              .output,
            /agent\.crt: OK/,
          );
        } finally {
          client.close();
        }
      } finally {
        await server.stop();
      }
    } finally {
      await info.dispose();
      envLease.release();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
