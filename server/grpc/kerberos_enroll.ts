/**
 * `KerberosEnroll`: a machine proves who it is with a SPNEGO token from its keytab (`host/<fqdn>@REALM`),
 * accepted with the server's keytab (`kerberos.keytab`, holding the `HTTP/<hostname>` key) through the
 * system GSSAPI; the node is named after the principal's host and joins `kerberos.default_node_group`.
 * The library's replay cache refuses a token seen before. Every refusal and success is audited.
 *
 * @module
 */
import * as grpc from "@grpc/grpc-js";
import type { ServerContext } from "../context.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import { type Gssapi, GssError, openGssapi } from "../../shared/pki/gssapi.ts";
import { PkiError } from "../pki/errors.ts";
import { validateCommonName } from "../pki/sign_csr.ts";
import { publishLiveHint } from "../events/publish.ts";

/** What `KerberosEnroll` answers. */
export interface KerberosEnrollResult {
  nodeId: string;
  signedCertPem: string;
  caCertPem: string;
  assignedNodeGroup: string;
}

let opened: Gssapi | undefined;

/**
 * The node name for `principal` when it is a machine principal of `realm`: `host/<fqdn>@REALM` → `<fqdn>`.
 *
 * @throws {Error} saying why the principal is refused
 */
export function nodeNameForPrincipal(principal: string, realm: string): string {
  const m = /^host\/([^@/]+)@(.+)$/.exec(principal);
  if (!m) throw new Error(`${principal} is not a machine principal (host/<fqdn>@REALM)`);
  if (m[2] !== realm) throw new Error(`${principal} is from realm ${m[2]}, not ${realm} (kerberos.realm)`);
  return m[1].toLowerCase();
}

/** Handles one `KerberosEnroll` call. */
export async function kerberosEnroll(
  ctx: ServerContext,
  request: { spnegoToken: Uint8Array; csrPem: string; nodeName: string },
  peer: { remoteAddr: string },
): Promise<KerberosEnrollResult> {
  const settings = ctx.config.kerberos;
  if (!settings.enabled) {
    throw new GrpcError(
      grpc.status.FAILED_PRECONDITION,
      "Kerberos enrollment is not configured",
    );
  }
  const refuse = async (reason: string, name?: string): Promise<GrpcError> => {
    await ctx.audit.record({
      action: "node.enroll",
      outcome: "denied",
      actor: {},
      resource: { type: "node", name: name ?? "" },
      details: { reason, method: "kerberos" },
      sourceIp: peer.remoteAddr,
    }).catch((err) => ctx.log.error("enrollment: audit record failed", { error: String(err) }));
    return new GrpcError(grpc.status.UNAUTHENTICATED, reason);
  };
  if (request.spnegoToken.length === 0 || request.spnegoToken.length > 64 * 1024) {
    throw await refuse("spnego_token is empty or larger than 64 KiB");
  }
  let principal: string;
  try {
    opened ??= openGssapi();
    // Read by the library when it looks for the acceptor key.
    Deno.env.set("KRB5_KTNAME", settings.keytab);
    principal = opened.acceptToken(request.spnegoToken);
  } catch (err) {
    if (err instanceof GssError) throw await refuse(`Kerberos token refused: ${err.message}`);
    throw err;
  }
  let nodeName: string;
  try {
    nodeName = nodeNameForPrincipal(principal, settings.realm);
    validateCommonName(nodeName);
  } catch (err) {
    throw await refuse((err as Error).message);
  }
  // The agent sends its client id: the principal's host name, in full or its first label.
  const requested = request.nodeName.toLowerCase();
  if (requested && requested !== nodeName && requested !== nodeName.split(".")[0]) {
    throw await refuse(`${principal} may only enroll as "${nodeName}", not "${request.nodeName}"`, nodeName);
  }
  if (requested) nodeName = requested;
  const [group] = await ctx.db.query<{ id: string; name: string }>(
    "SELECT id, name FROM node_groups WHERE name = $1",
    [settings.defaultNodeGroup],
  );
  if (!group) {
    throw new GrpcError(
      grpc.status.FAILED_PRECONDITION,
      `kerberos.default_node_group "${settings.defaultNodeGroup}" does not exist; create it or fix the setting`,
    );
  }
  let signed;
  try {
    signed = await ctx.ca.signCsr(request.csrPem, { commonName: nodeName });
  } catch (err) {
    if (err instanceof PkiError) throw new GrpcError(grpc.status.INVALID_ARGUMENT, `csr_pem: ${err.message}`);
    throw err;
  }
  try {
    const nodeId = await ctx.db.unitOfWork(async () => {
      const id = await ctx.db.transaction(async (tx) => {
        const [taken] = await tx.query("SELECT 1 FROM nodes WHERE name = $1", [nodeName]);
        if (taken) {
          throw new GrpcError(
            grpc.status.ALREADY_EXISTS,
            `a node named "${nodeName}" already exists and must be deleted before re-enrolling`,
          );
        }
        const [node] = await tx.query<{ id: string }>(
          "INSERT INTO nodes (name, cert_serial, cert_not_after) VALUES ($1, $2, $3) RETURNING id",
          [nodeName, signed.serial, signed.notAfter],
        );
        await tx.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [
          node.id,
          group.id,
        ]);
        await tx.query(
          "INSERT INTO node_certificates (serial, node_id, not_before, not_after) VALUES ($1, $2, $3, $4)",
          [signed.serial, node.id, signed.notBefore, signed.notAfter],
        );
        await publishLiveHint(tx, { topic: "nodes", ids: [node.id] });
        return node.id;
      });
      await ctx.audit.record({
        action: "node.enroll",
        outcome: "success",
        actor: { nodeId: id, username: nodeName },
        resource: { type: "node", id, name: nodeName },
        details: { method: "kerberos", principal, node_group_id: group.id, serial: signed.serial },
        sourceIp: peer.remoteAddr,
      });
      return id;
    });
    return {
      nodeId,
      signedCertPem: signed.certPem,
      caCertPem: ctx.ca.certPem,
      assignedNodeGroup: group.name,
    };
  } catch (err) {
    if ((err as { code?: string }).code === "23505") {
      throw new GrpcError(grpc.status.ALREADY_EXISTS, `a node named "${nodeName}" already exists`);
    }
    throw err;
  }
}
