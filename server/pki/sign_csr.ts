/**
 * Signing agent certificate requests with the internal CA.
 *
 * @module
 */

import { formatSerial, toPem, x509 } from "../../shared/pki/csr.ts";
import type { PemStruct, Pkcs10CertificateRequest } from "@peculiar/x509";
import { PkiError } from "./errors.ts";
import { BACKDATE_MS, type CaCredentials, DAY_MS, issueCertificate } from "./issue.ts";
import { type ClientCertIssuer, prepareClientCertIssuer } from "./client_cert_issuer.ts";
import { children, ecdsaSignatureFromDer, oid, readElement, sequence, TAG } from "./der.ts";

/** Validity of agent certificates when the caller does not say otherwise. */
export const AGENT_CERT_VALIDITY_DAYS = 90;

const COMMON_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const COMMON_NAME_MAX = 253;

/** Options of {@linkcode signCsr}. */
export interface SignCsrOptions {
  /** The node name; becomes the only subject field, whatever the request asked for. */
  commonName: string;
  /** Defaults to {@linkcode AGENT_CERT_VALIDITY_DAYS}. */
  validityDays?: number;
  /** Issue time; defaults to the current time. */
  now?: Date;
}

/** A certificate issued by {@linkcode signCsr}. */
export interface SignedCertificate {
  /** PEM block `CERTIFICATE`. */
  certPem: string;
  /** Serial in the `formatSerial` format of `shared/pki/csr.ts`. */
  serial: string;
  notBefore: Date;
  notAfter: Date;
}

/**
 * Checks that `name` can be a certificate Common Name (and so a node name):
 * 1 to 253 characters, letters, digits, `.`, `_` and `-`, not starting with
 * punctuation.
 *
 * @throws {PkiError} naming the value and the rule
 */
export function validateCommonName(name: string): void {
  if (name.length < 1 || name.length > COMMON_NAME_MAX || !COMMON_NAME_PATTERN.test(name)) {
    throw new PkiError(
      `common name ${JSON.stringify(name)} is invalid: use 1 to ${COMMON_NAME_MAX} letters, digits, ` +
        "'.', '_' or '-', starting with a letter or digit",
    );
  }
}

/**
 * Issues a client certificate for a certificate request.
 *
 * Only the request's public key is used: the subject becomes exactly
 * `CN=<commonName>`, and the request's other subject fields, extensions and
 * alternative names are dropped, so a node cannot ask for more than its name.
 * The certificate is valid from one minute before `now` (clock skew) for
 * `validityDays`, with key usage digitalSignature and extended key usage
 * clientAuth.
 *
 * @throws {PkiError} when the request or the common name is unacceptable
 */
export async function signCsr(
  ca: CaCredentials,
  csrPem: string,
  options: SignCsrOptions,
): Promise<SignedCertificate> {
  const { commonName, validityDays = AGENT_CERT_VALIDITY_DAYS } = options;
  validateCommonName(commonName);
  if (!Number.isInteger(validityDays) || validityDays < 1) {
    throw new Error(`validityDays must be a positive whole number, got ${validityDays}`);
  }
  const spki = await checkCsr(csrPem);
  return await issueClientCert(ca, spki, options);
}

/**
 * The public key (SubjectPublicKeyInfo, DER) of a certificate request whose key type is the one agents use
 * and whose signature proves possession of the key.
 *
 * @throws {PkiError} naming what is wrong with the request
 */
export async function checkCsr(csrPem: string): Promise<Uint8Array<ArrayBuffer>> {
  const der = decodeCsrPem(csrPem);
  const agentRequest = readP256Request(der);
  if (agentRequest) {
    // The request every agent sends: verified with one WebCrypto call, without the general ASN.1 parser.
    if (!(await p256SignatureIsValid(agentRequest))) {
      throw new PkiError("certificate request signature is invalid");
    }
    return agentRequest.spki;
  }
  // Anything else is parsed in full, so a refusal can name the key type the request used.
  const csr = parseCsr(der);
  checkKeyType(csr);
  if (!(await signatureIsValid(csr))) {
    throw new PkiError("certificate request signature is invalid");
  }
  return new Uint8Array(csr.publicKey.rawData);
}

/** Issuers prepared per CA, so the CA's fixed parts are encoded once, not per certificate. */
const issuers = new WeakMap<CaCredentials, { issuer: ClientCertIssuer | undefined }>();

/**
 * Issues the client certificate of {@linkcode signCsr} for a public key already checked with
 * {@linkcode checkCsr}. `options.commonName` must already be valid.
 */
export async function issueClientCert(
  ca: CaCredentials,
  spki: Uint8Array<ArrayBuffer>,
  options: SignCsrOptions,
): Promise<SignedCertificate> {
  const { commonName, validityDays = AGENT_CERT_VALIDITY_DAYS, now = new Date() } = options;
  const notBefore = new Date(now.getTime() - BACKDATE_MS);
  const notAfter = new Date(now.getTime() + validityDays * DAY_MS);
  let prepared = issuers.get(ca);
  if (!prepared) {
    prepared = { issuer: prepareClientCertIssuer(ca) };
    issuers.set(ca, prepared);
  }
  const fast = prepared.issuer;
  if (fast) {
    const cert = await fast.issue({ commonName, spki, notBefore, notAfter });
    return {
      certPem: toPem(cert.der, "CERTIFICATE"),
      serial: formatSerial(cert.serial),
      notBefore: cert.notBefore,
      notAfter: cert.notAfter,
    };
  }
  // A CA key type without a fast path (e.g. RSA-PSS): the general encoder.
  const cert = await issueCertificate(ca, {
    subject: [{ CN: [commonName] }],
    publicKey: new x509.PublicKey(spki),
    notBefore,
    notAfter,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]),
    ],
  });
  return {
    certPem: toPem(cert.rawData, "CERTIFICATE"),
    serial: formatSerial(cert.serialNumber),
    notBefore: cert.notBefore,
    notAfter: cert.notAfter,
  };
}

