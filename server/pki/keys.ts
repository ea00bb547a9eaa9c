/**
 * Private keys on disk: reading PEM files into WebCrypto keys, writing them
 * back, choosing the signature algorithm for a key and checking that a key
 * belongs to a certificate.
 *
 * @module
 */

import { toPem, x509 } from "../../shared/pki/csr.ts";
import type { PemStruct, X509Certificate } from "@peculiar/x509";

const OID_EC_PUBLIC_KEY = "2a8648ce3d0201";
const OID_RSA_ENCRYPTION = "2a864886f70d010101";
const OID_ED25519 = "2b6570";
const CURVE_BY_OID: Record<string, string> = {
  "2a8648ce3d030107": "P-256",
  "2b81040022": "P-384",
  "2b81040023": "P-521",
};
const HASH_BY_CURVE: Record<string, string> = { "P-256": "SHA-256", "P-384": "SHA-384", "P-521": "SHA-512" };

const TAG_INTEGER = 0x02;
const TAG_OCTET_STRING = 0x04;
const TAG_NULL = 0x05;
const TAG_OID = 0x06;
const TAG_SEQUENCE = 0x30;
const TAG_EC_PARAMETERS = 0xa0;

const CONVERT_HINT = "convert it with `openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pkcs8`";

/** Algorithm parameters accepted by `crypto.subtle.sign` for a given key. */
export type SigningAlgorithm = Algorithm | EcdsaParams;

/**
 * Imports the private key of a PEM text for signing.
 *
 * Accepts PKCS#8 (`PRIVATE KEY`) with an ECDSA P-256/P-384/P-521, RSA or
 * Ed25519 key, and the older `EC PRIVATE KEY` (SEC1) and `RSA PRIVATE KEY`
 * (PKCS#1) blocks that `openssl` writes by default, which are rewrapped as
 * PKCS#8 because WebCrypto reads only that. The key is not extractable.
 *
 * @param pem the file content
 * @param options.source names the file in error messages, e.g. `ca.key_file /etc/svc/ca.key`
 * @throws {Error} naming the source and the fix when the key cannot be used
 */
export async function importPrivateKeyPem(pem: string, options: { source: string }): Promise<CryptoKey> {
  const { source } = options;
  let blocks: PemStruct[];
  try {
    blocks = x509.PemConverter.decodeWithHeaders(pem);
  } catch (err) {
    throw new Error(`${source} is not valid PEM: ${(err as Error).message}`);
  }
  const block = blocks.find((b) => b.type.endsWith("PRIVATE KEY"));
  if (!block) throw new Error(`${source} holds no PEM private key block`);
  const encrypted = block.type === "ENCRYPTED PRIVATE KEY" ||
    block.headers.some((h) => h.key === "Proc-Type" && h.value.includes("ENCRYPTED"));
  if (encrypted) {
    throw new Error(
      `${source} is encrypted with a passphrase; store it unencrypted with ` +
        "`openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pkcs8` and protect the file with mode 0600",
    );
  }
  let pkcs8: Uint8Array<ArrayBuffer>;
  try {
    const der = new Uint8Array(block.rawData);
    if (block.type === "PRIVATE KEY") pkcs8 = der;
    else if (block.type === "EC PRIVATE KEY") pkcs8 = sec1ToPkcs8(der);
    else if (block.type === "RSA PRIVATE KEY") pkcs8 = pkcs1ToPkcs8(der);
    else throw new Error(`PEM block "${block.type}" is not a supported key format`);
  } catch (err) {
    throw new Error(`${source}: ${(err as Error).message}; ${CONVERT_HINT}`);
  }
  let algorithm: EcKeyImportParams | RsaHashedImportParams | Algorithm;
  try {
    algorithm = pkcs8Algorithm(pkcs8);
  } catch (err) {
    const reason = (err as Error).message;
    throw new Error(
      `${source}: ${reason}; use an ECDSA P-256/P-384/P-521, RSA or Ed25519 key in PKCS#8 form`,
    );
  }
  try {
    return await crypto.subtle.importKey("pkcs8", pkcs8, algorithm, false, ["sign"]);
  } catch (err) {
    throw new Error(`${source}: private key cannot be read (${(err as Error).message}); ${CONVERT_HINT}`);
  }
}

/** Encodes an extractable private key as a PKCS#8 `PRIVATE KEY` PEM block. */
export async function exportPrivateKeyPem(key: CryptoKey): Promise<string> {
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", key);
  return toPem(pkcs8, "PRIVATE KEY");
}

/**
 * The signature algorithm svc uses with `key`: the hash follows the curve
 * size, so a P-384 CA signs with SHA-384; RSA keys carry their hash already.
 */
export function signingAlgorithm(key: CryptoKey): SigningAlgorithm {
  const { name } = key.algorithm;
  if (name === "ECDSA") {
    const curve = (key.algorithm as EcKeyAlgorithm).namedCurve;
    return { name, hash: HASH_BY_CURVE[curve] ?? "SHA-256" };
  }
  return { name };
}

/**
 * Whether `privateKey` is the key of `cert`: signs a probe and verifies it
 * with the certificate's public key, which works for every key type.
 */
