/**
 * The handlers of `svc.enrollment.v1.EnrollmentService` (served on the web port through the gRPC bridge).
 * They know nothing about the transport: each takes the decoded request and the caller as an
 * {@link EnrollmentPeer}.
 *
 * Enroll consumes the token in its own committed statement before anything else can fail, so a token is
 * single use even under concurrent calls and is gone even when enrollment then fails (spec). The node, its
 * membership and its certificate record are then written in one transaction.
 */
import { timingSafeEqual } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import type { DescMessage, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServerContext } from "../context.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import type { EnrollmentService } from "../../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { PkiError, validateCommonName } from "../pki/mod.ts";
import { createEnrollmentToken, sha256Hex } from "../domain/node_groups.ts";
import { reEnrollNode } from "../domain/nodes.ts";
import { kerberosEnroll } from "../pki/kerberos_enroll.ts";
import { DomainError } from "../domain/errors.ts";
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
      const refused = async (message: string) => {
        await audit({
          action: "node.enroll",
          outcome: "denied",
          actor: {},
          resource: { type: "node", name: nodeName },
          details: { reason: message },
        }, peer);
        return new GrpcError(grpc.status.UNAUTHENTICATED, message);
      };
      // Its own statement, committed at once: the token is burnt before anything below can fail.
      const [consumed] = await db.query<{ node_group_id: string; node_id: string | null; expired: boolean }>(
        "DELETE FROM enrollment_tokens WHERE token_hash = $1 RETURNING node_group_id, node_id, expires_at <= now() AS expired",
        [await sha256Hex(token)],
      );
      if (!consumed) {
        throw await refused("enrollment token is invalid or was already used; create a new token");
      }
      if (consumed.expired) {
        throw await refused(
          "enrollment token has expired (tokens are valid for 5 minutes); create a new token",
        );
      }

      let signed;
      try {
        signed = await ctx.ca.signCsr(request.csrPem, { commonName: nodeName });
      } catch (err) {
        if (err instanceof PkiError) throw invalid("csr_pem", err.message);
        throw err;
      }
      let result: { nodeId: string; groupName: string };
      try {
        // The node, its membership, its certificate record and the success audit row commit together.
        result = await db.unitOfWork(async () => {
          const made = await db.transaction(async (tx) => {
            if (consumed.node_id) {
              // A re-enrollment token (Nodes → Re-enroll): the same node record gets the new certificate.
              const nodeId = consumed.node_id;
              const cert = { serial: signed.serial, notBefore: signed.notBefore, notAfter: signed.notAfter };
              return { nodeId, ...await reEnrollNode(tx, { nodeId, nodeName, cert }) };
            }
            const [group] = await tx.query<{ name: string }>("SELECT name FROM node_groups WHERE id = $1", [
              consumed.node_group_id,
            ]);
            if (!group) {
              throw new GrpcError(
                grpc.status.FAILED_PRECONDITION,
                "the node group of this enrollment token was deleted; create a new token",
              );
            }
            const [taken] = await tx.query("SELECT 1 FROM nodes WHERE name = $1", [nodeName]);
            if (taken) throw new GrpcError(grpc.status.ALREADY_EXISTS, nodeExistsMessage(nodeName));
            const [node] = await tx.query<{ id: string }>(
              "INSERT INTO nodes (name, cert_serial, cert_not_after) VALUES ($1, $2, $3) RETURNING id",
              [nodeName, signed.serial, signed.notAfter],
            );
            await tx.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [
              node.id,
              consumed.node_group_id,
            ]);
            await tx.query(
              "INSERT INTO node_certificates (serial, node_id, not_before, not_after) VALUES ($1, $2, $3, $4)",
              [signed.serial, node.id, signed.notBefore, signed.notAfter],
            );
            await publishLiveHint(tx, { topic: "nodes", ids: [node.id] });
            return { nodeId: node.id, groupName: group.name };
          });
          await ctx.audit.record({
            action: "node.enroll",
            outcome: "success",
            actor: { nodeId: made.nodeId, username: nodeName },
            resource: { type: "node", id: made.nodeId, name: nodeName },
            details: consumed.node_id
              ? { re_enrolled: true, serial: signed.serial }
              : { node_group_id: consumed.node_group_id, serial: signed.serial },
            sourceIp: peer.remoteAddr,
          });
          return made;
        });
      } catch (err) {
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
