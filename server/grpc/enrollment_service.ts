/**
 * The handlers of `svc.enrollment.v1.EnrollmentService` (served on the web port through the gRPC bridge).
 * They know nothing about the transport: each takes the decoded request and the caller as an
 * {@link EnrollmentPeer}.
 *
 * Enroll consumes the token, and writes the node, its membership, its certificate record and the audit row, in
 * one transaction: a token is single use even under concurrent calls. When the enrollment then fails, the
 * token is burnt in a statement of its own, so it is gone even then (spec). A re-enrollment token is used up
 * only by the enrollment of the node it was made for: a refused attempt leaves it usable.
 */
import { timingSafeEqual } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import type { DescMessage, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServerContext } from "../context.ts";
import type { Queryable } from "../db/db.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import type { EnrollmentService } from "../../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { PkiError, validateCommonName } from "../pki/mod.ts";
import { createEnrollmentToken, sha256Hex } from "../domain/node_groups.ts";
import { reEnrollNode } from "../domain/nodes.ts";
import { kerberosEnroll } from "./kerberos_enroll.ts";
import { DomainError } from "../core/errors.ts";
import type { AuditEvent } from "../audit/event.ts";
import { checkText, checkUuid, invalid } from "./validate.ts";
import type { VerifiedCertificate } from "./peer_identity.ts";
import { publishLiveHint } from "../events/publish.ts";

/** Who is calling, independent of the transport. */
export interface EnrollmentPeer {
  /** The TLS-verified client certificate, when the caller presented one. */
  verifiedCert?: VerifiedCertificate;
  /** TCP peer address (for audit). */
  remoteAddr: string;
  /** Request metadata (header) by lower-case name. */
  metadata: (name: string) => string | undefined;
}

type Methods = (typeof EnrollmentService)["method"];

/** One transport-agnostic handler per EnrollmentService method, keyed by local name. */
export type EnrollmentHandlers = {
  [K in keyof Methods]: Methods[K] extends
    { input: infer I extends DescMessage; output: infer O extends DescMessage }
    ? (request: MessageShape<I>, peer: EnrollmentPeer) => Promise<MessageInitShape<O>>
    : never;
};

/** Methods callable without a client certificate; every other method requires a verified one. */
export const CERTIFICATE_EXEMPT_METHODS: ReadonlySet<string> = new Set([
  "Enroll",
  "KerberosEnroll",
  "CreateEnrollmentToken",
]);

/** Exact refusal for a taken node name (spec, Errors). */
export function nodeExistsMessage(name: string): string {
  return `a node named "${name}" already exists and must be deleted before re-enrolling`;
}

/** Longest enrollment token accepted (generated ones are 43 characters). */
const MAX_TOKEN_LENGTH = 512;

/** Compares two secrets in time independent of where they differ (and of their lengths). */
async function secretsEqual(given: string, expected: string): Promise<boolean> {
  const digest = async (s: string) =>
    new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s)));
  return timingSafeEqual(await digest(given), await digest(expected));
}

/**
 * Inserts a newly enrolled node with its group membership and certificate record in one statement (one
 * round trip). A taken name fails on the unique index (23505), which the caller answers as ALREADY_EXISTS.
 *
 * @throws {GrpcError} FAILED_PRECONDITION when the token's node group was deleted
 */
async function insertEnrolledNode(
  q: Queryable,
  params: {
    nodeId: string;
    nodeName: string;
    groupId: string;
    cert: { serial: string; notBefore: Date; notAfter: Date };
  },
): Promise<{ groupName: string }> {
  const { nodeId, nodeName, groupId, cert } = params;
  const [row] = await q.query<{ name: string }>(
    `WITH g AS (SELECT id, name FROM node_groups WHERE id = $2),
          n AS (INSERT INTO nodes (id, name, cert_serial, cert_not_after) SELECT $1, $3, $4, $5 FROM g RETURNING id),
          m AS (INSERT INTO node_group_members (node_id, node_group_id) SELECT n.id, g.id FROM n, g),
          c AS (INSERT INTO node_certificates (serial, node_id, not_before, not_after) SELECT $4, n.id, $6, $5 FROM n)
     SELECT g.name FROM g, n`,
    [nodeId, groupId, nodeName, cert.serial, cert.notAfter, cert.notBefore],
  );
  if (!row) {
    throw new GrpcError(
      grpc.status.FAILED_PRECONDITION,
      "the node group of this enrollment token was deleted; create a new token",
    );
  }
  return { groupName: row.name };
}

