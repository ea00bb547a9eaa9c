/**
 * An operator CA that is an intermediate (openssl-made root → intermediate, `ca.cert_file` holding the
 * intermediate then the root): a real svc-server serves the whole chain at `/agent/ca.crt` and in the
 * enrollment answer, presents the intermediate after its own certificate on both ports (a client trusting
 * only the root connects), and verifies agent certificates through it on the policy port. A chain without
 * its root, or in the wrong order, stops the start with a message saying what to fix.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import {
  INTERMEDIATE_CA_EXTENSIONS,
  opensslCertificate,
  ROOT_CA_EXTENSIONS,
} from "../helpers/certificates.ts";
import { mustRun, runCommand } from "../helpers/command.ts";
import { type ServerProcess, startServerProcess } from "../helpers/process.ts";
import { CSRF_COOKIE, CSRF_HEADER } from "../../server/http/csrf.ts";
import { loadOrCreateCa } from "../../server/pki/ca.ts";
import { createClient } from "../../shared/grpc/adapter.ts";
import { EnrollmentService } from "../../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { PolicyService } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { generateKeyAndCsr } from "../../shared/pki/csr.ts";

const DEADLINE_MS = 120_000;

async function openssl(cwd: string, ...args: string[]): Promise<string> {
  return (await mustRun("openssl", args, { cwd })).output;
}

/** root.crt/root.key (self-signed) and inter.crt/inter.key (CA, pathlen 0, signed by the root). */
async function makeHierarchy(dir: string): Promise<void> {
  const root = await opensslCertificate(dir, {
    name: "root",
    subject: "/O=Example/CN=Example Root CA",
    days: 3650,
    extensions: ROOT_CA_EXTENSIONS,
  });
  await opensslCertificate(dir, {
    name: "inter",
    subject: "/O=Example/CN=Example svc Issuing CA",
    days: 1825,
    extensions: INTERMEDIATE_CA_EXTENSIONS,
    issuer: root,
  });
}

