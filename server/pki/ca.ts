/**
 * The internal certificate authority: loaded from operator files, or created
 * under the data directory on first start and loaded from there afterwards.
 *
 * @module
 */

import { join } from "node:path";
import { toPem, x509 } from "../../shared/pki/csr.ts";
import type { X509Certificate } from "@peculiar/x509";
import {
  ensurePrivateDir,
  exists,
  pairIsConfigured,
  PRIVATE_DIR_MODE,
  PRIVATE_FILE_MODE,
  PUBLIC_FILE_MODE,
  readConfiguredFile,
  writeFileAtomic,
} from "./files.ts";
import { BACKDATE_MS, type CaCredentials, randomSerialHex } from "./issue.ts";
import { exportPrivateKeyPem, importPrivateKeyPem, keyMatchesCertificate, signingAlgorithm } from "./keys.ts";
import { signCsr, type SignCsrOptions, type SignedCertificate } from "./sign_csr.ts";
import { isPkcs11Uri, openTokenKey, parsePkcs11Uri } from "./pkcs11.ts";
import { type CaKeyType, DEFAULT_CA_KEY_TYPE } from "../config/ca_key_type.ts";

const CA_VALIDITY_YEARS = 10;
const CA_CERT_FILE = "ca.crt";
const CA_KEY_FILE = "ca.key";

/** The internal CA, ready to sign. */
export interface Ca extends CaCredentials {
  /**
   * The CA certificate as PEM, as served at `/agent/ca.crt` and pinned by agents; for an intermediate CA
   * the whole chain, issuing CA first and the self-signed root last.
   */
  readonly certPem: string;
  /**
   * The certificates a server presents after its own (the chain without the root), empty for a
   * self-signed CA. Appended to the certificates this CA issues for the server.
   */
  readonly chainPem: string;
  readonly cert: X509Certificate;
  /** Not extractable. */
  readonly privateKey: CryptoKey;
  /** True when this call created a new CA (first start). */
  readonly generated: boolean;
  /** {@linkcode signCsr} with this CA. */
  signCsr(csrPem: string, options: SignCsrOptions): Promise<SignedCertificate>;
}

/** Options of {@linkcode loadOrCreateCa}. */
export interface LoadOrCreateCaOptions {
  /** Server data directory; the generated CA lives in `{dataDir}/pki/ca/`. */
  dataDir: string;
  /** `ca.cert_file`: PEM CA certificate. Set together with `keyFile`, or neither. */
  certFile?: string;
  /** `ca.key_file`: PEM private key of the CA (PKCS#8, or SEC1/PKCS#1 as openssl writes them). */
  keyFile?: string;
  /** `ca.key_type`: the curve of a CA created here; a CA that exists keeps its own. */
  keyType?: CaKeyType;
}

/**
 * Loads the CA from `certFile` and `keyFile` when both are set; otherwise
 * loads `{dataDir}/pki/ca/ca.crt` and `ca.key`, creating them on first start:
 * an ECDSA self-signed CA "svc Internal CA" (`keyType`, P-256 by default) valid 10 years, allowed to
 * sign end-entity certificates only (path length 0). The directory is 0700
 * and the key 0600; the pair appears at once (staged in a temporary directory
 * and renamed), so a crash or a second server starting at the same moment
 * never leaves a half-written CA.
 *
 * @throws {Error} when only one of the files is set, when the files cannot be
 * used (naming the file and the fix), or when the data directory holds only
 * half of a CA
 */
