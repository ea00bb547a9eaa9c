// Who the policy port and the web port let in: revoked serials (checked on every call from the moment the
// revocation commits, open streams closed), deleted nodes, certificate renewal keeping every serial,
// client_id equal to the certificate's Common Name, the policy port's TLS rules (client certificate from the
// internal CA, TLS 1.3, ALPN h2) and its gRPC limits (message size, concurrent streams, client ping rate).

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { dbTest } from "../helpers/db.ts";
import {
  type AgentServer,
  enrollmentClient,
  eventually,
  policyClient,
  rejectsWithGrpc,
  subscribe,
  withEnrolledAgent,
} from "../helpers/agents.ts";
import { deleteNode, revokeNode } from "../../server/domain/nodes.ts";
import { loadOrCreateCa } from "../../server/pki/mod.ts";
import { GrpcError, type ServiceClient } from "../../shared/grpc/adapter.ts";
import { PolicyService } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { generateKeyAndCsr, parseCertificate } from "../../shared/pki/csr.ts";

/** Deadline of every wait in this file: generous, because the suite runs beside browsers on 2 loaded cores. */
const LOADED_MACHINE_DEADLINE_MS = 120_000;

/** Calls every PolicyService method with an empty request; returns the status of each. */
async function statusOfEveryMethod(
  client: ServiceClient<typeof PolicyService>,
): Promise<Map<string, grpc.status>> {
  const out = new Map<string, grpc.status>();
  const methods = client as unknown as Record<string, (req: object) => unknown>;
  for (const method of PolicyService.methods) {
    let code: grpc.status = grpc.status.OK;
    try {
      if (method.methodKind === "server_streaming") {
        const watcher = subscribe(client);
        const ended = await watcher.ended;
        if (ended instanceof GrpcError) code = ended.code;
      } else {
        await methods[method.localName]({ clientId: "" });
      }
    } catch (err) {
      code = err instanceof GrpcError ? err.code : grpc.status.UNKNOWN;
    }
    out.set(method.name, code);
  }
  return out;
}

/** A REST request over the web port presenting a client certificate. */
async function webRequest(server: AgentServer, cert?: { certPem: string; keyPem: string }): Promise<number> {
  const client = Deno.createHttpClient({
    caCerts: [server.ctx.ca.certPem],
    ...(cert ? { cert: cert.certPem, key: cert.keyPem } : {}),
  });
  try {
    const res = await fetch(`https://localhost:${server.webPort}/api/v1/auth/me`, { client });
    await res.body?.cancel();
    return res.status;
  } finally {
    client.close();
  }
}

dbTest("a revoked certificate is refused by every policy method and on the web port", async (db) => {
  await withEnrolledAgent(db, async (server, agent) => {
    await agent.policy.heartbeat({ clientId: "pc-1" });
    assert.equal(
      await webRequest(server, agent),
      401,
      "a valid certificate passes the web port (then REST auth applies)",
    );
    await db.transaction((tx) => revokeNode(tx, agent.nodeId));

    const statuses = await statusOfEveryMethod(agent.policy);
    assert.equal(statuses.size, PolicyService.methods.length);
    for (const [method, code] of statuses) {
      assert.equal(code, grpc.status.UNAUTHENTICATED, `${method} answered ${grpc.status[code]}`);
    }
    await rejectsWithGrpc(
      agent.policy.heartbeat({ clientId: "pc-1" }),
      grpc.status.UNAUTHENTICATED,
      /is revoked/,
    );

    assert.equal(await webRequest(server, agent), 403);
    assert.equal(await webRequest(server), 401, "requests without a certificate are unaffected");
    const enrollment = enrollmentClient(server, agent);
    const { csrPem } = await generateKeyAndCsr("pc-9");
    await rejectsWithGrpc(
      enrollment.enroll({ enrollmentToken: "whatever", csrPem, nodeName: "pc-9" }),
      grpc.status.UNAUTHENTICATED,
      /is revoked/,
    );
    enrollment.close();
  });
});

dbTest("revocation refuses the very next call and closes an open stream at once", async (db) => {
  await withEnrolledAgent(db, async (_server, agent) => {
    const stream = subscribe(agent.policy);
    await stream.nextSnapshot();
    await agent.policy.heartbeat({ clientId: "pc-1" });
    const started = performance.now();
    await db.transaction((tx) => revokeNode(tx, agent.nodeId));
    // No waiting for the disconnect notification: the call right after the commit is refused.
    await rejectsWithGrpc(
      agent.policy.heartbeat({ clientId: "pc-1" }),
      grpc.status.UNAUTHENTICATED,
      /is revoked/,
    );
    const err = await stream.ended;
    assert.ok(err instanceof GrpcError);
    assert.equal(err.code, grpc.status.UNAUTHENTICATED);
    assert.ok(
      performance.now() - started < 1_500,
      "the stream closes at the revocation, not at a later check",
    );
    // Well inside the cache lifetime: the disconnect command dropped the cached answer.
    await rejectsWithGrpc(
      agent.policy.heartbeat({ clientId: "pc-1" }),
      grpc.status.UNAUTHENTICATED,
      /is revoked/,
    );
  });
});

