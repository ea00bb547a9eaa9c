// Enrollment over the web port with real grpc-js clients, real CSRs and real TLS: token consumption (single
// use under 200 concurrent calls, expiry, burnt on failure), the stored node, certificate and membership,
// duplicate names, CreateEnrollmentToken with the admin token, KerberosEnroll, and the web port's routing and
// TLS rules (REST beside gRPC, remote address header, body cap, foreign client certificates, cipher policy).

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { dbTest } from "../helpers/db.ts";
import {
  type AgentServer,
  bind,
  createGroup,
  enrollmentClient,
  enrollmentToken,
  rejectsWithGrpc,
  releasedPolicy,
  withAgentServer,
} from "../helpers/agents.ts";
import type { Db } from "../../server/db/db.ts";
import { createEnrollmentToken, sha256Hex } from "../../server/domain/node_groups.ts";
import { nodeExistsMessage } from "../../server/grpc/enrollment_service.ts";
import { loadOrCreateCa } from "../../server/pki/mod.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import { generateKeyAndCsr, parseCertificate } from "../../shared/pki/csr.ts";

const ADMIN_TOKEN = "admin-token-for-tests-0123456789";
const DAY_MS = 86_400_000;

function withServer(db: Db, fn: (server: AgentServer) => Promise<void>, adminToken = ""): Promise<void> {
  return withAgentServer(db, fn, { config: { security: { adminToken } } });
}

async function tokenCount(db: Db): Promise<number> {
  const [row] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM enrollment_tokens");
  return row.n;
}

dbTest("Enroll issues a certificate for the node name and stores node, membership and serial", async (db) => {
  await withServer(db, async (server) => {
    const group = await createGroup(db, "lab");
    const policy = await releasedPolicy(db, { name: "lab-policy" });
    await bind(db, policy, group);
    const token = await enrollmentToken(db, group);
    // The CSR asks for another name; the server forces the Common Name to node_name.
    const { csrPem } = await generateKeyAndCsr("something-else");
    const client = enrollmentClient(server);
    const res = await client.enroll({ enrollmentToken: token, csrPem, nodeName: "pc-1" });
    client.close();

    const cert = parseCertificate(res.signedCertPem);
    assert.equal(cert.commonName, "pc-1");
    assert.equal(res.caCertPem, server.ctx.ca.certPem);
    assert.equal(res.assignedNodeGroup, "lab");
    const days = (cert.notAfter.getTime() - Date.now()) / DAY_MS;
    assert.ok(days > 89.9 && days <= 90, `certificate valid ${days} days`);

    const [node] = await db.query<
      { id: string; name: string; cert_serial: string; cert_not_after: Date; status: string }
    >(
      "SELECT id, name, cert_serial, cert_not_after, status FROM nodes",
    );
    assert.equal(node.id, res.nodeId);
    assert.equal(node.cert_serial, cert.serial);
    assert.equal(node.cert_not_after.getTime(), cert.notAfter.getTime());
    assert.equal(node.status, "unknown");
    const members = await db.query(
      "SELECT 1 FROM node_group_members WHERE node_id = $1 AND node_group_id = $2",
      [
        node.id,
        group,
      ],
    );
    assert.equal(members.length, 1);
    const certs = await db.query<{ serial: string; node_id: string }>(
      "SELECT serial, node_id FROM node_certificates",
    );
    assert.deepEqual(certs, [{ serial: cert.serial, node_id: node.id }]);
    assert.equal(await tokenCount(db), 0);
    const [audit] = await db.query<
      { outcome: string; resource_name: string; source_ip: string; node_id: string; resource_id: string }
    >(
      "SELECT outcome, resource_name, source_ip, node_id, resource_id FROM audit_logs WHERE action = 'node.enroll'",
    );
    assert.deepEqual(audit, {
      outcome: "success",
      resource_name: "pc-1",
      source_ip: "127.0.0.1",
      node_id: node.id,
      resource_id: node.id,
    });
    // The membership's triggers ran with the node in place: the bound policy reaches it, not yet reported.
    const reach = await db.query("SELECT paths FROM policy_reach WHERE policy_id = $1 AND node_id = $2", [
      policy,
      node.id,
    ]);
    assert.deepEqual(reach, [{ paths: 1 }]);
    const counts = await db.query("SELECT unreported FROM node_compliance_counts WHERE node_id = $1", [
      node.id,
    ]);
    assert.deepEqual(counts, [{ unreported: 1 }]);
  });
});