function decodeCsrPem(csrPem: string): ArrayBuffer {
  let blocks: PemStruct[];
  try {
    blocks = x509.PemConverter.decodeWithHeaders(csrPem);
  } catch {
    blocks = [];
  }
  if (blocks.length === 0 || blocks[0].type !== "CERTIFICATE REQUEST") {
    throw new PkiError("csr_pem is not a PEM certificate request");
  }
  return blocks[0].rawData;
}

function parseCsr(der: ArrayBuffer): Pkcs10CertificateRequest {
  try {
    return new x509.Pkcs10CertificateRequest(der);
  } catch {
    throw new PkiError("csr_pem is not a PEM certificate request (its content cannot be parsed)");
  }
}

/** DER of the SubjectPublicKeyInfo algorithm of an ECDSA P-256 key (id-ecPublicKey, prime256v1). */
const P256_KEY_ALGORITHM = sequence(oid("1.2.840.10045.2.1"), oid("1.2.840.10045.3.1.7"));
/** ECDSA signature algorithms a P-256 request may be signed with, by their DER AlgorithmIdentifier. */
const ECDSA_HASHES = new Map(
  [["1.2.840.10045.4.3.2", "SHA-256"], ["1.2.840.10045.4.3.3", "SHA-384"], ["1.2.840.10045.4.3.4", "SHA-512"]]
    .map(([id, hash]) => [hex(sequence(oid(id))), hash]),
);

/** The parts of a P-256 certificate request that verifying it needs. */
interface P256Request {
  info: Uint8Array<ArrayBuffer>;
  spki: Uint8Array<ArrayBuffer>;
  hash: string;
  /** The signature's DER `Ecdsa-Sig-Value`. */
  signature: Uint8Array;
}

/**
 * The request's parts when it is a well-formed PKCS#10 request for an ECDSA P-256 key signed with ECDSA;
 * undefined for anything else (left to the full parser and its messages).
 */
function readP256Request(bytes: ArrayBuffer): P256Request | undefined {
  const der = new Uint8Array(bytes);
  try {
    const outer = readElement(der, 0);
    if (outer.tag !== TAG.sequence || outer.end !== der.length) return undefined;
    const [info, algorithm, signature, extra] = children(der, outer);
    if (extra || info?.tag !== TAG.sequence || signature?.tag !== TAG.bitString) return undefined;
    const hash = ECDSA_HASHES.get(hex(der.subarray(algorithm.start, algorithm.end)));
    const fields = children(der, info);
    const spki = fields[2];
    if (!hash || fields[0]?.tag !== TAG.integer || spki?.tag !== TAG.sequence) return undefined;
    const keyAlgorithm = children(der, spki)[0];
    if (hex(der.subarray(keyAlgorithm.start, keyAlgorithm.end)) !== hex(P256_KEY_ALGORITHM)) return undefined;
    if (der[signature.contentStart] !== 0) return undefined; // whole bytes only
    return {
      info: der.subarray(info.start, info.end),
      spki: der.slice(spki.start, spki.end),
      hash,
      signature: der.subarray(signature.contentStart + 1, signature.end),
    };
  } catch {
    return undefined;
  }
}

async function p256SignatureIsValid(request: P256Request): Promise<boolean> {
  try {
    const key = await crypto.subtle.importKey("spki", request.spki, P256_VERIFY, false, ["verify"]);
    const raw = ecdsaSignatureFromDer(request.signature, 32);
    return await crypto.subtle.verify({ name: "ECDSA", hash: request.hash }, key, raw, request.info);
  } catch {
    // A point off the curve or signature bytes that do not decode are as invalid as a wrong signature.
    return false;
  }
}

const P256_VERIFY = { name: "ECDSA", namedCurve: "P-256" } as const;

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Agent certificates carry ECDSA P-256 keys only (spec): the policy port's TLS 1.3 configuration and every
 * agent are built for that one key type, and a single type leaves nothing to negotiate. Stronger curves,
 * Ed25519 and RSA are refused too, with the type the request used and the one required.
 */
function checkKeyType(csr: Pkcs10CertificateRequest): void {
  let algorithm: Partial<EcKeyAlgorithm & RsaHashedKeyAlgorithm> = {};
  try {
    algorithm = csr.publicKey.algorithm;
  } catch {
    // A key algorithm the library does not know (DSA, GOST…) is described as unsupported below.
  }
  if (algorithm.name === "ECDSA" && algorithm.namedCurve === "P-256") return;
  const used = algorithm.name === "ECDSA"
    ? `an ECDSA ${algorithm.namedCurve ?? "(unknown curve)"} key`
    : algorithm.name === "Ed25519" || algorithm.name === "Ed448"
    ? `an ${algorithm.name} key`
    : algorithm.name?.startsWith("RSA")
    ? `an RSA${algorithm.modulusLength ? ` ${algorithm.modulusLength}-bit` : ""} key`
    : "a key type svc does not support";
  throw new PkiError(
    `the certificate request uses ${used}; agent certificates need an ECDSA P-256 key ` +
      "(prime256v1, e.g. openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256)",
  );
}

async function signatureIsValid(csr: Pkcs10CertificateRequest): Promise<boolean> {
  try {
    return await csr.verify();
  } catch {
    // Signature bytes that do not even decode are as invalid as wrong ones.
    return false;
  }
}