dbTest("deleting a node closes its stream and refuses its certificate", async (db) => {
  await withEnrolledAgent(db, async (server, agent) => {
    const stream = subscribe(agent.policy);
    await stream.nextSnapshot();
    await db.transaction((tx) => deleteNode(tx, agent.nodeId));
    const err = await stream.ended;
    assert.ok(err instanceof GrpcError);
    assert.equal(err.code, grpc.status.UNAUTHENTICATED);
    await rejectsWithGrpc(
      agent.policy.heartbeat({ clientId: "pc-1" }),
      grpc.status.UNAUTHENTICATED,
      /is revoked/,
    );
    assert.equal(await webRequest(server, agent), 403);
  });
});

dbTest(
  "a certificate whose serial became invalid without a disconnect command is caught by the hub",
  async (db) => {
    await withEnrolledAgent(db, async (_server, agent) => {
      const stream = subscribe(agent.policy);
      await stream.nextSnapshot();
      // A revocation written by hand, without the command the domain function sends.
      const { serial } = parseCertificate(agent.certPem);
      await db.query("INSERT INTO revoked_certificates (serial, node_id) VALUES ($1, $2)", [
        serial,
        agent.nodeId,
      ]);
      const err = await stream.ended;
      assert.ok(err instanceof GrpcError);
      assert.equal(err.code, grpc.status.UNAUTHENTICATED);
    });
  },
);

dbTest(
  "RenewCertificate issues a new 90-day certificate; every serial stays known until the node is revoked",
  async (db) => {
    await withEnrolledAgent(db, async (server, agent) => {
      const { keyPem, csrPem } = await generateKeyAndCsr("ignored-name");
      const res = await agent.policy.renewCertificate({ clientId: "pc-1", csrPem });
      const renewed = parseCertificate(res.signedCertPem);
      const old = parseCertificate(agent.certPem);
      assert.equal(renewed.commonName, "pc-1");
      assert.notEqual(renewed.serial, old.serial);
      assert.ok(Math.abs(renewed.notAfter.getTime() - Date.now() - 90 * 86_400_000) < 120_000);
      const [node] = await db.query<{ cert_serial: string; cert_not_after: Date }>(
        "SELECT cert_serial, cert_not_after FROM nodes WHERE id = $1",
        [agent.nodeId],
      );
      assert.equal(node.cert_serial, renewed.serial);
      assert.equal(node.cert_not_after.getTime(), renewed.notAfter.getTime());
      const serials = await db.query<{ serial: string }>(
        "SELECT serial FROM node_certificates WHERE node_id = $1 ORDER BY issued_at",
        [agent.nodeId],
      );
      assert.deepEqual(serials.map((s) => s.serial).sort(), [old.serial, renewed.serial].sort());

      const fresh = policyClient(server, { certPem: res.signedCertPem, keyPem });
      await fresh.heartbeat({ clientId: "pc-1" });
      // The old pair still works: an agent that crashed between writing key and certificate is not locked out.
      await agent.policy.heartbeat({ clientId: "pc-1" });

      await rejectsWithGrpc(
        agent.policy.renewCertificate({ clientId: "pc-1", csrPem: "garbage" }),
        grpc.status.INVALID_ARGUMENT,
        /^csr_pem: /,
      );

      await db.transaction((tx) => revokeNode(tx, agent.nodeId));
      await rejectsWithGrpc(fresh.heartbeat({ clientId: "pc-1" }), grpc.status.UNAUTHENTICATED);
      await rejectsWithGrpc(agent.policy.heartbeat({ clientId: "pc-1" }), grpc.status.UNAUTHENTICATED);
      fresh.close();
    });
  },
);

dbTest(
  "client_id must equal the certificate's Common Name (empty means the certificate's node)",
  async (db) => {
    await withEnrolledAgent(db, async (_server, agent) => {
      await rejectsWithGrpc(
        agent.policy.heartbeat({ clientId: "pc-2" }),
        grpc.status.PERMISSION_DENIED,
        /client_id "pc-2"/,
      );
      await rejectsWithGrpc(agent.policy.getAgentConfig({ clientId: "PC-1" }), grpc.status.PERMISSION_DENIED);
      const stream = subscribe(agent.policy, { clientId: "pc-2" });
      const err = await stream.ended;
      assert.ok(err instanceof GrpcError);
      assert.equal(err.code, grpc.status.PERMISSION_DENIED);
      assert.equal(stream.messages.length, 0);
      await agent.policy.heartbeat({ clientId: "pc-1" });
      await agent.policy.heartbeat({ clientId: "" });
      const own = subscribe(agent.policy, { clientId: "pc-1" });
      await own.nextSnapshot();
      own.cancel();
    });
  },
);

