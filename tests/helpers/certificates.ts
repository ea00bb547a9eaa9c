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
  /** The key's curve (default P-256). */
  curve?: "P-256" | "P-384";
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

/** A new EC key and a certificate for it, self-signed or signed by `issuer` (`openssl req -x509`). */
export async function opensslCertificate(
  dir: string,
  options: CertificateOptions,
): Promise<CertificateFiles> {
  const keyFile = join(dir, `${options.name}.key`);
  const certFile = join(dir, `${options.name}.crt`);
  const issuer = options.issuer ? ["-CA", options.issuer.certFile, "-CAkey", options.issuer.keyFile] : [];
  await mustRun("openssl", [
    ...[
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      `ec_paramgen_curve:${options.curve ?? "P-256"}`,
      "-nodes",
    ],
    ...["-days", String(options.days ?? 1), "-subj", options.subject],
    ...(options.extensions ?? []).flatMap((line) => ["-addext", line]),
    ...issuer,
    ...["-keyout", keyFile, "-out", certFile],
  ]);
  return {
    certFile,
    keyFile,
    cert: await Deno.readTextFile(certFile),
    key: await Deno.readTextFile(keyFile),
  };
}