dbTest("200 concurrent Enroll calls on one token: exactly one succeeds", async (db) => {
  await withServer(db, async (server) => {
    const group = await createGroup(db, "lab");
    const token = await enrollmentToken(db, group);
    const { csrPem } = await generateKeyAndCsr("racer");
    const client = enrollmentClient(server);
    const results = await Promise.allSettled(
      Array.from(
        { length: 200 },
        (_, i) => client.enroll({ enrollmentToken: token, csrPem, nodeName: `racer-${i}` }),
      ),
    );
    client.close();
    const ok = results.filter((r) => r.status === "fulfilled");
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    assert.equal(ok.length, 1);
    assert.equal(failed.length, 199);
    for (const f of failed) {
      assert.ok(f.reason instanceof GrpcError);
      assert.equal(f.reason.code, grpc.status.UNAUTHENTICATED);
    }
    const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM nodes");
    assert.equal(n, 1);
  });
});

dbTest("expired and reused tokens are refused with Unauthenticated", async (db) => {
  await withServer(db, async (server) => {
    const group = await createGroup(db, "lab");
    const { csrPem } = await generateKeyAndCsr("pc");
    const client = enrollmentClient(server);
    try {
      const expired = await createEnrollmentToken(db, group, {
        createdBy: "test",
        now: new Date(Date.now() - 6 * 60 * 1000),
      });
      await rejectsWithGrpc(
        client.enroll({ enrollmentToken: expired.token, csrPem, nodeName: "pc-1" }),
        grpc.status.UNAUTHENTICATED,
        /expired/,
      );
      // An expired token is consumed too: presenting it again says it is unknown.
      await rejectsWithGrpc(
        client.enroll({ enrollmentToken: expired.token, csrPem, nodeName: "pc-1" }),
        grpc.status.UNAUTHENTICATED,
        /invalid or was already used/,
      );

      const token = await enrollmentToken(db, group);
      await client.enroll({ enrollmentToken: token, csrPem, nodeName: "pc-1" });
      await rejectsWithGrpc(
        client.enroll({ enrollmentToken: token, csrPem, nodeName: "pc-2" }),
        grpc.status.UNAUTHENTICATED,
        /invalid or was already used/,
      );
      await rejectsWithGrpc(
        client.enroll({ enrollmentToken: "made-up", csrPem, nodeName: "pc-3" }),
        grpc.status.UNAUTHENTICATED,
      );
      const denied = await db.query(
        "SELECT 1 FROM audit_logs WHERE action = 'node.enroll' AND outcome = 'denied'",
      );
      assert.equal(denied.length, 4);
    } finally {
      client.close();
    }
  });
});

dbTest("an existing node name is refused with the spec's text and the token is burnt", async (db) => {
  await withServer(db, async (server) => {
    const group = await createGroup(db, "lab");
    const { csrPem } = await generateKeyAndCsr("pc-1");
    const client = enrollmentClient(server);
    try {
      await client.enroll({ enrollmentToken: await enrollmentToken(db, group), csrPem, nodeName: "pc-1" });
      const token = await enrollmentToken(db, group);
      await rejectsWithGrpc(
        client.enroll({ enrollmentToken: token, csrPem, nodeName: "pc-1" }),
        grpc.status.ALREADY_EXISTS,
        'a node named "pc-1" already exists and must be deleted before re-enrolling',
      );
      assert.equal(
        nodeExistsMessage("pc-1"),
        'a node named "pc-1" already exists and must be deleted before re-enrolling',
      );
      assert.equal(await tokenCount(db), 0);
      await rejectsWithGrpc(
        client.enroll({ enrollmentToken: token, csrPem, nodeName: "pc-2" }),
        grpc.status.UNAUTHENTICATED,
      );
      const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM node_certificates");
      assert.equal(n, 1);
    } finally {
      client.close();
    }
  });
});

dbTest(
  "concurrent enrollments of one name with different tokens: one node, the others told why",
  async (db) => {
    await withServer(db, async (server) => {
      const group = await createGroup(db, "lab");
      const { csrPem } = await generateKeyAndCsr("twin");
      const tokens = await Promise.all(Array.from({ length: 10 }, () => enrollmentToken(db, group)));
      const client = enrollmentClient(server);
      const results = await Promise.allSettled(
        tokens.map((enrollmentToken) => client.enroll({ enrollmentToken, csrPem, nodeName: "twin" })),
      );
      client.close();
      assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
      for (const r of results) {
        if (r.status === "fulfilled") continue;
        assert.ok(r.reason instanceof GrpcError);
        assert.equal(r.reason.code, grpc.status.ALREADY_EXISTS);
        assert.equal(r.reason.message, nodeExistsMessage("twin"));
      }
      assert.equal(await tokenCount(db), 0);
      const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM node_certificates");
      assert.equal(n, 1);
    });
  },
);