dbTest("policy port TLS: internal-CA client certificate, TLS 1.3 and ALPN h2 are required", async (db) => {
  await withEnrolledAgent(db, async (server, agent) => {
    const dir = await Deno.makeTempDir();
    try {
      const key = `${dir}/agent.key`;
      const crt = `${dir}/agent.crt`;
      await Deno.writeTextFile(key, agent.keyPem);
      await Deno.writeTextFile(crt, agent.certPem);
      const handshake = async (...args: string[]) => {
        const out = await new Deno.Command("openssl", {
          args: [
            "s_client",
            "-connect",
            `127.0.0.1:${server.policyPort}`,
            "-servername",
            "localhost",
            ...args,
          ],
          stdin: "null",
          stdout: "piped",
          stderr: "piped",
        }).output();
        const text = new TextDecoder().decode(out.stdout);
        const cipher = /Cipher is (\S+)/.exec(text)?.[1] ?? "(NONE)";
        return out.code === 0 && cipher !== "(NONE)"
          ? /ALPN protocol: (\S+)/.exec(text)?.[1] ?? "no-alpn"
          : "refused";
      };
      assert.equal(await handshake("-tls1_3", "-alpn", "h2", "-cert", crt, "-key", key), "h2");
      assert.equal(await handshake("-tls1_2", "-alpn", "h2", "-cert", crt, "-key", key), "refused");

      // Without a client certificate, or with one from another CA, no call gets through.
      const anonymous = new grpc.Client(
        `localhost:${server.policyPort}`,
        grpc.credentials.createSsl(Buffer.from(server.ctx.ca.certPem)),
      );
      const foreignCa = await loadOrCreateCa({ dataDir: dir });
      const pair = await generateKeyAndCsr("pc-1");
      const foreign = await foreignCa.signCsr(pair.csrPem, { commonName: "pc-1" });
      const impostor = policyClient(server, { certPem: foreign.certPem, keyPem: pair.keyPem });
      await rejectsWithGrpc(impostor.heartbeat({ clientId: "pc-1" }), grpc.status.UNAVAILABLE);
      impostor.close();
      const status = await new Promise<grpc.status>((resolve) => {
        anonymous.makeUnaryRequest(
          "/svc.policy.v1.PolicyService/Heartbeat",
          (b: Buffer) => b,
          (b: Buffer) => b,
          Buffer.alloc(0),
          (err) => resolve(err ? err.code : grpc.status.OK),
        );
      });
      anonymous.close();
      assert.equal(status, grpc.status.UNAVAILABLE);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
});

dbTest("policy port limits: 8 MiB messages and no more than one client ping per 10 s", async (db) => {
  await withEnrolledAgent(db, async (server, agent) => {
    await rejectsWithGrpc(
      agent.policy.reportPolkitCatalogue({
        clientId: "pc-1",
        actions: [{ actionId: "org.example.big", description: "x".repeat(9 << 20) }],
      }),
      grpc.status.RESOURCE_EXHAUSTED,
    );

    const goaway = await new Promise<number | string>((resolve) => {
      const session = http2.connect(`https://localhost:${server.policyPort}`, {
        ca: server.ctx.ca.certPem,
        cert: agent.certPem,
        key: agent.keyPem,
        ALPNProtocols: ["h2"],
      });
      session.on("goaway", (code) => resolve(code));
      session.on("error", () => {});
      session.on("close", () => resolve("closed without GOAWAY"));
      session.on("connect", () => {
        for (let i = 0; i < 5; i++) {
          setTimeout(() => {
            if (!session.destroyed && !session.closed) session.ping(() => {});
          }, i * 20);
        }
      });
    });
    assert.equal(goaway, http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    // The agent's own connection is unaffected.
    await agent.policy.heartbeat({ clientId: "pc-1" });
  });
});

dbTest("policy port limits: at most 256 concurrent streams per connection", async (db) => {
  await withEnrolledAgent(db, async (_server, agent) => {
    // One client, one connection: the 257th stream waits until another one ends. Conditions, not clocks:
    // wait (generously) until 256 streams have their snapshot, check that the server holds exactly 256, then
    // end one and wait for the 257th to be served.
    const streams = Array.from({ length: 257 }, () => subscribe(agent.policy));
    const served = () => streams.filter((s) => s.snapshotCount() > 0).length;
    await eventually(() => Promise.resolve(served() >= 256), {
      timeoutMs: LOADED_MACHINE_DEADLINE_MS,
      what: "256 streams with a snapshot",
    });
    // A stream's row is written as it opens, which can trail its snapshot on a loaded machine: wait for the
    // rows too, then check that the server never holds more than 256.
    const open = async () =>
      (await db.query<{ open: number }>("SELECT count(*)::int AS open FROM node_streams"))[0].open;
    await eventually(async () => (await open()) >= 256, {
      timeoutMs: LOADED_MACHINE_DEADLINE_MS,
      what: "256 stream rows",
    });
    assert.equal(await open(), 256, "the server holds 256 streams, not 257");
    assert.equal(served(), 256, "exactly one stream is still waiting");
    const waiting = streams.find((s) => s.snapshotCount() === 0)!;
    streams.find((s) => s !== waiting)!.cancel();
    await waiting.nextSnapshot(LOADED_MACHINE_DEADLINE_MS);
    for (const s of streams) s.cancel();
    await eventually(async () => (await db.query("SELECT 1 FROM node_streams")).length === 0, {
      timeoutMs: LOADED_MACHINE_DEADLINE_MS,
      what: "every stream closed",
    });
  });
});
