/**
 * Issuing agent client certificates fast: everything that is the same for every certificate of a CA (issuer
 * name, authority key identifier, signature algorithm, fixed extensions) is encoded once per CA, and each
 * certificate is then assembled from bytes and signed with one WebCrypto call (or one token call for a CA
 * key on a PKCS#11 token). Enrollment throughput depends on it: the general path through `@peculiar/x509`
 * spends several milliseconds of processor time per certificate on schema-driven encoding and re-parsing.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { x509 } from "../../shared/pki/csr.ts";
import {
  bitString,
  certificateTime,
  children,
  ecdsaSignatureToDer,
  octetString,
  oid,
  readElement,
  sequence,
  TAG,
  tlv,
  unsignedInteger,
  utf8String,
} from "./der.ts";
import type { CaCredentials } from "./issue.ts";
import { signingAlgorithm } from "./keys.ts";
import { signWithProvider } from "./pkcs11.ts";

/** What varies between two client certificates of one CA. */
export interface ClientCertRequest {
  commonName: string;
  /** The subject's SubjectPublicKeyInfo, DER, as taken from its certificate request. */
  spki: Uint8Array;
  notBefore: Date;
  notAfter: Date;
}

/** A certificate made by {@linkcode ClientCertIssuer.issue}. */
export interface IssuedClientCert {
  der: Uint8Array<ArrayBuffer>;
  /** The serial's unsigned big-endian bytes. */
  serial: Uint8Array;
  /** The validity as encoded (whole seconds). */
  notBefore: Date;
  notAfter: Date;
}

/** Issues client certificates for one CA. */
export interface ClientCertIssuer {
  issue(request: ClientCertRequest): Promise<IssuedClientCert>;
}

const OID_CN = "2.5.4.3";
const ECDSA_SIGNATURE_OIDS: Record<string, string> = {
  "SHA-256": "1.2.840.10045.4.3.2",
  "SHA-384": "1.2.840.10045.4.3.3",
  "SHA-512": "1.2.840.10045.4.3.4",
};
const RSA_PKCS1_SIGNATURE_OIDS: Record<string, string> = {
  "SHA-256": "1.2.840.113549.1.1.11",
  "SHA-384": "1.2.840.113549.1.1.12",
  "SHA-512": "1.2.840.113549.1.1.13",
};
const OID_ED25519 = "1.3.101.112";

/** basicConstraints (critical) CA:FALSE, keyUsage (critical) digitalSignature, extendedKeyUsage clientAuth. */
const CLIENT_EXTENSIONS = [
  extension("2.5.29.19", true, sequence()),
  extension("2.5.29.15", true, tlv(TAG.bitString, Uint8Array.of(7, 0x80))),
  extension("2.5.29.37", false, sequence(oid("1.3.6.1.5.5.7.3.2"))),
];

function extension(id: string, critical: boolean, value: Uint8Array): Uint8Array<ArrayBuffer> {
  const flag = critical ? [tlv(TAG.boolean, Uint8Array.of(0xff))] : [];
  return sequence(oid(id), ...flag, octetString(value));
}

/**
 * How the CA key signs: the AlgorithmIdentifier a certificate names and the conversion of WebCrypto's
 * signature into the certificate's encoding. Undefined for key types this fast path does not know.
 */
function signatureScheme(key: CryptoKey):
  | { algorithmIdentifier: Uint8Array; params: EcdsaParams | Algorithm; encode(raw: Uint8Array): Uint8Array }
  | undefined {
  const params = signingAlgorithm(key);
  const name = key.algorithm.name;
  if (name === "ECDSA") {
    const id = ECDSA_SIGNATURE_OIDS[(params as EcdsaParams).hash as string];
    return id ? { algorithmIdentifier: sequence(oid(id)), params, encode: ecdsaSignatureToDer } : undefined;
  }
  if (name === "RSASSA-PKCS1-v1_5") {
    const id = RSA_PKCS1_SIGNATURE_OIDS[(key.algorithm as RsaHashedKeyAlgorithm).hash.name];
    const nullParams = tlv(TAG.null);
    return id
      ? { algorithmIdentifier: sequence(oid(id), nullParams), params, encode: (raw) => raw }
      : undefined;
  }
  if (name === "Ed25519") {
    return {
      algorithmIdentifier: sequence(oid(OID_ED25519)),
      params,
      encode: (raw) => raw,
    };
  }
  return undefined;
}

/** The raw subject Name of a certificate, exactly as encoded (so issued certificates chain byte for byte). */
function rawSubject(certDer: Uint8Array): Uint8Array {
  const certificate = readElement(certDer, 0);
  const tbs = children(certDer, certificate)[0];
  const fields = children(certDer, tbs);
  const first = fields[0].tag === TAG.context0 ? 1 : 0; // [0] version is optional (v1)
  const subject = fields[first + 4];
  return certDer.subarray(subject.start, subject.end);
}

/** SHA-1 of the subjectPublicKey bits of a SubjectPublicKeyInfo (RFC 5280 4.2.1.2, method 1). */
function keyIdentifier(spki: Uint8Array): Uint8Array {
  const outer = readElement(spki, 0);
  const bits = children(spki, outer)[1];
  if (bits?.tag !== TAG.bitString) throw new Error("SubjectPublicKeyInfo has no public key bit string");
  const key = spki.slice(bits.contentStart + 1, bits.end);
  return new Uint8Array(createHash("sha1").update(key).digest());
}

/**
 * Prepares `ca` for issuing client certificates; undefined when its key type has no fast path (the caller
 * then issues through `@peculiar/x509`).
 */
export function prepareClientCertIssuer(ca: CaCredentials): ClientCertIssuer | undefined {
  const scheme = signatureScheme(ca.privateKey);
  if (!scheme) return undefined;
  const caDer = new Uint8Array(ca.cert.rawData);
  const issuerName = rawSubject(caDer);
  // The CA's own SKI keeps the link even for an operator CA whose identifier was computed another way.
  const caKeyIdHex = ca.cert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId;
  const caKeyId = caKeyIdHex
    ? Uint8Array.from(caKeyIdHex.match(/../g) ?? [], (h) => parseInt(h, 16))
    : keyIdentifier(new Uint8Array(ca.cert.publicKey.rawData));
  const authorityKeyId = extension("2.5.29.35", false, sequence(tlv(TAG.implicit0, caKeyId)));
  const version3 = tlv(TAG.context0, tlv(TAG.integer, Uint8Array.of(2)));

  return {
    async issue(request) {
      const serial = crypto.getRandomValues(new Uint8Array(16));
      const notBefore = wholeSeconds(request.notBefore);
      const notAfter = wholeSeconds(request.notAfter);
      const subjectKeyId = extension("2.5.29.14", false, octetString(keyIdentifier(request.spki)));
      const tbs = sequence(
        version3,
        unsignedInteger(serial),
        scheme.algorithmIdentifier,
        issuerName,
        sequence(certificateTime(notBefore), certificateTime(notAfter)),
        sequence(tlv(TAG.set, sequence(oid(OID_CN), utf8String(request.commonName)))),
        request.spki,
        tlv(TAG.context3, sequence(...CLIENT_EXTENSIONS, subjectKeyId, authorityKeyId)),
      );
      const raw = new Uint8Array(await signWithProvider(scheme.params as EcdsaParams, ca.privateKey, tbs));
      const der = sequence(tbs, scheme.algorithmIdentifier, bitString(scheme.encode(raw)));
      return { der, serial, notBefore, notAfter };
    },
  };
}

function wholeSeconds(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 1000) * 1000);
}
