/**
 * KerberosEnroll with a real MIT KDC (throwaway realm under a temporary directory): the agent, with Kerberos
 * configured and its keytab present, enrolls with no enrollment token (SPNEGO from the keytab through the
 * system GSSAPI), named after its principal's host and placed in
 * kerberos.default_node_group (audited); the same token again, a principal of another realm, a node name
 * other than the principal's, a user principal and a server without Kerberos enabled are refused.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { dbTest } from "../helpers/db.ts";
import { initTokenWhenReady, KDC_MISSING, startKdc } from "../helpers/kdc.ts";
import { createGroup, enrollmentClient, startAgentServer } from "../helpers/agents.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import { openGssapi } from "../../shared/pki/gssapi.ts";
import { nodeNameForPrincipal } from "../../server/grpc/kerberos_enroll.ts";
import { decodeCertificate, generateKeyAndCsr } from "../../shared/pki/csr.ts";
import { buildAgentConfig } from "../../agent/config.ts";
import { enroll } from "../../agent/enroll.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";

const REALM = "SVC.TEST";
if (KDC_MISSING) console.log(`skipped: KerberosEnroll needs ${KDC_MISSING}`);

Deno.test("machine principals map to node names; others are refused", () => {
  assert.equal(nodeNameForPrincipal("host/PC1.example.test@SVC.TEST", REALM), "pc1.example.test");
  assert.throws(() => nodeNameForPrincipal("alice@SVC.TEST", REALM), /not a machine principal/);
  assert.throws(
    () => nodeNameForPrincipal("HTTP/pc1.example.test@SVC.TEST", REALM),
    /not a machine principal/,
  );
  assert.throws(() => nodeNameForPrincipal("host/pc1.example.test@OTHER.TEST", REALM), /realm OTHER\.TEST/);
});

async function code(p: Promise<unknown>): Promise<number | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return err instanceof GrpcError ? err.code : (err as { code?: number }).code;
  }
}

dbTest(
  "KerberosEnroll: a machine enrolls with its keytab; replay, other realm, other name refused",
  async (db) => {
    const realm = await startKdc();
    const dir = realm.dir;
    try {
      // The agent's side: a token from the machine keytab for the server's HTTP principal.
      const machine = openGssapi({ clientKeytab: realm.hostKeytab });
      const token = () => initTokenWhenReady(machine, "HTTP@svc.example.test");

      await createGroup(db, "kerberos-machines");
      const server = await startAgentServer(db, {
        config: {
          kerberos: {
            enabled: true,
            keytab: realm.httpKeytab,
            realm: REALM,
            defaultNodeGroup: "kerberos-machines",
          },
        },
      });
      const client = enrollmentClient(server);
      try {
        const { csrPem } = await generateKeyAndCsr("pc1.example.test");
        // Another name than the principal's.
        assert.equal(
          await code(client.kerberosEnroll({ spnegoToken: await token(), csrPem, nodeName: "other-pc" })),
          grpc.status.UNAUTHENTICATED,
        );
        // Another realm than configured.
        server.ctx.config.kerberos.realm = "OTHER.TEST";
        assert.equal(
          await code(client.kerberosEnroll({ spnegoToken: await token(), csrPem, nodeName: "" })),
          grpc.status.UNAUTHENTICATED,
        );
        server.ctx.config.kerberos.realm = REALM;

        // The agent: Kerberos configured and the keytab present, no enrollment token at all. It sends its
        // client id (the short host name) and builds the token with the system GSSAPI.
        const { config } = buildAgentConfig({
          server: { address: "localhost", enrollment_port: server.webPort },
          agent: { client_id: "pc1" },
          enrollment: { data_dir: join(dir, "agent") },
          kerberos: {
            enabled: true,
            keytab_file: realm.hostKeytab,
            service_principal: `HTTP/svc.example.test@${REALM}`,
          },
        }, "agent.yaml");
        const res = await enroll({
          config,
          configPath: "agent.yaml",
          logger: SILENT_LOGGER,
          trustStore: server.ctx.ca.certPem,
        });
        assert.equal(res.nodeGroup, "kerberos-machines");
        assert.equal(res.nodeName, "pc1");
        const [node] = await db.query<{ name: string }>("SELECT name FROM nodes WHERE id = $1", [res.nodeId]);
        assert.equal(node.name, "pc1");
        const certPem = await Deno.readTextFile(join(dir, "agent", "agent.crt"));
        assert.equal(decodeCertificate(certPem).subjectName.getField("CN")[0], "pc1");
        const audits = await db.query<{ outcome: string; details: unknown }>(
          "SELECT outcome, details::text AS details FROM audit_logs WHERE action = 'node.enroll' ORDER BY id",
        );
        assert.deepEqual(audits.map((a) => a.outcome), ["denied", "denied", "success"]);
        assert.match(String(audits[2].details), /kerberos/);
        // A token accepted once (the node exists by now) is refused as a replay the second time.
        const spnegoToken = await token();
        assert.equal(
          await code(client.kerberosEnroll({ spnegoToken, csrPem, nodeName: "pc1" })),
          grpc.status.ALREADY_EXISTS,
        );
        assert.equal(
          await code(client.kerberosEnroll({ spnegoToken, csrPem, nodeName: "pc1" })),
          grpc.status.UNAUTHENTICATED,
        );
        // Disabled: refused before looking at the token.
        server.ctx.config.kerberos.enabled = false;
        assert.equal(
          await code(client.kerberosEnroll({ spnegoToken: await token(), csrPem, nodeName: "" })),
          grpc.status.FAILED_PRECONDITION,
        );
      } finally {
        client.close();
        machine.close();
        await server.stop();
      }
    } finally {
      await realm.stop();
    }
  },
  { ignore: KDC_MISSING !== undefined },
);
