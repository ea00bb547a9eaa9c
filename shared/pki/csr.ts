/**
 * Key, CSR and certificate helpers shared by the agent, the server and tests.
 *
 * This module is also the one place that loads `@peculiar/x509`: import `x509`
 * from here instead of from `@peculiar/x509`, so the library finds the
 * metadata API it needs and uses the runtime's WebCrypto.
 *
 * @module
 */

import type * as X509 from "@peculiar/x509";

type MetadataTarget = object;
type MetadataStore = WeakMap<MetadataTarget, Map<unknown, Map<unknown, unknown>>>;

/**
 * `@peculiar/x509` 2.x depends on tsyringe, which refuses to load unless
 * `Reflect.getMetadata` exists. tsyringe only stores and reads a few entries,
 * so this small stand-in spares a dependency on `reflect-metadata`. It is not
 * installed when another polyfill is already present, and it offers what
 * `reflect-metadata` needs to build on it when that loads afterwards.
 */
function installReflectMetadata(): void {
  const reflect = Reflect as unknown as Record<string, unknown>;
  if (typeof reflect.getMetadata === "function") return;
  const store: MetadataStore = new WeakMap();
  const own = (key: unknown, target: MetadataTarget, property?: unknown) =>
    store.get(target)?.get(property)?.get(key);
  reflect.defineMetadata = (key: unknown, value: unknown, target: MetadataTarget, property?: unknown) => {
    let byProperty = store.get(target);
    if (!byProperty) store.set(target, byProperty = new Map());
    let byKey = byProperty.get(property);
    if (!byKey) byProperty.set(property, byKey = new Map());
    byKey.set(key, value);
  };
  reflect.getOwnMetadata = own;
  // A full polyfill loaded later (reflect-metadata, pulled in by acme-client's x509 1.x) builds on these.
  reflect.hasOwnMetadata = (key: unknown, target: MetadataTarget, property?: unknown) =>
    store.get(target)?.get(property)?.has(key) ?? false;
  reflect.getOwnMetadataKeys = (target: MetadataTarget, property?: unknown) => [
    ...(store.get(target)?.get(property)?.keys() ?? []),
  ];
  reflect.deleteMetadata = (key: unknown, target: MetadataTarget, property?: unknown) =>
    store.get(target)?.get(property)?.delete(key) ?? false;
  reflect.getMetadata = (key: unknown, target: MetadataTarget, property?: unknown) => {
    for (let t: MetadataTarget | null = target; t; t = Object.getPrototypeOf(t)) {
      const value = own(key, t, property);
      if (value !== undefined) return value;
    }
    return undefined;
  };
}

async function loadX509(): Promise<typeof X509> {
  installReflectMetadata();
  // A dynamic import, because a static one would be evaluated before the
  // polyfill above is installed.
  const lib = await import("@peculiar/x509");
  lib.cryptoProvider.set(crypto);
  return lib;
}

/** The `@peculiar/x509` library, ready to use with the runtime's WebCrypto. */
export const x509: typeof X509 = await loadX509();

/**
 * Encodes DER bytes as one PEM block ending in a newline, as files and tools
 * such as `openssl` expect.
 */
export function toPem(der: BufferSource, label: string): string {
  return `${x509.PemConverter.encode(der, label)}\n`;
}

const P256 = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;

/** A new private key (PKCS#8 PEM) and a certificate request signed with it. */
export interface KeyAndCsr {
  /** ECDSA P-256 private key, PEM block `PRIVATE KEY` (PKCS#8). */
  keyPem: string;
  /** PEM block `CERTIFICATE REQUEST` with subject `CN=<commonName>`. */
  csrPem: string;
}

/**
 * Generates an ECDSA P-256 key and a certificate request for `commonName`.
 * The server replaces the subject anyway; the common name is set so that the
 * request is self-describing when inspected with `openssl req -text`.
 */
export async function generateKeyAndCsr(commonName: string): Promise<KeyAndCsr> {
  const keys = await crypto.subtle.generateKey(P256, true, ["sign", "verify"]);
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: [{ CN: [commonName] }],
    keys,
    signingAlgorithm: P256,
  });
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", keys.privateKey);
  return {
    keyPem: toPem(pkcs8, "PRIVATE KEY"),
    csrPem: toPem(csr.rawData, "CERTIFICATE REQUEST"),
  };
}

/**
 * Formats a certificate serial number the one way svc stores and compares it:
 * lowercase hexadecimal of the unsigned value, without leading zeros.
 *
 * Accepts the raw serial bytes or hex text in any case, with or without colons
 * or leading zeros (as Node's `getPeerCertificate().serialNumber` or
 * `openssl x509 -serial` print it), so serials from every source compare equal.
 */
export function formatSerial(serial: string | Uint8Array): string {
  let hex: string;
  if (typeof serial === "string") {
    hex = serial.trim().replace(/^serial=/i, "").replaceAll(":", "").toLowerCase();
    if (!/^[0-9a-f]+$/.test(hex)) {
      throw new Error(`certificate serial "${serial}" is not hexadecimal`);
    }
  } else {
    hex = Array.from(serial, (b) => b.toString(16).padStart(2, "0")).join("");
    if (hex === "") throw new Error("certificate serial is empty");
  }
  return hex.replace(/^0+(?=.)/, "");
}

/** The fields of a certificate that svc stores and checks. */
export interface CertificateInfo {
  /** Serial number in the {@linkcode formatSerial} format. */
  serial: string;
  /** First Common Name of the subject, or "" when the subject has none. */
  commonName: string;
  notBefore: Date;
  notAfter: Date;
  /** Issuer distinguished name, e.g. `CN=svc Internal CA, O=svc`. */
  issuer: string;
}

/**
 * Reads the first `CERTIFICATE` block of `pem`.
 *
 * @throws {Error} when the text holds no certificate or it cannot be parsed.
 */
export function parseCertificate(pem: string): CertificateInfo {
  const cert = decodeCertificate(pem);
  return {
    serial: formatSerial(cert.serialNumber),
    commonName: cert.subjectName.getField("CN")[0] ?? "",
    notBefore: cert.notBefore,
    notAfter: cert.notAfter,
    issuer: cert.issuer,
  };
}

/**
 * Decodes the first `CERTIFICATE` block of `pem` into an `X509Certificate`.
 *
 * @throws {Error} when the text holds no certificate or it cannot be parsed.
 */
export function decodeCertificate(pem: string): X509.X509Certificate {
  const block = x509.PemConverter.decodeWithHeaders(pem).find((b) => b.type === "CERTIFICATE");
  if (!block) throw new Error("text is not a PEM certificate (no CERTIFICATE block)");
  try {
    return new x509.X509Certificate(block.rawData);
  } catch (err) {
    throw new Error(`PEM certificate cannot be parsed: ${(err as Error).message}`);
  }
}
