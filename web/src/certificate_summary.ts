/**
 * What the Certificates editor shows of a certificate and how it reads a loaded file, free of DOM and Lit so it
 * runs (and is tested) anywhere. The reading is the shared X.509 reader's and the rules are the type's own
 * (shared/policy_types/certificates.ts), so the editor says what the server will say.
 */
import { expiryProblem, isoDay, trustAnchor } from "../../shared/policy_types/certificates.ts";
import { type CertificateInfo, certificatePem } from "../../shared/x509.ts";

/** Days before expiry from which a certificate is shown as expiring (the dashboard's threshold too). */
export const EXPIRING_DAYS = 30;

/** What the form shows about one PEM text. */
export interface CertificateSummary {
  subject: string;
  /** SHA-256 of the DER, `AB:CD:…`; undefined until computed. */
  fingerprint?: string;
  notAfter: string;
  /** Whole days until expiry. */
  daysLeft: number;
  expired: boolean;
}

/** The summary of a PEM text, or what is wrong with it (the validation rules' own words). */
export function summarizeCertificate(pem: string, now = new Date()): CertificateSummary | string {
  const info = trustAnchor(pem);
  if (typeof info === "string") return info;
  return summaryOf(info, now);
}

function summaryOf(info: CertificateInfo, now: Date): CertificateSummary {
  return {
    subject: info.subject,
    notAfter: isoDay(info.notAfter),
    daysLeft: Math.floor((info.notAfter.getTime() - now.getTime()) / 86_400_000),
    expired: expiryProblem(info, now) !== undefined,
  };
}

/** Text of a loaded file as PEM: PEM text as it is, DER bytes re-encoded. */
export function fileAsPem(bytes: Uint8Array): string {
  const text = new TextDecoder().decode(bytes);
  return text.includes("-----BEGIN") ? text.trim() + "\n" : certificatePem(bytes);
}

/** A file name without its extension, as a certificate name (letters, digits, '.', '_', '-'). */
export function nameFromFile(fileName: string): string {
  const base = fileName.replace(/\.(pem|crt|cer|der)$/i, "").replace(/[^A-Za-z0-9._-]+/g, "-");
  return base.replace(/^[^A-Za-z0-9]+/, "").replace(/\.\.+/g, ".").slice(0, 64) || "certificate";
}