Deno.test({
  name: "intermediate operator CA: chain served and used for verification on both ports",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "svc-ca-inter-" });
    let server: ServerProcess | undefined;
    const closers: (() => void)[] = [];
    try {
      await makeHierarchy(dir);
      const rootPem = await Deno.readTextFile(join(dir, "root.crt"));
      const interPem = await Deno.readTextFile(join(dir, "inter.crt"));
      await Deno.writeTextFile(join(dir, "chain.crt"), interPem + rootPem);

      // Refused before anything listens: no root, wrong order, an unrelated root.
      await Deno.writeTextFile(join(dir, "noroot.crt"), interPem);
      await assert.rejects(
        loadOrCreateCa({ dataDir: dir, certFile: join(dir, "noroot.crt"), keyFile: join(dir, "inter.key") }),
        /issued by .*Example Root CA.*which is missing: append the issuer's certificates up to the self-signed root/,
      );
      await Deno.writeTextFile(join(dir, "reversed.crt"), rootPem + interPem);
      await assert.rejects(
        loadOrCreateCa({
          dataDir: dir,
          certFile: join(dir, "reversed.crt"),
          keyFile: join(dir, "inter.key"),
        }),
        /not signed by the next certificate .* list the issuing CA first/,
      );
      const other = await loadOrCreateCa({ dataDir: join(dir, "other") });
      await Deno.writeTextFile(join(dir, "foreign.crt"), interPem + other.certPem);
      await assert.rejects(
        loadOrCreateCa({ dataDir: dir, certFile: join(dir, "foreign.crt"), keyFile: join(dir, "inter.key") }),
        /not signed by the next certificate/,
      );

      server = await startServerProcess({
        config: {
          ca: { cert_file: join(dir, "chain.crt"), key_file: join(dir, "inter.key") },
          server: { address: "127.0.0.1" },
        },
      });
      // A client that trusts only the root reaches the web port: the server sends the intermediate.
      const client = Deno.createHttpClient({ caCerts: [rootPem] });
      closers.push(() => client.close());
      const served = await (await fetch(`${server.baseUrl}/agent/ca.crt`, {
        client,
        signal: AbortSignal.timeout(DEADLINE_MS),
      })).text();
      assert.equal(
        served,
        interPem.trim() + "\n" + rootPem.trim() + "\n",
        "the whole chain, issuing CA first",
      );

      // Token through REST.
      const login = await fetch(`${server.baseUrl}/api/v1/auth/login`, {
        method: "POST",
        client,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ username: "admin", password: await server.adminPassword() }),
        signal: AbortSignal.timeout(DEADLINE_MS),
      });
      assert.equal(login.status, 200);
      await login.body?.cancel();
      const cookies = login.headers.getSetCookie().map((l) => l.split(";")[0]);
      const csrf = decodeURIComponent(
        cookies.map((c) => c.split("=")).find(([k]) => k === CSRF_COOKIE)?.[1] ?? "",
      );
      const headers = { cookie: cookies.join("; "), [CSRF_HEADER]: csrf, "content-type": "application/json" };
      const group = await (await fetch(`${server.baseUrl}/api/v1/node-groups`, {
        method: "POST",
        client,
        headers,
        body: JSON.stringify({ name: "lab" }),
        signal: AbortSignal.timeout(DEADLINE_MS),
      })).json();
      const { token } = await (await fetch(`${server.baseUrl}/api/v1/node-groups/${group.id}/tokens`, {
        method: "POST",
        client,
        headers,
        signal: AbortSignal.timeout(DEADLINE_MS),
      })).json();

      // Enrollment: the agent pins the chain it gets; its certificate verifies up to the root with openssl.
      const { keyPem, csrPem } = await generateKeyAndCsr("pc-inter");
      const enrollment = createClient(EnrollmentService, `localhost:${server.webPort}`, {
        credentials: grpc.credentials.createSsl(Buffer.from(rootPem)),
      });
      closers.push(() => enrollment.close());
      const enrolled = await enrollment.enroll({ enrollmentToken: token, csrPem, nodeName: "pc-inter" });
      assert.equal(enrolled.caCertPem, served);
      await Deno.writeTextFile(join(dir, "agent.crt"), enrolled.signedCertPem);
      const verified = await openssl(
        dir,
        ...["verify", "-CAfile", "root.crt", "-untrusted", "inter.crt", "-purpose", "sslclient", "agent.crt"],
      );
      assert.match(verified, /agent\.crt: OK/);

      // Policy port: a client trusting only the root accepts the server (chain sent), and the server
      // accepts the agent's certificate through the intermediate.
      const policy = createClient(PolicyService, `localhost:${server.policyPort}`, {
        credentials: grpc.credentials.createSsl(
          Buffer.from(rootPem),
          Buffer.from(keyPem),
          Buffer.from(enrolled.signedCertPem),
        ),
      });
      closers.push(() => policy.close());
      await policy.heartbeat({ clientId: "pc-inter", healthy: true });
      // The policy port's chain as openssl sees it: leaf, then the intermediate.
      await Deno.writeTextFile(join(dir, "agent.key"), keyPem, { mode: 0o600 });
      const { output: text } = await runCommand("openssl", [
        ...["s_client", "-connect", `127.0.0.1:${server.policyPort}`, "-CAfile", join(dir, "root.crt")],
        ...["-cert", join(dir, "agent.crt"), "-key", join(dir, "agent.key"), "-showcerts", "-alpn", "h2"],
      ], { stdin: "" });
      assert.match(text, /1 s:.*Example svc Issuing CA/);
      assert.match(text, /Verify return code: 0 \(ok\)/);
    } finally {
      while (closers.length > 0) closers.pop()!();
      await server?.stop();
      if (server) await Deno.remove(server.dataDir, { recursive: true }).catch(() => {});
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