export async function loadOrCreateCa(options: LoadOrCreateCaOptions): Promise<Ca> {
  const configured = { certFile: options.certFile, keyFile: options.keyFile };
  if (pairIsConfigured(configured, { cert: "ca.cert_file", key: "ca.key_file" })) {
    const certFile = options.certFile!;
    const keyFile = options.keyFile!;
    if (isPkcs11Uri(keyFile)) return await loadTokenCa(certFile, keyFile);
    return await loadCa({
      certPem: await readConfiguredFile(certFile, "ca.cert_file"),
      keyPem: await readConfiguredFile(keyFile, "ca.key_file"),
      certSource: `ca.cert_file ${certFile}`,
      keySource: `ca.key_file ${keyFile}`,
      generated: false,
    });
  }

  const pkiDir = join(options.dataDir, "pki");
  const caDir = join(pkiDir, "ca");
  let generated = false;
  if (!(await caFilesPresent(caDir))) {
    await ensurePrivateDir(pkiDir);
    generated = await createCaDir(pkiDir, caDir, options.keyType);
  }
  const certFile = join(caDir, CA_CERT_FILE);
  const keyFile = join(caDir, CA_KEY_FILE);
  return await loadCa({
    certPem: await readConfiguredFile(certFile, "CA certificate"),
    keyPem: await readConfiguredFile(keyFile, "CA key"),
    certSource: `CA certificate ${certFile}`,
    keySource: `CA key ${keyFile}`,
    generated,
  });
}

/**
 * Whether both generated CA files exist.
 *
 * @throws {Error} when only one does: the CA may already have signed agent
 * certificates, so silently replacing it would lock every agent out
 */
async function caFilesPresent(caDir: string): Promise<boolean> {
  const certFile = join(caDir, CA_CERT_FILE);
  const keyFile = join(caDir, CA_KEY_FILE);
  const [hasCert, hasKey] = await Promise.all([exists(certFile), exists(keyFile)]);
  if (hasCert !== hasKey) {
    const [present, missing] = hasCert ? [certFile, keyFile] : [keyFile, certFile];
    throw new Error(
      `internal CA is incomplete: ${present} exists but ${missing} is missing; restore ${missing} ` +
        `from a backup, or remove ${caDir} to create a new CA (every enrolled agent must then enroll again)`,
    );
  }
  return hasCert;
}

/**
 * Writes a new CA into a temporary directory next to `caDir` and renames it
 * into place. Returns false when another process created the CA first.
 */
async function createCaDir(pkiDir: string, caDir: string, keyType?: CaKeyType): Promise<boolean> {
  const { certPem, keyPem } = await generateCaPem(keyType);
  const staging = await Deno.makeTempDir({ dir: pkiDir, prefix: ".ca-" });
  try {
    await Deno.chmod(staging, PRIVATE_DIR_MODE);
    await writeFileAtomic(join(staging, CA_KEY_FILE), keyPem, { mode: PRIVATE_FILE_MODE });
    await writeFileAtomic(join(staging, CA_CERT_FILE), certPem, { mode: PUBLIC_FILE_MODE });
    await Deno.rename(staging, caDir);
    return true;
  } catch (err) {
    await Deno.remove(staging, { recursive: true }).catch(() => {});
    if (await caFilesPresent(caDir)) return false;
    throw new Error(`cannot create the internal CA in ${caDir}: ${(err as Error).message}`);
  }
}

/** A new self-signed CA (ECDSA on `keyType`, 10 years, path length 0) as PEM. */
export async function generateCaPem(
  keyType: CaKeyType = DEFAULT_CA_KEY_TYPE,
): Promise<{ certPem: string; keyPem: string }> {
  const algorithm = { name: "ECDSA", namedCurve: keyType };
  const keys = await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"]);
  const now = new Date();
  const notAfter = new Date(now);
  notAfter.setUTCFullYear(notAfter.getUTCFullYear() + CA_VALIDITY_YEARS);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerialHex(),
    name: [{ O: ["svc"] }, { CN: ["svc Internal CA"] }],
    notBefore: new Date(now.getTime() - BACKDATE_MS),
    notAfter,
    keys,
    signingAlgorithm: signingAlgorithm(keys.privateKey),
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: toPem(cert.rawData, "CERTIFICATE"), keyPem: await exportPrivateKeyPem(keys.privateKey) };
}

/** Input of {@linkcode loadCa}: PEM texts and where they came from, for error messages. */
export interface LoadCaInput {
  certPem: string;
  /** The key as PEM, or `privateKey` (a key on a token). */
  keyPem?: string;
  privateKey?: CryptoKey;
  certSource: string;
  keySource: string;
  generated: boolean;
}

/**
 * Checks and loads a CA from PEM: a CA certificate, not expired, whose key is `keyPem`.
 *
 * @throws {Error} naming the source and the fix
 */