dbTest("bad requests: malformed fields are refused before the token is used; a bad CSR after", async (db) => {
  await withServer(db, async (server) => {
    const group = await createGroup(db, "lab");
    const { csrPem } = await generateKeyAndCsr("pc");
    const client = enrollmentClient(server);
    try {
      const token = await enrollmentToken(db, group);
      await rejectsWithGrpc(
        client.enroll({ enrollmentToken: token, csrPem, nodeName: "" }),
        grpc.status.INVALID_ARGUMENT,
        /^node_name: /,
      );
      await rejectsWithGrpc(
        client.enroll({ enrollmentToken: token, csrPem, nodeName: "../etc/passwd" }),
        grpc.status.INVALID_ARGUMENT,
        /^node_name: /,
      );
      await rejectsWithGrpc(
        client.enroll({ enrollmentToken: token, csrPem: "", nodeName: "pc-1" }),
        grpc.status.INVALID_ARGUMENT,
        /^csr_pem: /,
      );
      await rejectsWithGrpc(
        client.enroll({ enrollmentToken: "", csrPem, nodeName: "pc-1" }),
        grpc.status.INVALID_ARGUMENT,
        /^enrollment_token: /,
      );
      assert.equal(await tokenCount(db), 1, "a malformed request does not consume the token");

      // A weak key is refused by the CA after the token was consumed (the spec: consumed even if it fails).
      const rsa = await crypto.subtle.generateKey(
        {
          name: "RSASSA-PKCS1-v1_5",
          modulusLength: 2048,
          publicExponent: new Uint8Array([1, 0, 1]),
          hash: "SHA-256",
        },
        true,
        ["sign", "verify"],
      );
      const { x509, toPem } = await import("../../shared/pki/csr.ts");
      const weak = await x509.Pkcs10CertificateRequestGenerator.create({
        name: "CN=pc-1",
        keys: rsa,
        signingAlgorithm: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
      });
      await rejectsWithGrpc(
        client.enroll({
          enrollmentToken: token,
          csrPem: toPem(weak.rawData, "CERTIFICATE REQUEST"),
          nodeName: "pc-1",
        }),
        grpc.status.INVALID_ARGUMENT,
        /^csr_pem: the certificate request uses an RSA 2048-bit key; agent certificates need an ECDSA P-256 key/,
      );
      assert.equal(await tokenCount(db), 0);
      const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM nodes");
      assert.equal(n, 0);
    } finally {
      client.close();
    }
  });
});

dbTest("KerberosEnroll answers that Kerberos is not configured", async (db) => {
  await withServer(db, async (server) => {
    const client = enrollmentClient(server);
    const { csrPem } = await generateKeyAndCsr("pc");
    await rejectsWithGrpc(
      client.kerberosEnroll({ spnegoToken: new Uint8Array([1, 2, 3]), csrPem, nodeName: "pc" }),
      grpc.status.FAILED_PRECONDITION,
      "Kerberos enrollment is not configured",
    );
    client.close();
  });
});

dbTest("CreateEnrollmentToken is disabled without security.admin_token", async (db) => {
  await withServer(db, async (server) => {
    const group = await createGroup(db, "lab");
    const client = enrollmentClient(server);
    const metadata = new grpc.Metadata();
    metadata.set("x-admin-token", "");
    await rejectsWithGrpc(
      client.createEnrollmentToken({ nodeGroupId: group }, { metadata }),
      grpc.status.FAILED_PRECONDITION,
      /security\.admin_token/,
    );
    client.close();
    assert.equal(await tokenCount(db), 0);
  });
});

