/**
 * The server's TLS certificate: operator files, or one issued by the internal
 * CA under the data directory and renewed when it no longer fits.
 *
 * @module
 */

import { isIP } from "node:net";
import { join } from "node:path";
import { decodeCertificate, toPem, x509 } from "../../shared/pki/csr.ts";
import type { X509Certificate } from "@peculiar/x509";
import {
  ensurePrivateDir,
  pairIsConfigured,
  PRIVATE_FILE_MODE,
  PUBLIC_FILE_MODE,
  readConfiguredFile,
  writeFileAtomic,
} from "./files.ts";
import { BACKDATE_MS, type CaCredentials, DAY_MS, issueCertificate } from "./issue.ts";
import { exportPrivateKeyPem, importPrivateKeyPem, keyMatchesCertificate } from "./keys.ts";

const SERVER_KEY_ALGORITHM = { name: "ECDSA", namedCurve: "P-256" } as const;
const SERVER_CERT_VALIDITY_DAYS = 365;
/** A certificate closer than this to its expiry is replaced at start. */
const RENEW_BEFORE_DAYS = 30;
const BUILTIN_NAMES = ["localhost", "127.0.0.1", "::1"];
const DNS_NAME_PATTERN = /^(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$/;

/** Options of {@linkcode ensureInternalServerCert}. */
export interface InternalServerCertOptions {
  /** Server data directory; the certificate lives in `{dataDir}/pki/server/`. */
  dataDir: string;
  /** `server.hostnames`: extra DNS names or IP addresses the certificate must cover. */
  hostnames: string[];
  /** Check and issue time; defaults to the current time. */
  now?: Date;
}

/** Options of {@linkcode loadOrCreateServerCert}. */
export interface ServerCertOptions extends InternalServerCertOptions {
  /** `tls.cert_file`: PEM certificate (chain) of the web port. Set together with `keyFile`, or neither. */
  certFile?: string;
  /** `tls.key_file`: PEM private key of `certFile`. */
  keyFile?: string;
}

/** A certificate and key, as PEM, ready for a TLS server. */
export interface ServerCert {
  certPem: string;
  keyPem: string;
  /** True when this call issued a new certificate. */
  generated: boolean;
  /** Why a new certificate was issued, for the log; absent when none was. */
  reason?: string;
}

/**
 * The certificate of the web port: the operator's `tls.cert_file` and
 * `tls.key_file` when both are set (returned as written, so a chain is kept),
 * otherwise the internal one from {@linkcode ensureInternalServerCert}.
 *
 * @throws {Error} when only one file is set or the files do not form a pair
 */
export async function loadOrCreateServerCert(
  ca: CaCredentials,
  options: ServerCertOptions,
): Promise<ServerCert> {
  const configured = { certFile: options.certFile, keyFile: options.keyFile };
  if (!pairIsConfigured(configured, { cert: "tls.cert_file", key: "tls.key_file" })) {
    return await ensureInternalServerCert(ca, options);
  }
  const certFile = options.certFile!;
  const keyFile = options.keyFile!;
  const certPem = await readConfiguredFile(certFile, "tls.cert_file");
  const keyPem = await readConfiguredFile(keyFile, "tls.key_file");
  let cert: X509Certificate;
  try {
    cert = decodeCertificate(certPem);
  } catch (err) {
    throw new Error(`tls.cert_file ${certFile}: ${(err as Error).message}`);
  }
  const key = await importPrivateKeyPem(keyPem, { source: `tls.key_file ${keyFile}` });
  if (!(await keyMatchesCertificate(key, cert))) {
    throw new Error(`tls.key_file ${keyFile} is not the private key of tls.cert_file ${certFile}`);
  }
  return { certPem, keyPem, generated: false };
}

/**
 * The server certificate issued by the internal CA, kept in
 * `{dataDir}/pki/server/server.crt` and `server.key` (0600). It is used by
 * the policy port always, and by the web port when no files are configured.
 *
 * The existing certificate is reused unless it is missing or unreadable, does
 * not match its key, was not signed by `ca`, expires within 30 days, or lacks
 * one of the names: localhost, 127.0.0.1, ::1, the machine's host name and
 * `hostnames`. A new one is ECDSA P-256, valid 365 days, for serverAuth.
 *
 * @throws {Error} when an entry of `hostnames` is neither an IP address nor a
 * DNS name, or the files cannot be written
 */
export async function ensureInternalServerCert(
  ca: CaCredentials,
  options: InternalServerCertOptions,
): Promise<ServerCert> {
  const now = options.now ?? new Date();
  const names = requiredNames(options.hostnames);
  const dir = join(options.dataDir, "pki", "server");
  const certFile = join(dir, "server.crt");
  const keyFile = join(dir, "server.key");

  const existing = await readExisting(certFile, keyFile);
  const reason = existing
    ? await renewalReason(ca, existing, { names, now })
    : `${certFile} or ${keyFile} is missing or unreadable`;
  if (existing && !reason) return { certPem: existing.certPem, keyPem: existing.keyPem, generated: false };

  const keys = await crypto.subtle.generateKey(SERVER_KEY_ALGORITHM, true, ["sign", "verify"]);
  const cert = await issueCertificate(ca, {
    subject: [{ CN: ["svc server"] }],
    publicKey: keys.publicKey,
    notBefore: new Date(now.getTime() - BACKDATE_MS),
    notAfter: new Date(now.getTime() + SERVER_CERT_VALIDITY_DAYS * DAY_MS),
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([
        ...names.dns.map((value) => ({ type: "dns" as const, value })),
        ...names.ips.map((value) => ({ type: "ip" as const, value })),
      ]),
    ],
  });
  const certPem = toPem(cert.rawData, "CERTIFICATE");
  const keyPem = await exportPrivateKeyPem(keys.privateKey);
  await ensurePrivateDir(dir);
  // Key first: a crash between the renames leaves a pair that does not match,
  // which the next start detects and replaces.
  await writeFileAtomic(keyFile, keyPem, { mode: PRIVATE_FILE_MODE });
  await writeFileAtomic(certFile, certPem, { mode: PUBLIC_FILE_MODE });
  return { certPem, keyPem, generated: true, reason };
}

