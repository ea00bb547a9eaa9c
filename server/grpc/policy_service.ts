/**
 * The handlers of `svc.policy.v1.PolicyService`. Every method, unary or streaming, runs behind
 * {@link authenticateCall}: the TLS-verified client certificate must belong to an existing node, must not be
 * revoked (checked on every call), and a non-empty `client_id` must equal the certificate's Common Name.
 */
import * as grpc from "@grpc/grpc-js";
import type { ServerContext } from "../context.ts";
import { GrpcError, type ServiceHandlers, type UnaryCallContext } from "../../shared/grpc/adapter.ts";
import {
  ComplianceStatus,
  type HeartbeatRequest,
  type PolicyService,
  type ReportComplianceRequest,
  type ReportTamperEventRequest,
} from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { PkiError } from "../pki/mod.ts";
import { DELIVERS_SQL } from "../domain/reach.ts";
import type { Hub } from "../hub/hub.ts";
import { refreshConnectedStatus } from "../hub/node_status.ts";
import { publishLiveHint } from "../events/publish.ts";
import { certificateFromPeer, type CertificateVerifier, type NodeIdentity } from "./peer_identity.ts";
import { storePolkitCatalogue, storeSchemaCatalogue } from "./catalogues.ts";
import { loadNotificationSettings } from "./agent_config.ts";
import { checkCount, checkText, checkUuid, invalid } from "./validate.ts";
import { diskEncryptionHandlers } from "./disk_encryption.ts";

type Handlers = ServiceHandlers<typeof PolicyService>;

/** What the handlers need besides the server context. */
export interface PolicyServiceDeps {
  hub: Hub;
  verifier: CertificateVerifier;
}

/**
 * Resolves the caller of a policy-port call, or throws: UNAUTHENTICATED without a verified certificate or
 * when its serial is unknown, revoked or its node deleted; PERMISSION_DENIED when `clientId` is set and
 * differs from the certificate's Common Name.
 */
export async function authenticateCall(
  call: Pick<UnaryCallContext, "getAuthContext">,
  clientId: string,
  verifier: CertificateVerifier,
): Promise<NodeIdentity> {
  const auth = call.getAuthContext();
  const cert = certificateFromPeer(auth.sslPeerCertificate);
  if (!cert) {
    throw new GrpcError(
      grpc.status.UNAUTHENTICATED,
      "a client certificate issued by the server's CA is required",
    );
  }
  const identity = await verifier.verify(cert);
  if (clientId !== "" && clientId !== identity.nodeName) {
    const given = JSON.stringify(clientId.slice(0, 253));
    throw new GrpcError(
      grpc.status.PERMISSION_DENIED,
      `client_id ${given} does not match the node of the client certificate ("${identity.nodeName}")`,
    );
  }
  return identity;
}

/** A handler of {@link Handlers} that also receives the authenticated caller. */
type WithIdentity<H> = H extends (request: infer R, call: infer C) => infer O
  ? (request: R, call: C, identity: NodeIdentity) => O
  : never;

/** Handlers written against an authenticated caller; {@link guardAll} supplies it. */
type GuardedHandlers = { [K in keyof Handlers]: WithIdentity<Handlers[K]> };

const COMPLIANCE_STATUS_NAMES: Record<number, string> = {
  [ComplianceStatus.UNKNOWN]: "unknown",
  [ComplianceStatus.COMPLIANT]: "compliant",
  [ComplianceStatus.NON_COMPLIANT]: "non_compliant",
  [ComplianceStatus.INAPPLICABLE]: "inapplicable",
  [ComplianceStatus.ERROR]: "error",
};

function complianceStatus(field: string, value: ComplianceStatus): string {
  const name = COMPLIANCE_STATUS_NAMES[value];
  if (name === undefined) throw invalid(field, `${value} is not a known compliance status`);
  return name;
}

/** The address part of a grpc-js peer string (`1.2.3.4:5678`, `[::1]:5678`). */
function peerAddress(call: Pick<UnaryCallContext, "getPeer">): string {
  const peer = call.getPeer();
  const m = /^\[(.*)\]:\d+$/.exec(peer) ?? /^(.*):\d+$/.exec(peer);
  return m ? m[1] : peer;
}