dbTest("CreateEnrollmentToken checks the admin token and the group, and stores only a hash", async (db) => {
  await withServer(db, async (server) => {
    const group = await createGroup(db, "lab");
    const client = enrollmentClient(server);
    const withToken = (value?: string) => {
      const metadata = new grpc.Metadata();
      if (value !== undefined) metadata.set("x-admin-token", value);
      return { metadata };
    };
    try {
      await rejectsWithGrpc(
        client.createEnrollmentToken({ nodeGroupId: group }, withToken()),
        grpc.status.UNAUTHENTICATED,
      );
      await rejectsWithGrpc(
        client.createEnrollmentToken({ nodeGroupId: group }, withToken(ADMIN_TOKEN.slice(0, -1) + "x")),
        grpc.status.UNAUTHENTICATED,
      );
      await rejectsWithGrpc(
        client.createEnrollmentToken({ nodeGroupId: group }, withToken(ADMIN_TOKEN + "x")),
        grpc.status.UNAUTHENTICATED,
      );
      await rejectsWithGrpc(
        client.createEnrollmentToken({ nodeGroupId: crypto.randomUUID() }, withToken(ADMIN_TOKEN)),
        grpc.status.NOT_FOUND,
        /node group .* does not exist/,
      );
      await rejectsWithGrpc(
        client.createEnrollmentToken({ nodeGroupId: "lab" }, withToken(ADMIN_TOKEN)),
        grpc.status.INVALID_ARGUMENT,
        /^node_group_id: /,
      );
      assert.equal(await tokenCount(db), 0);

      const before = Date.now();
      const created = await client.createEnrollmentToken({ nodeGroupId: group }, withToken(ADMIN_TOKEN));
      const expires = Number(created.expiresAt!.seconds) * 1000;
      assert.ok(expires >= before + 5 * 60 * 1000 - 1000 && expires <= Date.now() + 5 * 60 * 1000 + 1000);
      const rows = await db.query<{ token_hash: string; node_group_id: string }>(
        "SELECT token_hash, node_group_id FROM enrollment_tokens",
      );
      assert.deepEqual(rows, [{ token_hash: await sha256Hex(created.token), node_group_id: group }]);

      const { csrPem } = await generateKeyAndCsr("pc-1");
      const res = await client.enroll({ enrollmentToken: created.token, csrPem, nodeName: "pc-1" });
      assert.equal(res.assignedNodeGroup, "lab");
    } finally {
      client.close();
    }
  }, ADMIN_TOKEN);
});

dbTest("enrollment methods other than the three exempt ones need a client certificate", async (db) => {
  await withServer(db, async (server) => {
    const call = (credentials: grpc.ChannelCredentials) => {
      const client = new grpc.Client(`localhost:${server.webPort}`, credentials);
      return new Promise<void>((resolve, reject) => {
        client.makeUnaryRequest(
          "/svc.enrollment.v1.EnrollmentService/ListSecrets",
          (b: Buffer) => b,
          (b: Buffer) => b,
          Buffer.alloc(0),
          (err) => {
            client.close();
            if (err) reject(new GrpcError(err.code, err.details));
            else resolve();
          },
        );
      });
    };
    await rejectsWithGrpc(
      call(grpc.credentials.createSsl(Buffer.from(server.ctx.ca.certPem))),
      grpc.status.UNAUTHENTICATED,
    );

    // With a valid node certificate the method is simply unknown.
    const group = await createGroup(db, "lab");
    const { keyPem, csrPem } = await generateKeyAndCsr("pc-1");
    const client = enrollmentClient(server);
    const res = await client.enroll({
      enrollmentToken: await enrollmentToken(db, group),
      csrPem,
      nodeName: "pc-1",
    });
    client.close();
    await rejectsWithGrpc(
      call(
        grpc.credentials.createSsl(
          Buffer.from(server.ctx.ca.certPem),
          Buffer.from(keyPem),
          Buffer.from(res.signedCertPem),
        ),
      ),
      grpc.status.UNIMPLEMENTED,
    );
  });
});

dbTest(
  "web port: REST beside gRPC over HTTP/2 and HTTP/1.1, remote address from the socket, body cap",
  async (db) => {
    await withServer(db, async (server) => {
      const base = `https://localhost:${server.webPort}`;
      for (const options of [{ http2: true, http1: false }, { http2: false, http1: true }]) {
        const client = Deno.createHttpClient({ caCerts: [server.ctx.ca.certPem], ...options });
        try {
          // A client-sent x-svc-remote-addr must not become the audited address.
          const res = await fetch(`${base}/api/v1/auth/login`, {
            client,
            method: "POST",
            headers: { "content-type": "application/json", "x-svc-remote-addr": "203.0.113.9" },
            body: JSON.stringify({ username: "nobody", password: "wrong-password-123" }),
          });
          assert.equal(res.status, 401);
          assert.match(res.headers.get("content-type") ?? "", /json/);
          await res.body?.cancel();

          const missing = await fetch(`${base}/api/v1/no-such-route`, { client });
          assert.equal(missing.status, 404);
          assert.equal((await missing.json()).error.code, "not_found");

          const huge = await fetch(`${base}/api/v1/auth/login`, {
            client,
            method: "POST",
            headers: { "content-type": "application/json" },
            body: new Uint8Array((8 << 20) + 1),
          });
          assert.equal(huge.status, 413);
          await huge.body?.cancel();
        } finally {
          client.close();
        }
      }
      const rows = await db.query<{ source_ip: string }>(
        "SELECT source_ip FROM audit_logs WHERE action = 'auth.login'",
      );
      assert.equal(rows.length, 2);
      for (const row of rows) assert.equal(row.source_ip, "127.0.0.1");
    });
  },
);

