/**
 * Throwaway certificates made with openssl, the way an administrator (or an attacker) would make them: a
 * foreign CA the server never saw, a TLS certificate for a test listener, a client certificate that does not
 * chain to svc's CA.
 */
import { join } from "node:path";
import { mustRun } from "./command.ts";

/** What {@link opensslCertificate} makes. */
export interface CertificateOptions {
  /** The file names: `<name>.key` and `<name>.crt` in the directory. */
  name: string;
  /** The subject, e.g. `/CN=127.0.0.1`. */
  subject: string;
  /** Days of validity (default 1). */
  days?: number;
  /** Extension lines (`-addext`), e.g. `subjectAltName=IP:127.0.0.1`. */
  extensions?: readonly string[];
  /** The CA that signs it; without one the certificate signs itself. */
  issuer?: { certFile: string; keyFile: string };
  /** The new key's curve (default P-256). */
  curve?: "P-256" | "P-384";
  /** A key file to certify instead of making a new key (any type openssl reads). */
  key?: string;
}

/** Extensions of a root CA's certificate. */
export const ROOT_CA_EXTENSIONS: readonly string[] = [
  "basicConstraints=critical,CA:TRUE",
  "keyUsage=critical,keyCertSign,cRLSign",
];

/** Extensions of an intermediate CA that signs end-entity certificates only. */
export const INTERMEDIATE_CA_EXTENSIONS: readonly string[] = [
  "basicConstraints=critical,CA:TRUE,pathlen:0",
  "keyUsage=critical,keyCertSign,cRLSign",
];

/** A certificate and its key as files. */
export interface CertificateFiles {
  certFile: string;
  keyFile: string;
  cert: string;
  key: string;
}

/**
 * A certificate for a new EC key (or for `options.key`), self-signed or signed by `issuer`
 * (`openssl req -x509`).
 */
export async function opensslCertificate(
  dir: string,
  options: CertificateOptions,
): Promise<CertificateFiles> {
  const keyFile = options.key ?? join(dir, `${options.name}.key`);
  const certFile = join(dir, `${options.name}.crt`);
  const key = options.key ? ["-new", "-key", keyFile] : [
    "-newkey",
    "ec",
    "-pkeyopt",
    `ec_paramgen_curve:${options.curve ?? "P-256"}`,
    "-nodes",
    "-keyout",
    keyFile,
  ];
  const issuer = options.issuer ? ["-CA", options.issuer.certFile, "-CAkey", options.issuer.keyFile] : [];
  await mustRun("openssl", [
    "req",
    "-x509",
    ...key,
    ...["-days", String(options.days ?? 1), "-subj", options.subject],
    ...(options.extensions ?? []).flatMap((line) => ["-addext", line]),
    ...issuer,
    ...["-out", certFile],
  ]);
  return {
    certFile,
    keyFile,
    cert: await Deno.readTextFile(certFile),
    key: await Deno.readTextFile(keyFile),
  };
}
