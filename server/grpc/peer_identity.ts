/**
 * Who is calling: the node behind a verified client certificate. Used by both ports on every call that
 * carries a client certificate.
 *
 * TLS has already checked that the certificate chains to the internal CA and has not expired. This module
 * adds what TLS cannot know: the serial was issued to a node that still exists under the certificate's
 * Common Name, and it is not revoked. Revocation is enforced by the server on every call (no CRL).
 *
 * Answers are not cached. A cache dropped by the `disconnect` notification that revocation sends still
 * leaves a window: NOTIFY arrives after the commit, and a call made right after the revoking request
 * returned was measured to slip through. One indexed lookup per call is cheap next to the work every call
 * does anyway, and revocation then holds from the moment it commits.
 */
import * as grpc from "@grpc/grpc-js";
import type { PeerCertificate } from "node:tls";
import type { Queryable } from "../db/db.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import { formatSerial } from "../../shared/pki/csr.ts";

/** The parts of a verified client certificate that identify a node. */
export interface VerifiedCertificate {
  /** Serial in the `formatSerial` format (lowercase hex, no leading zeros). */
  serial: string;
  commonName: string;
}

/** A caller whose certificate belongs to an existing node and is not revoked. */
export interface NodeIdentity {
  nodeId: string;
  nodeName: string;
  serial: string;
}

/** Checks certificates against the node and revocation tables. */
export interface CertificateVerifier {
  /** Resolves the node; throws UNAUTHENTICATED naming the reason otherwise. */
  verify(cert: VerifiedCertificate): Promise<NodeIdentity>;
}

/** Creates a verifier over the database. */
export function createCertificateVerifier(q: Queryable): CertificateVerifier {
  async function verify(cert: VerifiedCertificate): Promise<NodeIdentity> {
    const [row] = await q.query<{ node_id: string | null; name: string | null; revoked: boolean }>(
      `SELECT c.node_id, n.name, EXISTS (SELECT 1 FROM revoked_certificates r WHERE r.serial = c.serial) AS revoked
       FROM node_certificates c LEFT JOIN nodes n ON n.id = c.node_id WHERE c.serial = $1`,
      [cert.serial],
    );
    const refuse = (why: string) => new GrpcError(grpc.status.UNAUTHENTICATED, why);
    if (!row) {
      // A revocation outlives its node_certificates row, so check it explicitly for the clearer message.
      const [revoked] = await q.query("SELECT 1 FROM revoked_certificates WHERE serial = $1", [cert.serial]);
      if (revoked) throw refuse(`client certificate ${cert.serial} is revoked; enroll the node again`);
      throw refuse(`client certificate ${cert.serial} was not issued to any node; enroll the node again`);
    }
    if (row.revoked) throw refuse(`client certificate ${cert.serial} is revoked; enroll the node again`);
    if (row.node_id === null || row.name === null) {
      throw refuse(`the node of client certificate ${cert.serial} was deleted; enroll the node again`);
    }
    if (row.name !== cert.commonName) {
      throw refuse(`client certificate ${cert.serial} does not belong to node "${cert.commonName}"`);
    }
    return { nodeId: row.node_id, nodeName: row.name, serial: cert.serial };
  }
  return { verify };
}

/**
 * The serial and Common Name of a peer certificate as Node's TLS reports it, or undefined when the peer sent
 * none. Callers must only pass certificates TLS has verified.
 */
export function certificateFromPeer(
  peer: PeerCertificate | undefined | null,
): VerifiedCertificate | undefined {
  if (!peer || !peer.serialNumber) return undefined;
  const cn = peer.subject?.CN;
  const commonName = Array.isArray(cn) ? cn[0] ?? "" : cn ?? "";
  return { serial: formatSerial(peer.serialNumber), commonName };
}