/** Builds the EnrollmentService handlers. */
export function createEnrollmentHandlers(ctx: ServerContext): EnrollmentHandlers {
  const { db } = ctx;

  /** Records a refusal: nothing changed, so a failing audit insert is logged rather than hiding the answer. */
  async function audit(event: Omit<AuditEvent, "sourceIp">, peer: EnrollmentPeer): Promise<void> {
    try {
      await ctx.audit.record({ ...event, sourceIp: peer.remoteAddr });
    } catch (err) {
      ctx.log.error("enrollment: audit record failed", { action: event.action, error: String(err) });
    }
  }

  return {
    async enroll(request, peer) {
      const token = checkText("enrollment_token", request.enrollmentToken, {
        max: MAX_TOKEN_LENGTH,
        required: true,
      });
      checkText("csr_pem", request.csrPem, { max: 16_384, required: true, multiline: true });
      const nodeName = request.nodeName;
      try {
        validateCommonName(nodeName);
      } catch (err) {
        throw invalid("node_name", (err as Error).message);
      }
      // An enrollment turned away is audited with its reason: "denied" (no valid token) or "failure".
      const auditRefusal = (outcome: "denied" | "failure", message: string) =>
        audit({
          action: "node.enroll",
          outcome,
          actor: {},
          resource: { type: "node", name: nodeName },
          details: { reason: message },
        }, peer);
      const refused = async (message: string) => {
        await auditRefusal("denied", message);
        return new GrpcError(grpc.status.UNAUTHENTICATED, message);
      };
      const tokenHash = sha256Hex(token);
      // One commit per enrollment: the token is consumed in the transaction that records the node. A concurrent
      // call with the same token waits on the deleted row and then finds it gone, so exactly one wins. The
      // certificate is signed before that transaction, after a read that the token exists and is current (so
      // no one makes the CA sign without a token, and the single connection of the embedded database is not
      // held while signing). When anything after that read fails, the token is burnt in a statement of its
      // own: a token is gone even when its enrollment fails (spec). A re-enrollment token (Nodes → Re-enroll,
      // bound to one revoked node) is the exception: only the enrollment it was made for uses it up, so an
      // attempt under another name or with a damaged request leaves it for the right one.
      const burnToken = () =>
        db.query("DELETE FROM enrollment_tokens WHERE token_hash = $1", [tokenHash]).catch((burnErr) =>
          // The database is failing (the enrollment's own error says so); the token expires anyway.
          ctx.log.error("enrollment: could not burn the token of a failed enrollment", {
            error: String(burnErr),
          })
        );
      const [known] = await db.query<{ expired: boolean; node_id: string | null; node_name: string | null }>(
        `SELECT t.expires_at <= now() AS expired, t.node_id, n.name AS node_name
           FROM enrollment_tokens t LEFT JOIN nodes n ON n.id = t.node_id WHERE t.token_hash = $1`,
        [tokenHash],
      );
      if (!known) throw await refused("enrollment token is invalid or was already used; create a new token");
      const burn = known.node_id ? () => Promise.resolve() : burnToken;
      if (known.expired) {
        await burnToken();
        throw await refused(
          "enrollment token has expired (tokens are valid for 5 minutes); create a new token",
        );
      }
      if (known.node_id && known.node_name !== nodeName) {
        // Checked again under a row lock when the node is re-enrolled (reEnrollNode); here so that a wrong name
        // is refused before the CA signs anything.
        const message = known.node_name === null
          ? "the node of this re-enrollment token was deleted; create a new token"
          : `this re-enrollment token is for node "${known.node_name}", not "${nodeName}"; set ` +
            `agent.client_id to "${known.node_name}" or create a token for the right node`;
        await auditRefusal("failure", message);
        throw new GrpcError(grpc.status.FAILED_PRECONDITION, message);
      }
      let signed: Awaited<ReturnType<ServerContext["ca"]["signCsr"]>>;
      try {
        signed = await ctx.ca.signCsr(request.csrPem, { commonName: nodeName });
      } catch (err) {
        await burn();
        if (err instanceof PkiError) throw invalid("csr_pem", err.message);
        throw err;
      }
      let refusal: string | undefined;
      let result: { nodeId: string; groupName: string } | undefined;
      try {
        result = await db.unitOfWork(async () => {
          const [consumed] = await db.query<{ node_group_id: string; node_id: string | null }>(
            "DELETE FROM enrollment_tokens WHERE token_hash = $1 AND expires_at > now() RETURNING node_group_id, node_id",
            [tokenHash],
          );
          if (!consumed) {
            // Used by a concurrent call since the read above (or it expired meanwhile; then burnt below).
            refusal = "enrollment token is invalid or was already used; create a new token";
            return undefined;
          }
          const reEnrolling = consumed.node_id;
          const nodeId = reEnrolling ?? crypto.randomUUID();
          const cert = { serial: signed.serial, notBefore: signed.notBefore, notAfter: signed.notAfter };
          // The statements go out together (postgres.js pipelines a transaction's concurrent queries): the
          // node's id is chosen here so the audit row need not wait for the insert's answer.
          const settled = await Promise.allSettled([
            // A re-enrollment token (Nodes → Re-enroll): the same node record gets the new certificate.
            reEnrolling
              ? reEnrollNode(db, { nodeId, nodeName, cert })
              : insertEnrolledNode(db, { nodeId, nodeName, groupId: consumed.node_group_id, cert }),
            reEnrolling ? undefined : publishLiveHint(db, { topic: "nodes", ids: [nodeId] }),
            ctx.audit.record({
              action: "node.enroll",
              outcome: "success",
              actor: { nodeId, username: nodeName },
              resource: { type: "node", id: nodeId, name: nodeName },
              details: reEnrolling
                ? { re_enrolled: true, serial: signed.serial }
                : { node_group_id: consumed.node_group_id, serial: signed.serial },
              sourceIp: peer.remoteAddr,
            }),
          ]);
          // Every statement has answered before the unit ends; the first failure (in statement order) decides.
          const failed = settled.find((s) => s.status === "rejected");
          if (failed) throw failed.reason;
          const made = settled[0] as PromiseFulfilledResult<{ groupName: string }>;
          return { nodeId, groupName: made.value.groupName };
        });
      } catch (err) {
        await burn();
        // Two different tokens racing for the same name: the unique index decides, with the same answer.
        const code = (err as { code?: string }).code;
        const failure = code === "23505"
          ? new GrpcError(grpc.status.ALREADY_EXISTS, nodeExistsMessage(nodeName))
          : err instanceof DomainError
          ? new GrpcError(grpc.status.FAILED_PRECONDITION, err.message)
          : err;
        if (failure instanceof GrpcError) {
          await audit({
            action: "node.enroll",
            outcome: "failure",
            actor: {},
            resource: { type: "node", name: nodeName },
            details: { reason: failure.message },
          }, peer);
        }
        throw failure;
      }
      if (!result) {
        await burn();
        throw await refused(refusal ?? "enrollment token is invalid or was already used; create a new token");
      }
      return {
        nodeId: result.nodeId,
        signedCertPem: signed.certPem,
        caCertPem: ctx.ca.certPem,
        assignedNodeGroup: result.groupName,
      };
    },

    async kerberosEnroll(request, peer) {
      checkText("csr_pem", request.csrPem, { max: 16_384, required: true, multiline: true });
      return await kerberosEnroll(ctx, request, peer);
    },

    async createEnrollmentToken(request, peer) {
      const expected = ctx.config.security.adminToken;
      if (!expected) {
        throw new GrpcError(
          grpc.status.FAILED_PRECONDITION,
          "CreateEnrollmentToken is disabled: set security.admin_token (SVC_SECURITY_ADMIN_TOKEN) on the server to enable it",
        );
      }
      if (!(await secretsEqual(peer.metadata("x-admin-token") ?? "", expected))) {
        await audit({
          action: "enrollment_token.create",
          outcome: "denied",
          actor: {},
          resource: { type: "node_group", id: request.nodeGroupId.slice(0, 64) },
          details: { reason: "x-admin-token missing or wrong" },
        }, peer);
        throw new GrpcError(grpc.status.UNAUTHENTICATED, "x-admin-token metadata is missing or wrong");
      }
      const groupId = checkUuid("node_group_id", request.nodeGroupId);
      let created;
      try {
        // The token and its audit row commit together.
        created = await db.unitOfWork(async () => {
          const token = await createEnrollmentToken(db, groupId, { createdBy: "admin-token" });
          await ctx.audit.record({
            action: "enrollment_token.create",
            outcome: "success",
            actor: { username: "admin-token" },
            resource: { type: "node_group", id: groupId },
            details: { expires_at: token.expires_at.toISOString() },
            sourceIp: peer.remoteAddr,
          });
          return token;
        });
      } catch (err) {
        if (err instanceof DomainError && err.kind === "not_found") {
          throw new GrpcError(grpc.status.NOT_FOUND, `node group ${groupId} does not exist`);
        }
        throw err;
      }
      return { token: created.token, expiresAt: timestampFromDate(created.expires_at) };
    },
  };
}