/** The names a server certificate must cover, normalized for comparison. */
interface RequiredNames {
  dns: string[];
  ips: string[];
}

function requiredNames(hostnames: string[]): RequiredNames {
  const dns = new Set<string>();
  const ips = new Set<string>();
  const add = (entry: string, fromConfig: boolean) => {
    const name = entry.trim().replace(/\.$/, "").toLowerCase();
    if (name === "") return;
    if (isIP(name)) ips.add(canonicalIp(name));
    else if (DNS_NAME_PATTERN.test(name) && name.length <= 253) dns.add(name);
    else if (fromConfig) {
      throw new Error(
        `server.hostnames entry ${JSON.stringify(entry)} is neither an IP address nor a DNS name`,
      );
    }
    // An odd machine host name is left out rather than failing the start: the
    // operator can list the proper name in server.hostnames.
  };
  for (const name of BUILTIN_NAMES) add(name, true);
  add(Deno.hostname(), false);
  for (const name of hostnames) add(name, true);
  return { dns: [...dns], ips: [...ips] };
}

/** One spelling per address, so `::1` and `0:0:0:0:0:0:0:1` compare equal. */
function canonicalIp(ip: string): string {
  return isIP(ip) === 6
    ? new URL(`http://[${ip}]/`).hostname.slice(1, -1)
    : new URL(`http://${ip}/`).hostname;
}

interface ExistingPair {
  certPem: string;
  keyPem: string;
  cert: X509Certificate;
  key: CryptoKey;
}

/** The stored pair, or undefined when a file is missing or cannot be read. */
async function readExisting(certFile: string, keyFile: string): Promise<ExistingPair | undefined> {
  try {
    const certPem = await Deno.readTextFile(certFile);
    const keyPem = await Deno.readTextFile(keyFile);
    const cert = decodeCertificate(certPem);
    const key = await importPrivateKeyPem(keyPem, { source: keyFile });
    return { certPem, keyPem, cert, key };
  } catch {
    // Whatever is wrong with our own generated files, the cure is a new pair.
    return undefined;
  }
}

/** Why `pair` must be replaced, or undefined when it is still good. */
async function renewalReason(
  ca: CaCredentials,
  pair: ExistingPair,
  options: { names: RequiredNames; now: Date },
): Promise<string | undefined> {
  const { cert } = pair;
  if (!(await keyMatchesCertificate(pair.key, cert))) return "server key does not match the certificate";
  if (!(await signedBy(cert, ca))) return "server certificate was not issued by the current CA";
  if (cert.notBefore.getTime() > options.now.getTime()) return "server certificate is not valid yet";
  if (cert.notAfter.getTime() - options.now.getTime() < RENEW_BEFORE_DAYS * DAY_MS) {
    return `server certificate expires on ${cert.notAfter.toISOString()}`;
  }
  const present = presentNames(cert);
  const missing = [
    ...options.names.dns.filter((n) => !present.dns.has(n)),
    ...options.names.ips.filter((n) => !present.ips.has(n)),
  ];
  if (missing.length > 0) return `server certificate lacks ${missing.join(", ")}`;
  return undefined;
}

async function signedBy(cert: X509Certificate, ca: CaCredentials): Promise<boolean> {
  if (cert.issuer !== ca.cert.subject) return false;
  try {
    return await cert.verify({ publicKey: ca.cert.publicKey, signatureOnly: true });
  } catch {
    return false;
  }
}

function presentNames(cert: X509Certificate): { dns: Set<string>; ips: Set<string> } {
  const dns = new Set<string>();
  const ips = new Set<string>();
  const san = cert.getExtension(x509.SubjectAlternativeNameExtension);
  for (const name of san?.names.items ?? []) {
    if (name.type === "dns") dns.add(name.value.toLowerCase());
    if (name.type === "ip" && isIP(name.value)) ips.add(canonicalIp(name.value));
  }
  return { dns, ips };
}