dbTest("web port: a client certificate from another CA closes the connection", async (db) => {
  await withServer(db, async (server) => {
    const dir = await Deno.makeTempDir();
    try {
      const foreign = await loadOrCreateCa({ dataDir: dir });
      const { keyPem, csrPem } = await generateKeyAndCsr("intruder");
      const cert = await foreign.signCsr(csrPem, { commonName: "intruder" });
      const outcome = await new Promise<string>((resolve) => {
        const session = http2.connect(`https://localhost:${server.webPort}`, {
          ca: server.ctx.ca.certPem,
          cert: cert.certPem,
          key: keyPem,
        });
        session.on("error", () => resolve("refused"));
        const req = session.request({ ":path": "/api/v1/no-such-route" });
        req.on("response", (headers) => resolve(`answered ${headers[":status"]}`));
        req.on("error", () => resolve("refused"));
        req.on("close", () => resolve("refused"));
        req.end();
      });
      assert.equal(outcome, "refused");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
});

dbTest("web port TLS: at least TLS 1.2, forward-secret AEAD suites only, the spec's curves", async (db) => {
  await withServer(db, async (server) => {
    // openssl as the client: it can offer exactly the old suites and versions an attacker would try.
    const handshake = async (...args: string[]) => {
      const out = await new Deno.Command("openssl", {
        args: ["s_client", "-connect", `127.0.0.1:${server.webPort}`, "-servername", "localhost", ...args],
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).output();
      const text = new TextDecoder().decode(out.stdout);
      const cipher = /Cipher is (\S+)/.exec(text)?.[1] ?? "(NONE)";
      return out.code === 0 && cipher !== "(NONE)" ? cipher : "refused";
    };
    assert.equal(await handshake("-tls1_1"), "refused");
    assert.equal(
      await handshake("-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA"),
      "refused",
    );
    assert.equal(
      await handshake("-tls1_2", "-cipher", "AES128-GCM-SHA256"),
      "refused",
      "static RSA key exchange",
    );
    assert.equal(
      await handshake("-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"),
      "ECDHE-ECDSA-AES128-GCM-SHA256",
    );
    // A client offering everything gets AES-GCM, not ChaCha20 (see TLS12_CIPHERS in web_port.ts).
    assert.match(await handshake("-tls1_2"), /^ECDHE-ECDSA-AES(128|256)-GCM-SHA(256|384)$/);
    assert.notEqual(await handshake("-tls1_3"), "refused");
    assert.equal(await handshake("-tls1_2", "-curves", "secp521r1"), "refused");
  });
});

dbTest("an enrollment whose audit row cannot be written creates no node (one transaction)", async (db) => {
  await db.query(`CREATE FUNCTION test_refuse_enroll() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.action = 'node.enroll' AND NEW.outcome = 'success' THEN
        RAISE EXCEPTION 'audit row refused by the test';
      END IF;
      RETURN NEW;
    END $$`);
  await db.query(`CREATE TRIGGER test_refuse_enroll BEFORE INSERT ON audit_logs
    FOR EACH ROW EXECUTE FUNCTION test_refuse_enroll()`);
  await withServer(db, async (server) => {
    const group = await createGroup(db, "lab");
    const token = await enrollmentToken(db, group);
    const { csrPem } = await generateKeyAndCsr("pc-audit");
    const client = enrollmentClient(server);
    try {
      await assert.rejects(client.enroll({ enrollmentToken: token, csrPem, nodeName: "pc-audit" }));
    } finally {
      client.close();
    }
    const nodes = await db.query("SELECT 1 FROM nodes WHERE name = 'pc-audit'");
    assert.equal(nodes.length, 0, "no node without its audit row");
    const certs = await db.query("SELECT 1 FROM node_certificates");
    assert.equal(certs.length, 0);
  });
});