export async function loadCa(input: LoadCaInput): Promise<Ca> {
  const { certSource, keySource } = input;
  const chain = await decodeChain(input.certPem, certSource);
  const cert = chain[0];
  const privateKey = input.privateKey ?? await importPrivateKeyPem(input.keyPem ?? "", { source: keySource });
  if (!(await keyMatchesCertificate(privateKey, cert))) {
    throw new Error(`${keySource} is not the private key of ${certSource}`);
  }
  const credentials = { cert, privateKey };
  const pems = chain.map((c) => toPem(c.rawData, "CERTIFICATE"));
  return {
    certPem: pems.join(""),
    chainPem: pems.slice(0, -1).join(""),
    cert,
    privateKey,
    generated: input.generated,
    signCsr: (csrPem, options) => signCsr(credentials, csrPem, options),
  };
}

/**
 * The CA certificates of `pem`: the issuing CA first, then each one's issuer up to a self-signed root.
 * Every one must be a valid CA certificate, and each must be signed by the next.
 *
 * @throws {Error} naming the certificate that is wrong and the fix
 */
async function decodeChain(pem: string, source: string): Promise<X509Certificate[]> {
  let chain: X509Certificate[];
  try {
    const blocks = x509.PemConverter.decodeWithHeaders(pem).filter((b) => b.type === "CERTIFICATE");
    if (blocks.length === 0) throw new Error("text is not a PEM certificate (no CERTIFICATE block)");
    chain = blocks.map((b) => new x509.X509Certificate(b.rawData));
  } catch (err) {
    throw new Error(`${source}: ${(err as Error).message}`);
  }
  for (const [i, cert] of chain.entries()) {
    const which = chain.length === 1
      ? source
      : `${source} (certificate ${i + 1} of ${chain.length}, ${cert.subject})`;
    if (!cert.getExtension(x509.BasicConstraintsExtension)?.ca) {
      throw new Error(`${which} is not a CA certificate (basicConstraints CA:TRUE is missing)`);
    }
    if (cert.notAfter.getTime() <= Date.now()) {
      throw new Error(
        `${which} expired on ${cert.notAfter.toISOString()}; configure a valid CA certificate ` +
          "(agents must enroll again when the CA key changes)",
      );
    }
    const issuer = chain[i + 1];
    if (issuer) {
      const linked = cert.issuer === issuer.subject &&
        await cert.verify({ publicKey: issuer.publicKey, signatureOnly: true }).catch(() => false);
      if (!linked) {
        throw new Error(
          `${which} is not signed by the next certificate (${issuer.subject}); list the issuing CA first, ` +
            "then its issuer, up to the root",
        );
      }
    }
  }
  const root = chain[chain.length - 1];
  const selfSigned = root.issuer === root.subject &&
    await root.verify({ publicKey: root.publicKey, signatureOnly: true }).catch(() => false);
  if (!selfSigned) {
    throw new Error(
      `${source} ends with ${root.subject}, issued by ${root.issuer}, which is missing: append the issuer's ` +
        "certificates up to the self-signed root, so agents can verify the chain",
    );
  }
  return chain;
}

/** The CA of `ca.cert_file` whose key is on the PKCS#11 token that `keyUri` names. */
async function loadTokenCa(certFile: string, keyUri: string): Promise<Ca> {
  const uri = parsePkcs11Uri(keyUri);
  const certPem = await readConfiguredFile(certFile, "ca.cert_file");
  const chain = await decodeChain(certPem, `ca.cert_file ${certFile}`);
  const algorithm = chain[0].publicKey.algorithm as EcKeyAlgorithm;
  if (algorithm.name !== "ECDSA") {
    throw new Error(
      `ca.cert_file ${certFile}: a CA key on a PKCS#11 token must be ECDSA, not ${algorithm.name}`,
    );
  }
  const token = await openTokenKey(uri, algorithm.namedCurve);
  return await loadCa({
    certPem,
    privateKey: token.key,
    certSource: `ca.cert_file ${certFile}`,
    keySource: `PKCS#11 key "${uri.keyLabel}" on token "${uri.tokenLabel}"`,
    generated: false,
  });
}
