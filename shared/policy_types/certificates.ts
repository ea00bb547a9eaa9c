/**
 * Certificates: CA certificates (trust anchors) the nodes trust, in the system store and the browsers. Trust
 * adds up, so every certificate of every policy is installed (merge rule `union`); see certificates.proto.
 *
 * Each entry's name becomes a file name on the node, so it is a plain name; each PEM is read by the shared
 * X.509 reader (`shared/x509.ts`) and must hold exactly one certificate that is a CA (basicConstraints cA, and
 * keyCertSign when keyUsage is present), with an RSA key of at least 2048 bits or an EC key on P-256 or P-384,
 * and not expired. The agent checks the same rules except the date (see {@link checkCertificates}): a
 * certificate that expires after it was saved is reported on its own entry, not by refusing the whole policy.
 */
import { type CertificatesPolicy, CertificatesPolicySchema } from "../gen/svc/policy/v1/certificates_pb.ts";
import {
  type CertificateInfo,
  CertificateParseError,
  derBase64,
  parseCertificate,
  pemBlocks,
  pemBodyBytes,
} from "../x509.ts";
import { defineType } from "./define.ts";
import { identifier, type IssueList, multiLineText, required } from "./sanitizers.ts";

/** Longest accepted PEM text of one certificate (large CA certificates are about 2 KiB). */
export const MAX_PEM_LENGTH = 16 * 1024;
const IDENTIFIER = identifier(64);

/** An entry name: also the node's file name `svc-policy-<name>.crt`. */
export function certificateName(value: string): string | undefined {
  return IDENTIFIER(value) ?? (value.includes("..") ? "must not contain '..'" : undefined);
}
/** Curves accepted for EC keys. */
export const ACCEPTED_CURVES: readonly string[] = ["P-256", "P-384"];
/** Smallest accepted RSA modulus. */
export const MIN_RSA_BITS = 2048;

/** The date part of an ISO time, for messages. */
export function isoDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/**
 * Reads the one CA certificate of `pem`, checking everything but the date.
 *
 * @returns the certificate, or the problem and the fix as text.
 */
export function trustAnchor(pem: string): CertificateInfo | string {
  if (pem.length > MAX_PEM_LENGTH) {
    return `must be at most ${MAX_PEM_LENGTH} characters: one PEM certificate is about 2000`;
  }
  const text = multiLineText(pem.replace(/\r\n/g, "\n"));
  if (text) return text;
  const { blocks, strayText } = pemBlocks(pem);
  if (blocks.length === 0) {
    return 'holds no PEM certificate: paste the text from "-----BEGIN CERTIFICATE-----" to "-----END CERTIFICATE-----"';
  }
  const other = blocks.find((b) => b.label !== "CERTIFICATE");
  if (other) {
    return /PRIVATE KEY/.test(other.label)
      ? `holds a private key (${other.label}): never put a private key in a policy; paste only the CA certificate`
      : `holds a ${other.label} block: paste only the CA certificate (BEGIN CERTIFICATE)`;
  }
  if (blocks.length > 1) return `holds ${blocks.length} certificates: give each its own entry`;
  if (strayText) return "has text outside the PEM block: keep only the lines from BEGIN to END CERTIFICATE";
  let info: CertificateInfo;
  try {
    info = parseCertificate(pemBodyBytes(blocks[0].body));
  } catch (err) {
    if (err instanceof CertificateParseError) return `is not a readable X.509 certificate: ${err.message}`;
    throw err;
  }
  if (info.ca !== true) {
    return `is not a CA certificate (${info.subject || "no subject"}: basicConstraints cA is ${
      info.ca === undefined ? "absent" : "false"
    }): distribute the root or intermediate CA that issued it, not the server certificate`;
  }
  if (info.keyCertSign === false) {
    return `cannot sign certificates (${info.subject}: keyUsage lacks keyCertSign): distribute the issuing CA`;
  }
  const key = info.key;
  if (key.kind === "rsa" && key.bits < MIN_RSA_BITS) {
    return `has an RSA key of ${key.bits} bits: trust only CAs with RSA keys of at least ${MIN_RSA_BITS} bits ` +
      `or EC keys on ${ACCEPTED_CURVES.join(" or ")}`;
  }
  if (key.kind === "ec" && !ACCEPTED_CURVES.includes(key.curve)) {
    return `has an EC key on ${key.curve}: accepted curves are ${ACCEPTED_CURVES.join(" and ")}`;
  }
  if (key.kind === "other") {
    return `has a ${key.algorithm} key: accepted are RSA (at least ${MIN_RSA_BITS} bits) and EC ` +
      `(${ACCEPTED_CURVES.join(", ")})`;
  }
  return info;
}

/** Why `info` cannot be trusted at `now` (expired), or undefined. */
export function expiryProblem(info: CertificateInfo, now: Date): string | undefined {
  return info.notAfter.getTime() <= now.getTime()
    ? `expired on ${isoDay(info.notAfter)} (${info.subject}): distribute the CA's renewed certificate`
    : undefined;
}

/**
 * Adds the problems of `message` to `issues`; `now` also refuses expired certificates (the server, at save), and
 * `null` leaves the date out (the agent, which reports an expired certificate on its own entry).
 */
export function checkCertificates(message: CertificatesPolicy, issues: IssueList, now: Date | null): void {
  if (message.certificates.length === 0) {
    issues.add("certificates", "policy content needs at least one setting: add a certificate");
  }
  const names = new Map<string, number>();
  const ders = new Map<string, number>();
  message.certificates.forEach((entry, i) => {
    const at = `certificates[${i}]`;
    if (issues.check(`${at}.name`, entry.name, required, certificateName)) {
      const first = names.get(entry.name);
      if (first !== undefined) issues.add(`${at}.name`, `repeats the name of certificates[${first}]`);
      else names.set(entry.name, i);
    }
    if (!issues.check(`${at}.pem`, entry.pem, required)) return;
    const info = trustAnchor(entry.pem);
    if (typeof info === "string") return issues.add(`${at}.pem`, info);
    const expired = now ? expiryProblem(info, now) : undefined;
    if (expired) issues.add(`${at}.pem`, expired);
    const key = derBase64(info.der);
    const first = ders.get(key);
    if (first !== undefined) issues.add(`${at}.pem`, `is the same certificate as certificates[${first}]`);
    else ders.set(key, i);
  });
}

/** The Certificates policy type. */
export const certificatesType = defineType<CertificatesPolicy>({
  wireName: "Certificates",
  label: "Trusted certificates",
  description: "CA certificates trusted by the system, Firefox and Chromium.",
  schema: CertificatesPolicySchema,
  typedContentCase: "certificatesPolicy",
  merge: "union",
  names: "proto",
  check: (message, issues) => checkCertificates(message, issues, new Date()),
});
