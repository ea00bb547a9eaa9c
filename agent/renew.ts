/**
 * Certificate renewal: when the agent certificate expires within 30 days (checked at start and
 * again every day while running), a new key and a CSR with the same Common Name are sent with
 * `RenewCertificate` over the current mutual-TLS connection, the answer is checked, and the key
 * then the certificate are replaced (see `identity.ts` for crash safety).
 *
 * @module
 */

import { X509Certificate } from "node:crypto";
import { createPolicyClient, type Identity } from "./client.ts";
import { checkIssuedCertificate, writeRenewal } from "./identity.ts";
import type { Logger } from "./log.ts";

/** Renew when the certificate expires within this many days (spec, Limits). */
export const RENEWAL_THRESHOLD_DAYS = 30;

const DAY_MS = 86_400_000;

/** Options of {@linkcode renewIfDue}. */
export interface RenewOptions {
  identity: Identity;
  dataDir: string;
  address: string;
  policyPort: number;
  logger: Logger;
  /** Current time; default now. */
  now?: Date;
  thresholdDays?: number;
}

/** Whether a certificate expiring at `notAfter` is due for renewal at `now`. */
export function renewalDue(notAfter: Date, now: Date, thresholdDays = RENEWAL_THRESHOLD_DAYS): boolean {
  return notAfter.getTime() - now.getTime() <= thresholdDays * DAY_MS;
}

/**
 * Renews the certificate when it is due; resolves with the new identity, or undefined when no
 * renewal was needed.
 *
 * @throws {Error} when the renewal was due but failed (the old identity stays in place).
 */
export async function renewIfDue(options: RenewOptions): Promise<Identity | undefined> {
  const { identity, logger } = options;
  const now = options.now ?? new Date();
  // The runtime's own parser answers the daily question; the CSR toolkit loads only for a renewal.
  const notAfter = new Date(new X509Certificate(identity.certPem).validTo);
  if (!renewalDue(notAfter, now, options.thresholdDays)) return undefined;
  if (notAfter.getTime() <= now.getTime()) {
    throw new Error(
      `the agent certificate expired on ${notAfter.toISOString()}; it cannot be renewed, enroll again ` +
        "with a new token",
    );
  }
  const { generateKeyAndCsr, parseCertificate } = await import("../shared/pki/csr.ts");
  const current = parseCertificate(identity.certPem);
  logger.info("agent certificate expires soon; renewing", { expires: current.notAfter.toISOString() });
  const keys = await generateKeyAndCsr(current.commonName);
  const client = createPolicyClient(options.address, options.policyPort, identity);
  let signedCertPem: string;
  try {
    ({ signedCertPem } = await client.renewCertificate(
      { clientId: current.commonName, csrPem: keys.csrPem },
      { deadline: Date.now() + 30_000 },
    ));
  } finally {
    client.close();
  }
  await checkIssuedCertificate({
    certPem: signedCertPem,
    caPem: identity.caPem,
    keyPem: keys.keyPem,
    commonName: current.commonName,
  });
  await writeRenewal(options.dataDir, keys.keyPem, signedCertPem);
  const renewed = parseCertificate(signedCertPem);
  logger.info("agent certificate renewed", {
    serial: renewed.serial,
    expires: renewed.notAfter.toISOString(),
  });
  return { keyPem: keys.keyPem, certPem: signedCertPem, caPem: identity.caPem };
}
