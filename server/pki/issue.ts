/**
 * The part of certificate issuance that every certificate signed by the
 * internal CA shares: serial, issuer, key identifiers and signature.
 *
 * @module
 */

import { x509 } from "../../shared/pki/csr.ts";
import type { Extension, JsonName, PublicKey, X509Certificate } from "@peculiar/x509";
import { signingAlgorithm } from "./keys.ts";

/** What signing needs from a CA: its certificate and private key. */
export interface CaCredentials {
  readonly cert: X509Certificate;
  readonly privateKey: CryptoKey;
}

/** Subject, key, validity and extensions of a certificate to issue. */
export interface IssueOptions {
  subject: JsonName;
  publicKey: PublicKey | CryptoKey;
  notBefore: Date;
  notAfter: Date;
  /** Extensions besides the key identifiers, which are always added. */
  extensions: Extension[];
}

/** Clock skew tolerated between the server and the machines checking its certificates. */
export const BACKDATE_MS = 60_000;

/** One day in milliseconds. */
export const DAY_MS = 86_400_000;

/**
 * A fresh 128-bit random serial as hex. The library prepends a zero byte when
 * the top bit is set, so the encoded integer is always positive.
 */
export function randomSerialHex(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0"))
    .join("");
}

/**
 * Signs a certificate for `options.publicKey` with the CA, adding a random
 * serial, the CA as issuer, and the subject and authority key identifiers.
 */
export async function issueCertificate(ca: CaCredentials, options: IssueOptions): Promise<X509Certificate> {
  const caKeyId = ca.cert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId;
  // Prefer the CA's own SKI so the link holds even for an operator-provided CA
  // whose identifier was computed another way.
  const authorityKeyId = caKeyId
    ? new x509.AuthorityKeyIdentifierExtension(caKeyId)
    : await x509.AuthorityKeyIdentifierExtension.create(ca.cert.publicKey);
  return await x509.X509CertificateGenerator.create({
    serialNumber: randomSerialHex(),
    subject: options.subject,
    issuer: ca.cert.subjectName,
    notBefore: options.notBefore,
    notAfter: options.notAfter,
    publicKey: options.publicKey,
    signingKey: ca.privateKey,
    signingAlgorithm: signingAlgorithm(ca.privateKey),
    extensions: [
      ...options.extensions,
      await x509.SubjectKeyIdentifierExtension.create(options.publicKey),
      authorityKeyId,
    ],
  });
}
