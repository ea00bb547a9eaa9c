/**
 * The agent's enrollment data in `enrollment.data_dir` (mode 0750): `agent.key` (0600),
 * `agent.crt` and `ca.crt`. Writes are atomic, the key always before its certificate.
 *
 * Renewal replaces key and certificate, two files; to survive a crash between the two renames
 * the new pair is first written as `agent.key.new` / `agent.crt.new` and the old key kept as
 * `agent.key.prev`. {@linkcode loadIdentity} finishes or rolls back an interrupted swap, so the
 * agent never starts with a key that does not belong to its certificate.
 *
 * @module
 */

import { createPublicKey, X509Certificate } from "node:crypto";
import { Buffer } from "node:buffer";
import { readFileIfExists, writeFileAtomic } from "./fs.ts";
import type { Identity } from "./client.ts";

/** File names inside the data directory. */
export const KEY_FILE = "agent.key";
export const CERT_FILE = "agent.crt";
export const CA_FILE = "ca.crt";

/** Creates the data directory (mode 0750) if needed and tightens its mode. */
export async function ensureDataDir(dataDir: string): Promise<void> {
  await Deno.mkdir(dataDir, { recursive: true, mode: 0o750 });
  await Deno.chmod(dataDir, 0o750);
}

async function readText(path: string): Promise<string | undefined> {
  const bytes = await readFileIfExists(path);
  return bytes === undefined ? undefined : new TextDecoder().decode(bytes);
}

/** Whether key, certificate and CA certificate all exist. */
export async function isEnrolled(dataDir: string): Promise<boolean> {
  for (const name of [KEY_FILE, CERT_FILE, CA_FILE]) {
    if ((await readFileIfExists(`${dataDir}/${name}`)) === undefined) return false;
  }
  return true;
}

/** Whether `keyPem` is the private key of the certificate `certPem`. */
export function keyMatchesCert(keyPem: string, certPem: string): boolean {
  try {
    const fromKey = createPublicKey(keyPem).export({ type: "spki", format: "der" });
    const fromCert = new X509Certificate(certPem).publicKey.export({ type: "spki", format: "der" });
    return Buffer.compare(fromKey, fromCert) === 0;
  } catch {
    return false;
  }
}

/**
 * Checks a certificate the server issued: it parses, belongs to `keyPem`, is signed by the CA
 * and names `commonName`.
 *
 * @throws {Error} saying what is wrong.
 */
export async function checkIssuedCertificate(
  params: { certPem: string; caPem: string; keyPem: string; commonName: string },
): Promise<void> {
  // Loaded here only: enrollment and renewal are rare, and the toolkit is large for an idle agent.
  const { decodeCertificate } = await import("../shared/pki/csr.ts");
  const cert = decodeCertificate(params.certPem);
  const ca = decodeCertificate(params.caPem);
  if (!keyMatchesCert(params.keyPem, params.certPem)) {
    throw new Error("the server returned a certificate for a different key");
  }
  if (!(await cert.verify({ publicKey: ca.publicKey, signatureOnly: true }))) {
    throw new Error("the server returned a certificate not signed by its CA certificate");
  }
  const cn = cert.subjectName.getField("CN")[0] ?? "";
  if (cn !== params.commonName) {
    throw new Error(`the server returned a certificate for "${cn}", expected "${params.commonName}"`);
  }
}

/**
 * Writes an enrollment that succeeded: key and certificate swapped like a renewal (so a crash never leaves
 * a key that does not belong to the certificate, and a re-enrollment replaces the old pair only now), then
 * the CA certificate.
 */
export async function writeEnrollment(dataDir: string, identity: Identity): Promise<void> {
  await ensureDataDir(dataDir);
  await writeRenewal(dataDir, identity.keyPem, identity.certPem);
  await writeFileAtomic(`${dataDir}/${CA_FILE}`, identity.caPem, { mode: 0o644 });
}

/** Replaces key and certificate after a renewal (see the module documentation). */
export async function writeRenewal(dataDir: string, keyPem: string, certPem: string): Promise<void> {
  const current = await readText(`${dataDir}/${KEY_FILE}`);
  if (current !== undefined) await writeFileAtomic(`${dataDir}/${KEY_FILE}.prev`, current, { mode: 0o600 });
  await writeFileAtomic(`${dataDir}/${KEY_FILE}.new`, keyPem, { mode: 0o600 });
  await writeFileAtomic(`${dataDir}/${CERT_FILE}.new`, certPem, { mode: 0o644 });
  await Deno.rename(`${dataDir}/${KEY_FILE}.new`, `${dataDir}/${KEY_FILE}`);
  await Deno.rename(`${dataDir}/${CERT_FILE}.new`, `${dataDir}/${CERT_FILE}`);
  await Deno.remove(`${dataDir}/${KEY_FILE}.prev`).catch(() => {});
}

/**
 * Reads the identity, repairing an interrupted renewal first.
 *
 * @throws {Error} when the agent is not enrolled or key and certificate do not belong together.
 */
export async function loadIdentity(dataDir: string): Promise<Identity> {
  const read = (name: string) => readText(`${dataDir}/${name}`);
  const newKey = await read(`${KEY_FILE}.new`);
  const newCert = await read(`${CERT_FILE}.new`);
  let keyPem = await read(KEY_FILE);
  const certPem = await read(CERT_FILE);
  if (
    newCert !== undefined && (newKey ?? keyPem) !== undefined && keyMatchesCert((newKey ?? keyPem)!, newCert)
  ) {
    // Crashed after writing the new pair: finish the swap.
    if (newKey !== undefined) await Deno.rename(`${dataDir}/${KEY_FILE}.new`, `${dataDir}/${KEY_FILE}`);
    await Deno.rename(`${dataDir}/${CERT_FILE}.new`, `${dataDir}/${CERT_FILE}`);
    await Deno.remove(`${dataDir}/${KEY_FILE}.prev`).catch(() => {});
    return loadIdentity(dataDir);
  }
  await Deno.remove(`${dataDir}/${KEY_FILE}.new`).catch(() => {});
  await Deno.remove(`${dataDir}/${CERT_FILE}.new`).catch(() => {});
  const caPem = await read(CA_FILE);
  if (keyPem === undefined || certPem === undefined || caPem === undefined) {
    throw new Error(`not enrolled: ${KEY_FILE}, ${CERT_FILE} or ${CA_FILE} is missing in ${dataDir}`);
  }
  if (!keyMatchesCert(keyPem, certPem)) {
    const prev = await read(`${KEY_FILE}.prev`);
    if (prev === undefined || !keyMatchesCert(prev, certPem)) {
      throw new Error(
        `${dataDir}/${KEY_FILE} does not belong to ${CERT_FILE}; enroll again with a new token`,
      );
    }
    await writeFileAtomic(`${dataDir}/${KEY_FILE}`, prev, { mode: 0o600 });
    await Deno.remove(`${dataDir}/${KEY_FILE}.prev`).catch(() => {});
    keyPem = prev;
  }
  return { keyPem, certPem, caPem };
}