/** Builds the PolicyService handlers. */
export function createPolicyHandlers(ctx: ServerContext, deps: PolicyServiceDeps): Handlers {
  const { db, log } = ctx;
  const { hub, verifier } = deps;

  const diskEncryption = diskEncryptionHandlers(ctx);

  async function reportCompliance(request: ReportComplianceRequest, identity: NodeIdentity): Promise<void> {
    const policyId = checkUuid("policy_id", request.policyId);
    const status = complianceStatus("status", request.status);
    const message = checkText("message", request.message, { max: 4096, multiline: true });
    checkCount("items", request.items, 10_000);
    const items = request.items.map((item, i) => ({
      schema_id: checkText(`items[${i}].schema_id`, item.schemaId, { max: 512 }),
      key: checkText(`items[${i}].key`, item.key, { max: 512 }),
      status: complianceStatus(`items[${i}].status`, item.status),
      message: checkText(`items[${i}].message`, item.message, { max: 4096, multiline: true }),
    }));
    if (request.policyVersion < 0) throw invalid("policy_version", "must not be negative");
    // From the binding tables, not the reach model: the agent may report on a policy it received a moment ago,
    // while a large change is still being worked into policy_reach (server/domain/reach.ts).
    const [delivered] = await db.query(
      `SELECT 1 FROM policies p, nodes n WHERE p.id = $1 AND n.id = $2 AND ${DELIVERS_SQL}`,
      [policyId, identity.nodeId],
    );
    if (!delivered) {
      throw new GrpcError(
        grpc.status.FAILED_PRECONDITION,
        `policy ${policyId} is not delivered to node "${identity.nodeName}"; report only policies from the current snapshot`,
      );
    }
    const [row] = await db.query<{ previous: string | null }>(
      `WITH previous AS (SELECT status FROM compliance_results WHERE node_id = $1 AND policy_id = $2)
       INSERT INTO compliance_results (node_id, policy_id, policy_version, status, message, items, reported_at)
       VALUES ($1, $2, $3, $4, $5, $6::text::jsonb, now())
       ON CONFLICT (node_id, policy_id) DO UPDATE SET policy_version = excluded.policy_version,
         status = excluded.status, message = excluded.message, items = excluded.items, reported_at = now()
       RETURNING (SELECT status FROM previous) AS previous`,
      [identity.nodeId, policyId, request.policyVersion, status, message, JSON.stringify(items)],
    );
    // Only an error appearing or going away can move the node between online and degraded.
    if (status === "error" || row.previous === "error") await refreshConnectedStatus(db, identity.nodeId);
    await publishLiveHint(db, { topic: "compliance", ids: [identity.nodeId] });
  }

  async function heartbeat(
    request: HeartbeatRequest,
    call: UnaryCallContext,
    identity: NodeIdentity,
  ): Promise<void> {
    const fqdn = checkText("fqdn", request.fqdn, { max: 253 });
    const ip = checkText("ip_address", request.ipAddress, { max: 45 }) || peerAddress(call);
    const osName = checkText("os_name", request.osName, { max: 128 });
    const osVersion = checkText("os_version", request.osVersion, { max: 128 });
    checkCount("desktop_environments", request.desktopEnvironments, 16);
    const desktops = request.desktopEnvironments.map((d, i) =>
      checkText(`desktop_environments[${i}]`, d, { max: 128 })
    );
    const agentVersion = checkText("agent_version", request.agentVersion, { max: 64 });
    const machineId = checkText("machine_id", request.machineId, { max: 64 });
    const healthMessage = checkText("health_message", request.healthMessage, { max: 1024, multiline: true });
    // Facts the agent could not determine arrive empty and keep the last known value.
    await db.query(
      `UPDATE nodes SET fqdn = coalesce(nullif($2, ''), fqdn), ip_address = coalesce(nullif($3, ''), ip_address),
         os_name = coalesce(nullif($4, ''), os_name), os_version = coalesce(nullif($5, ''), os_version),
         desktop_environments = $6::text[], agent_version = coalesce(nullif($7, ''), agent_version),
         machine_id = coalesce(nullif($8, ''), machine_id), agent_healthy = $9, agent_health_message = $10,
         last_seen = now(), updated_at = now()
       WHERE id = $1`,
      [
        identity.nodeId,
        fqdn,
        ip,
        osName,
        osVersion,
        desktops,
        agentVersion,
        machineId,
        request.healthy ?? true,
        request.healthy === false ? healthMessage : "",
      ],
    );
    await refreshConnectedStatus(db, identity.nodeId);
  }

  async function reportTamperEvent(
    request: ReportTamperEventRequest,
    call: UnaryCallContext,
    identity: NodeIdentity,
  ): Promise<void> {
    const path = checkText("file_path", request.filePath, { max: 4096, required: true });
    if (!path.startsWith("/")) throw invalid("file_path", "must be an absolute path");
    checkCount("processes", request.processes, 256);
    const processes = request.processes.map((p, i) => ({
      pid: p.pid,
      comm: checkText(`processes[${i}].comm`, p.comm, { max: 64 }),
      user: checkText(`processes[${i}].user`, p.user, { max: 256 }),
    }));
    const policyType = checkText("policy_type", request.policyType, { max: 64 });
    const detectedAt = request.detectedAt
      ? new Date(Number(request.detectedAt.seconds) * 1000 + Math.floor(request.detectedAt.nanos / 1e6))
      : undefined;
    await ctx.audit.record({
      action: "tamper_detected",
      outcome: "success",
      actor: { nodeId: identity.nodeId, username: identity.nodeName },
      resource: { type: "managed_file", id: path },
      sourceIp: peerAddress(call),
      details: {
        processes,
        ...(policyType ? { policy_type: policyType } : {}),
        ...(detectedAt && !Number.isNaN(detectedAt.getTime())
          ? { detected_at: detectedAt.toISOString() }
          : {}),
      },
    });
    log.info("tamper event: a managed file was changed on the node and restored", {
      node: identity.nodeName,
      path,
      policy_type: policyType || undefined,
      processes: processes.map((p) => `${p.comm}[${p.pid}]`).join(",") || undefined,
    });
  }

  async function renewCertificate(
    csrPem: string,
    call: UnaryCallContext,
    identity: NodeIdentity,
  ): Promise<string> {
    checkText("csr_pem", csrPem, { max: 16_384, required: true, multiline: true });
    let signed;
    try {
      signed = await ctx.ca.signCsr(csrPem, { commonName: identity.nodeName });
    } catch (err) {
      if (err instanceof PkiError) throw invalid("csr_pem", err.message);
      throw err;
    }
    // The new certificate and its audit row commit together (one unit of work) or not at all.
    await db.unitOfWork(async () => {
      await db.transaction(async (tx) => {
        const [node] = await tx.query("SELECT 1 FROM nodes WHERE id = $1 FOR UPDATE", [identity.nodeId]);
        if (!node) throw new GrpcError(grpc.status.UNAUTHENTICATED, "this node was deleted; enroll again");
        await tx.query(
          "INSERT INTO node_certificates (serial, node_id, not_before, not_after) VALUES ($1, $2, $3, $4)",
          [signed.serial, identity.nodeId, signed.notBefore, signed.notAfter],
        );
        // The previous certificate stays valid until revoked: an agent that dies between writing its new key
        // and its new certificate must still be able to connect with the old pair.
        await tx.query(
          "UPDATE nodes SET cert_serial = $2, cert_not_after = $3, updated_at = now() WHERE id = $1",
          [identity.nodeId, signed.serial, signed.notAfter],
        );
      });
      await ctx.audit.record({
        action: "node.renew_certificate",
        outcome: "success",
        actor: { nodeId: identity.nodeId, username: identity.nodeName },
        resource: { type: "node", id: identity.nodeId, name: identity.nodeName },
        sourceIp: peerAddress(call),
        details: {
          previous_serial: identity.serial,
          serial: signed.serial,
          not_after: signed.notAfter.toISOString(),
        },
      });
    });
    return signed.certPem;
  }

  return guardAll(verifier, {
    async subscribePolicyUpdates(request, call, identity) {
      const lastKnownRevision = Number(request.lastKnownRevision);
      if (lastKnownRevision < 0 || !Number.isSafeInteger(lastKnownRevision)) {
        throw invalid("last_known_revision", "must be 0 or a revision received from this server");
      }
      const fields = { node: identity.nodeName, replica: ctx.replicaId, revision: lastKnownRevision };
      log.info("agent connected", fields);
      try {
        await hub.serveStream(call, { ...identity, lastKnownRevision });
        log.info("agent disconnected", fields);
      } catch (err) {
        log.info("agent disconnected", {
          ...fields,
          reason: err instanceof Error ? err.message : String(err),
        });
        throw err;
      }
    },
    async reportCompliance(request, _call, identity) {
      await reportCompliance(request, identity);
      return {};
    },
    async renewCertificate(request, call, identity) {
      return { signedCertPem: await renewCertificate(request.csrPem, call, identity) };
    },
    async heartbeat(request, call, identity) {
      await heartbeat(request, call, identity);
      return {};
    },
    async reportTamperEvent(request, call, identity) {
      await reportTamperEvent(request, call, identity);
      return {};
    },
    async reportSchemaCatalogue(request, _call, identity) {
      await storeSchemaCatalogue(db, identity.nodeId, request);
      return {};
    },
    async reportPolkitCatalogue(request, _call, identity) {
      await storePolkitCatalogue(db, identity.nodeId, request);
      return {};
    },
    reportDiskEncryptionState: (request, _call, identity) => diskEncryption.reportState(request, identity),
    getDiskEncryptionTasks: (_request, _call, identity) => diskEncryption.getTasks(identity),
    escrowRecoveryKey: (request, _call, identity) => diskEncryption.escrow(request, identity),
    confirmRecoveryKey: (request, _call, identity) => diskEncryption.confirm(request, identity),
    beginRecoveryKeyRotation: (request, _call, identity) => diskEncryption.beginRotation(request, identity),
    async getAgentConfig() {
      return { config: { notifications: await loadNotificationSettings(db, log) } };
    },
  });
}

/**
 * Wraps every handler so that it runs only after {@link authenticateCall} succeeded. Wrapping the whole set
 * at once means a method added later cannot forget the check.
 */
function guardAll(verifier: CertificateVerifier, guarded: GuardedHandlers): Handlers {
  const out: Record<string, unknown> = {};
  for (const [name, handler] of Object.entries(guarded)) {
    const inner = handler as (
      request: { clientId: string },
      call: UnaryCallContext,
      id: NodeIdentity,
    ) => unknown;
    out[name] = async (request: { clientId: string }, call: UnaryCallContext) =>
      await inner(request, call, await authenticateCall(call, request.clientId, verifier));
  }
  return out as Handlers;
}