export async function keyMatchesCertificate(privateKey: CryptoKey, cert: X509Certificate): Promise<boolean> {
  const probe = crypto.getRandomValues(new Uint8Array(32));
  const algorithm = signingAlgorithm(privateKey);
  try {
    // Through the x509 provider, so a CA key on a PKCS#11 token (see pkcs11.ts) is checked the same way.
    const signature = await x509.cryptoProvider.get().subtle.sign(algorithm, privateKey, probe);
    const publicKey = await cert.publicKey.export(privateKey.algorithm, ["verify"]);
    return await crypto.subtle.verify(algorithm, publicKey, signature, probe);
  } catch {
    // A key of another type or curve than the certificate's cannot even be
    // imported with the same parameters: that is a mismatch, not a failure.
    return false;
  }
}

/** Reads the key algorithm of a PKCS#8 PrivateKeyInfo into WebCrypto import parameters. */
function pkcs8Algorithm(der: Uint8Array): EcKeyImportParams | RsaHashedImportParams | Algorithm {
  const info = readTlv(der, 0, TAG_SEQUENCE, "PKCS#8 key");
  const version = readTlv(der, info.start, TAG_INTEGER, "PKCS#8 version");
  const algId = readTlv(der, version.end, TAG_SEQUENCE, "PKCS#8 algorithm");
  const oid = readTlv(der, algId.start, TAG_OID, "PKCS#8 algorithm");
  const oidHex = hex(der.subarray(oid.start, oid.end));
  if (oidHex === OID_RSA_ENCRYPTION) return { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" };
  if (oidHex === OID_ED25519) return { name: "Ed25519" };
  if (oidHex !== OID_EC_PUBLIC_KEY) throw new Error("key algorithm is not supported");
  const curve = oid.end < algId.end ? readTlv(der, oid.end, TAG_OID, "EC curve") : undefined;
  const namedCurve = curve && CURVE_BY_OID[hex(der.subarray(curve.start, curve.end))];
  if (!namedCurve) throw new Error("EC key is not on curve P-256, P-384 or P-521");
  return { name: "ECDSA", namedCurve };
}

/** Wraps a SEC1 ECPrivateKey into PKCS#8, taking the curve from its parameters field. */
function sec1ToPkcs8(der: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  const key = readTlv(der, 0, TAG_SEQUENCE, "EC private key");
  let pos = readTlv(der, key.start, TAG_INTEGER, "EC private key version").end;
  pos = readTlv(der, pos, TAG_OCTET_STRING, "EC private key").end;
  if (pos >= key.end || der[pos] !== TAG_EC_PARAMETERS) {
    throw new Error("EC private key does not name its curve");
  }
  const params = readTlv(der, pos, TAG_EC_PARAMETERS, "EC parameters");
  if (der[params.start] !== TAG_OID) {
    throw new Error("EC private key spells out its curve parameters instead of naming the curve");
  }
  const curve = readTlv(der, params.start, TAG_OID, "EC curve");
  const curveOid = der.subarray(params.start, curve.end);
  return encodeTlv(TAG_SEQUENCE, [
    encodeTlv(TAG_INTEGER, [new Uint8Array([0])]),
    encodeTlv(TAG_SEQUENCE, [encodeTlv(TAG_OID, [unhex(OID_EC_PUBLIC_KEY)]), curveOid]),
    encodeTlv(TAG_OCTET_STRING, [der.subarray(0, key.end)]),
  ]);
}

/** Wraps a PKCS#1 RSAPrivateKey into PKCS#8. */
function pkcs1ToPkcs8(der: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  const key = readTlv(der, 0, TAG_SEQUENCE, "RSA private key");
  return encodeTlv(TAG_SEQUENCE, [
    encodeTlv(TAG_INTEGER, [new Uint8Array([0])]),
    encodeTlv(TAG_SEQUENCE, [encodeTlv(TAG_OID, [unhex(OID_RSA_ENCRYPTION)]), encodeTlv(TAG_NULL, [])]),
    encodeTlv(TAG_OCTET_STRING, [der.subarray(0, key.end)]),
  ]);
}

interface Tlv {
  /** First content byte. */
  start: number;
  /** One past the last content byte. */
  end: number;
}

/** Reads one DER element at `pos`, which must carry `tag`. */
function readTlv(der: Uint8Array, pos: number, tag: number, what: string): Tlv {
  const malformed = () => new Error(`${what} is malformed DER`);
  if (der[pos] !== tag) throw malformed();
  let length = der[pos + 1];
  let start = pos + 2;
  if (length === undefined) throw malformed();
  if (length & 0x80) {
    const count = length & 0x7f;
    if (count < 1 || count > 4) throw malformed();
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + (der[start + i] ?? NaN);
    start += count;
  }
  const end = start + length;
  if (!Number.isFinite(end) || end > der.length) throw malformed();
  return { start, end };
}

/** Encodes one DER element from already encoded content parts. */
function encodeTlv(tag: number, parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const length = parts.reduce((sum, p) => sum + p.length, 0);
  const lengthBytes: number[] = [];
  if (length < 0x80) {
    lengthBytes.push(length);
  } else {
    for (let n = length; n > 0; n = Math.floor(n / 256)) lengthBytes.unshift(n % 256);
    lengthBytes.unshift(0x80 | lengthBytes.length);
  }
  const out = new Uint8Array(1 + lengthBytes.length + length);
  out[0] = tag;
  out.set(lengthBytes, 1);
  let pos = 1 + lengthBytes.length;
  for (const part of parts) {
    out.set(part, pos);
    pos += part.length;
  }
  return out;
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function unhex(text: string): Uint8Array<ArrayBuffer> {
  return new Uint8Array(text.match(/../g)!.map((h) => parseInt(h, 16)));
}
