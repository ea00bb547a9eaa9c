/**
 * Re-enrollment of a revoked node: `POST /api/v1/nodes/{id}/re-enroll` (permission of whoever creates
 * enrollment tokens) issues a single-use token bound to that node; enrolling with it under the node's
 * name gives the same node record a new certificate in one transaction — id, groups, audit trail kept, the
 * old certificate still refused, the new one accepted. Refused for a node that is not revoked, for another
 * name or a bad request (the token stays usable: only the enrollment it was made for uses it up), and
 * without the permission.
 */
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { dbTest } from "../helpers/db.ts";
import {
  createGroup,
  enrollAgent,
  enrollmentClient,
  policyClient,
  startAgentServer,
} from "../helpers/agents.ts";
import { expectStatus } from "./domain_helpers.ts";
import { domainRoutes } from "../../server/http/routes/mod.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import { generateKeyAndCsr, parseCertificate } from "../../shared/pki/csr.ts";

async function grpcCode(promise: Promise<unknown>): Promise<grpc.status> {
  try {
    await promise;
    return grpc.status.OK;
  } catch (err) {
    if (err instanceof GrpcError) return err.code;
    throw err;
  }
}

dbTest("re-enroll: a revoked node gets a token for its name and keeps its record and history", async (db) => {
  const server = await startAgentServer(db, { routes: (ctx) => domainRoutes(ctx) });
  const enrollment = enrollmentClient(server);
  const clients: { close(): void }[] = [enrollment];
  try {
    const admin = await server.test.loginAs({ superAdmin: true });
    const group = await createGroup(db, "lab");
    const agent = await enrollAgent(server, { name: "pc-1", groupId: group });
    clients.push(agent);
    const id = agent.nodeId;
    await agent.policy.heartbeat({ clientId: "pc-1", healthy: false, healthMessage: "problems: x" });

    const notRevoked = expectStatus(await admin.request("POST", `/api/v1/nodes/${id}/re-enroll`), 409);
    assert.match(notRevoked.error?.message ?? JSON.stringify(notRevoked), /revoke it first/);
    expectStatus(await admin.request("POST", `/api/v1/nodes/${id}/revoke`, {}), 200);
    assert.equal(await grpcCode(agent.policy.heartbeat({ clientId: "pc-1" })), grpc.status.UNAUTHENTICATED);

    // The permission is the one that creates enrollment tokens.
    const viewer = await server.test.loginAs({ permissions: ["node:view", "node:revoke"] });
    expectStatus(await viewer.request("POST", `/api/v1/nodes/${id}/re-enroll`), 403);
    const tokenMaker = await server.test.loginAs({ permissions: ["node:view", "node_group:create"] });

    // A token bound to pc-1 cannot enroll another name, and a refused attempt does not use it up.
    const first = expectStatus(await tokenMaker.request("POST", `/api/v1/nodes/${id}/re-enroll`), 201);
    assert.equal(first.node_name, "pc-1");
    assert.match(first.command, /^SVC_ENROLLMENT_TOKEN='[A-Za-z0-9_-]{43}' svc-agent$/);
    const other = await generateKeyAndCsr("pc-2");
    await assert.rejects(
      enrollment.enroll({ enrollmentToken: first.token, csrPem: other.csrPem, nodeName: "pc-2" }),
      (err: unknown) =>
        err instanceof GrpcError && err.code === grpc.status.FAILED_PRECONDITION &&
        /for node "pc-1"/.test(err.message),
    );
    const fresh = await generateKeyAndCsr("pc-1");
    const badCsr =
      "-----BEGIN CERTIFICATE REQUEST-----\nbm90IGEgcmVxdWVzdA==\n-----END CERTIFICATE REQUEST-----\n";
    assert.equal(
      await grpcCode(enrollment.enroll({ enrollmentToken: first.token, csrPem: badCsr, nodeName: "pc-1" })),
      grpc.status.INVALID_ARGUMENT,
      "a damaged certificate request is refused",
    );
    const serials = await db.query("SELECT serial FROM node_certificates");
    const res = await enrollment.enroll({
      enrollmentToken: first.token,
      csrPem: fresh.csrPem,
      nodeName: "pc-1",
    });
    assert.equal(
      (await db.query("SELECT serial FROM node_certificates")).length,
      serials.length + 1,
      "the refused attempts signed nothing",
    );
    assert.equal(
      await grpcCode(
        enrollment.enroll({ enrollmentToken: first.token, csrPem: fresh.csrPem, nodeName: "pc-1" }),
      ),
      grpc.status.UNAUTHENTICATED,
      "the enrollment it was made for used the token up",
    );
    assert.equal(res.nodeId, id, "the same node record");
    assert.equal(res.assignedNodeGroup, "lab");
    const newSerial = parseCertificate(res.signedCertPem).serial;

    const node = expectStatus(await admin.request("GET", `/api/v1/nodes/${id}`), 200);
    assert.equal(node.cert_revoked, false);
    assert.equal(node.cert_serial.toLowerCase(), newSerial.toLowerCase());
    assert.equal(node.agent_healthy, true);
    assert.deepEqual(node.groups.map((g: { id: string }) => g.id), [group]);
    const [{ count }] = await db.query<{ count: number }>("SELECT count(*)::int AS count FROM nodes");
    assert.equal(count, 1);

    // Old certificate refused, new one accepted.
    assert.equal(await grpcCode(agent.policy.heartbeat({ clientId: "pc-1" })), grpc.status.UNAUTHENTICATED);
    const renewed = policyClient(server, { certPem: res.signedCertPem, keyPem: fresh.keyPem });
    clients.push(renewed);
    await renewed.heartbeat({ clientId: "pc-1", healthy: true });

    // The audit trail of the node is one: enrollment, revocation, token, re-enrollment, all on its id.
    const audit = await db.query<{ action: string; outcome: string; details: Record<string, unknown> }>(
      "SELECT action, outcome, details FROM audit_logs WHERE resource_type = 'node' AND resource_id = $1 ORDER BY id",
      [id],
    );
    const actions = audit.map((a) => `${a.action}:${a.outcome}`);
    assert.ok(actions.includes("node.revoke:success"), actions.join(" "));
    assert.ok(actions.filter((a) => a === "node.enroll:success").length === 2, actions.join(" "));
    assert.ok(audit.some((a) => a.action === "enrollment_token.create" && a.details.re_enroll === true));
  } finally {
    for (const c of clients) c.close();
    await server.stop();
  }
});
