/**
 * A small, strict reader of X.509 certificates (DER inside one PEM block) for the Certificates policy type.
 * It runs unchanged in the server, the agent and the browser (no WebCrypto, no polyfills, no library that
 * would double the console bundle), and reads only what the type's rules need: subject and issuer for display,
 * the validity period, the public key's algorithm and size, and the basicConstraints and keyUsage extensions.
 *
 * Strict means DER: definite, minimal lengths; every element consumed exactly; nothing after the certificate.
 * The reader walks the fixed shape of a certificate (no generic recursion), so nesting cannot exhaust the stack.
 * Anything else is refused with a {@link CertificateParseError} naming what was wrong, so hostile input can
 * only ever produce an error. The signature is not verified: a trust anchor is trusted because the
 * administrator distributes it, not because of its self-signature. tests/shared/x509_test.ts compares every
 * field with node:crypto's X509Certificate (OpenSSL) over certificates made with the openssl command.
 *
 * @module
 */

/** Why a certificate could not be read. */
export class CertificateParseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CertificateParseError";
  }
}

/** The public key of a certificate. */
export type CertificateKey =
  | { kind: "rsa"; bits: number }
  | { kind: "ec"; curve: string }
  | { kind: "other"; algorithm: string };

/** What {@link parseCertificate} reads from a certificate. */
export interface CertificateInfo {
  /** The DER bytes. */
  der: Uint8Array;
  /** Subject as RFC 4514 text, most specific attribute first, e.g. `CN=Example Root,O=Example,C=DE`. */
  subject: string;
  /** Issuer, as {@link CertificateInfo.subject}. */
  issuer: string;
  notBefore: Date;
  notAfter: Date;
  /** Serial number, lowercase hex without leading zero bytes. */
  serial: string;
  key: CertificateKey;
  /** basicConstraints cA; undefined when the extension is absent. */
  ca: boolean | undefined;
  /** keyUsage keyCertSign; undefined when the extension is absent. */
  keyCertSign: boolean | undefined;
}

const SEQUENCE = 0x30;
const SET = 0x31;
const INTEGER = 0x02;
const BIT_STRING = 0x03;
const OCTET_STRING = 0x04;
const OID = 0x06;
const BOOLEAN = 0x01;
const UTC_TIME = 0x17;
const GENERALIZED_TIME = 0x18;

/** One DER element: its tag byte and where its value lies in the buffer. */
interface Tlv {
  tag: number;
  start: number;
  end: number;
}

function hex(byte: number): string {
  return byte.toString(16).padStart(2, "0");
}

/** Reads the element at `pos`, which must end at or before `limit`. */
function readTlv(buf: Uint8Array, pos: number, limit: number): Tlv {
  if (pos + 2 > limit) throw new CertificateParseError("truncated DER: an element header runs past its end");
  const tag = buf[pos];
  if ((tag & 0x1f) === 0x1f) throw new CertificateParseError(`unsupported DER tag 0x${hex(tag)}`);
  let len = buf[pos + 1];
  let at = pos + 2;
  if (len === 0x80) throw new CertificateParseError("indefinite lengths are BER, not DER");
  if (len > 0x80) {
    const count = len & 0x7f;
    if (count > 4) throw new CertificateParseError("DER length too large");
    if (at + count > limit) throw new CertificateParseError("truncated DER: a length runs past its end");
    len = 0;
    for (let i = 0; i < count; i++) len = len * 256 + buf[at + i];
    if (buf[at] === 0 || len < 0x80) throw new CertificateParseError("DER length not minimally encoded");
    at += count;
  }
  if (at + len > limit) throw new CertificateParseError("truncated DER: a value runs past its end");
  return { tag, start: at, end: at + len };
}

/** The elements inside a constructed element. */
function children(buf: Uint8Array, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let pos = parent.start; pos < parent.end;) {
    const tlv = readTlv(buf, pos, parent.end);
    out.push(tlv);
    pos = tlv.end;
  }
  return out;
}

function expect(tlv: Tlv | undefined, tag: number, what: string): Tlv {
  if (!tlv) throw new CertificateParseError(`${what} is missing`);
  if (tlv.tag !== tag) {
    throw new CertificateParseError(`${what}: expected tag 0x${hex(tag)}, found 0x${hex(tlv.tag)}`);
  }
  return tlv;
}

function readOid(buf: Uint8Array, tlv: Tlv): string {
  if (tlv.end === tlv.start) throw new CertificateParseError("empty object identifier");
  const arcs: number[] = [];
  let value = 0;
  let fresh = true;
  for (let i = tlv.start; i < tlv.end; i++) {
    const b = buf[i];
    if (fresh && b === 0x80) throw new CertificateParseError("object identifier arc not minimally encoded");
    value = value * 128 + (b & 0x7f);
    if (value > Number.MAX_SAFE_INTEGER) throw new CertificateParseError("object identifier arc too large");
    fresh = (b & 0x80) === 0;
    if (fresh) {
      if (arcs.length === 0) {
        arcs.push(value < 80 ? Math.floor(value / 40) : 2, value < 80 ? value % 40 : value - 80);
      } else arcs.push(value);
      value = 0;
    }
  }
  if (!fresh) throw new CertificateParseError("object identifier ends inside an arc");
  return arcs.join(".");
}

const ATTRIBUTE_NAMES: Record<string, string> = {
  "2.5.4.3": "CN",
  "2.5.4.6": "C",
  "2.5.4.7": "L",
  "2.5.4.8": "ST",
  "2.5.4.9": "STREET",
  "2.5.4.10": "O",
  "2.5.4.11": "OU",
  "2.5.4.5": "serialNumber",
  "2.5.4.12": "title",
  "2.5.4.97": "organizationIdentifier",
  "0.9.2342.19200300.100.1.25": "DC",
  "0.9.2342.19200300.100.1.1": "UID",
  "1.2.840.113549.1.9.1": "emailAddress",
};

function decodeString(buf: Uint8Array, tlv: Tlv): string {
  const bytes = buf.subarray(tlv.start, tlv.end);
  try {
    switch (tlv.tag) {
      case 0x0c: // UTF8String
        return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
      case 0x12: // NumericString
      case 0x13: // PrintableString
      case 0x16: // IA5String
      case 0x1a: // VisibleString
        if (bytes.some((b) => b > 0x7f)) throw new CertificateParseError("non-ASCII byte in an ASCII string");
        return String.fromCharCode(...bytes);
      case 0x14: // TeletexString, read as Latin-1 like OpenSSL
        return String.fromCharCode(...bytes);
      case 0x1e: // BMPString
        return new TextDecoder("utf-16be", { fatal: true }).decode(bytes);
      case 0x1c: { // UniversalString
        if (bytes.length % 4) throw new CertificateParseError("UniversalString of odd length");
        let out = "";
        for (let i = 0; i < bytes.length; i += 4) {
          out += String.fromCodePoint(
            ((bytes[i] << 24) | (bytes[i + 1] << 16) | (bytes[i + 2] << 8) | bytes[i + 3]) >>> 0,
          );
        }
        return out;
      }
    }
  } catch (err) {
    if (err instanceof CertificateParseError) throw err;
    throw new CertificateParseError("a name attribute is not valid text");
  }
  // Any other type is shown as RFC 4514 shows unknown values: '#' and the hex of the whole element.
  return `#${Array.from(bytes, hex).join("")}`;
}

/**
 * Characters shown as `\u{…}` so a name can never break a line, reorder text or hide in a message or a log:
 * controls, line and paragraph separators, bidirectional controls, zero-width characters.
 */
const UNSAFE_IN_DISPLAY =
  // deno-lint-ignore no-control-regex
  /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]|[\ud800-\udfff]/gu;

/** An attribute value escaped for RFC 4514 text and for display. */
function escapeValue(value: string): string {
  return value
    .replace(/[\\,+"<>;=]/g, (c) => `\\${c}`)
    .replace(/^[ #]|[ ]$/g, (c) => `\\${c}`)
    .replace(UNSAFE_IN_DISPLAY, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);
}

function readName(buf: Uint8Array, tlv: Tlv): string {
  const rdns: string[] = [];
  for (const rdn of children(buf, expect(tlv, SEQUENCE, "name"))) {
    const parts: string[] = [];
    for (const atv of children(buf, expect(rdn, SET, "relative distinguished name"))) {
      const [type, value, ...rest] = children(buf, expect(atv, SEQUENCE, "name attribute"));
      if (rest.length) throw new CertificateParseError("name attribute with extra elements");
      const oid = readOid(buf, expect(type, OID, "name attribute type"));
      if (!value) throw new CertificateParseError("name attribute without a value");
      parts.push(`${ATTRIBUTE_NAMES[oid] ?? oid}=${escapeValue(decodeString(buf, value))}`);
    }
    rdns.push(parts.join("+"));
  }
  return rdns.reverse().join(",");
}

function readTime(buf: Uint8Array, tlv: Tlv | undefined, what: string): Date {
  if (!tlv || (tlv.tag !== UTC_TIME && tlv.tag !== GENERALIZED_TIME)) {
    throw new CertificateParseError(`${what} is not a time`);
  }
  const text = String.fromCharCode(...buf.subarray(tlv.start, tlv.end));
  const m = tlv.tag === UTC_TIME
    ? /^(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/.exec(text)
    : /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/.exec(text);
  if (!m) throw new CertificateParseError(`${what} is not a DER time: ${JSON.stringify(text.slice(0, 20))}`);
  let year = Number(m[1]);
  if (tlv.tag === UTC_TIME) year += year >= 50 ? 1900 : 2000;
  const [month, day, hour, minute, second] = m.slice(2).map(Number);
  const date = new Date(Date.UTC(year, month - 1, day, hour, minute, second));
  if (
    date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day || hour > 23 || minute > 59 || second > 59
  ) {
    throw new CertificateParseError(`${what} is not a valid date: ${text}`);
  }
  return date;
}

function readInteger(buf: Uint8Array, tlv: Tlv, what: string): Uint8Array {
  const bytes = buf.subarray(expect(tlv, INTEGER, what).start, tlv.end);
  if (bytes.length === 0) throw new CertificateParseError(`${what} is empty`);
  if (bytes.length > 1 && ((bytes[0] === 0 && bytes[1] < 0x80) || (bytes[0] === 0xff && bytes[1] >= 0x80))) {
    throw new CertificateParseError(`${what} is not minimally encoded`);
  }
  return bytes;
}

/** The content of a BIT STRING that has no unused bits. */
function bitStringBytes(buf: Uint8Array, tlv: Tlv, what: string): Uint8Array {
  const bytes = buf.subarray(expect(tlv, BIT_STRING, what).start, tlv.end);
  if (bytes.length === 0 || bytes[0] > 7) throw new CertificateParseError(`${what} is malformed`);
  return bytes;
}

const CURVES: Record<string, string> = {
  "1.2.840.10045.3.1.7": "P-256",
  "1.3.132.0.34": "P-384",
  "1.3.132.0.35": "P-521",
};
const KEY_ALGORITHMS: Record<string, string> = {
  "1.3.101.112": "Ed25519",
  "1.3.101.113": "Ed448",
  "1.2.840.10040.4.1": "DSA",
  "1.2.156.10197.1.301": "SM2",
};

function readKey(buf: Uint8Array, spki: Tlv): CertificateKey {
  const [algorithm, key, ...rest] = children(buf, expect(spki, SEQUENCE, "subject public key info"));
  if (rest.length) throw new CertificateParseError("subject public key info with extra elements");
  const [oidTlv, params] = children(buf, expect(algorithm, SEQUENCE, "public key algorithm"));
  const oid = readOid(buf, expect(oidTlv, OID, "public key algorithm"));
  const bits = bitStringBytes(buf, key!, "public key");
  if (oid === "1.2.840.113549.1.1.1" || oid === "1.2.840.113549.1.1.10") {
    if (bits[0] !== 0) throw new CertificateParseError("RSA public key has unused bits");
    const inner = bits.subarray(1);
    const seq = readTlv(inner, 0, inner.length);
    if (seq.end !== inner.length) throw new CertificateParseError("RSA public key has trailing bytes");
    const [modulus, exponent, ...more] = children(inner, expect(seq, SEQUENCE, "RSA public key"));
    if (!exponent || more.length) throw new CertificateParseError("RSA public key is malformed");
    readInteger(inner, exponent, "RSA exponent");
    const n = readInteger(inner, modulus, "RSA modulus");
    let first = 0;
    while (first < n.length && n[first] === 0) first++;
    if (first === n.length) throw new CertificateParseError("RSA modulus is zero");
    return { kind: "rsa", bits: (n.length - first - 1) * 8 + (32 - Math.clz32(n[first])) };
  }
  if (oid === "1.2.840.10045.2.1") {
    if (!params || params.tag !== OID) {
      throw new CertificateParseError(
        "EC key without a named curve (explicit curve parameters are not supported)",
      );
    }
    const curve = readOid(buf, params);
    return { kind: "ec", curve: CURVES[curve] ?? curve };
  }
  return { kind: "other", algorithm: KEY_ALGORITHMS[oid] ?? oid };
}

function readBoolean(buf: Uint8Array, tlv: Tlv, what: string): boolean {
  if (tlv.tag !== BOOLEAN || tlv.end - tlv.start !== 1) {
    throw new CertificateParseError(`${what} is not a BOOLEAN`);
  }
  return buf[tlv.start] !== 0;
}

interface Extensions {
  ca?: boolean;
  keyCertSign?: boolean;
}

function readExtensions(buf: Uint8Array, wrapper: Tlv): Extensions {
  const [list, ...rest] = children(buf, wrapper);
  if (rest.length) throw new CertificateParseError("extensions with extra elements");
  const out: Extensions = {};
  const seen = new Set<string>();
  for (const ext of children(buf, expect(list, SEQUENCE, "extensions"))) {
    const parts = children(buf, expect(ext, SEQUENCE, "extension"));
    const oid = readOid(buf, expect(parts[0], OID, "extension id"));
    if (seen.has(oid)) throw new CertificateParseError(`extension ${oid} appears twice`);
    seen.add(oid);
    let i = 1;
    if (parts[i]?.tag === BOOLEAN) readBoolean(buf, parts[i++], "extension criticality");
    const value = expect(parts[i], OCTET_STRING, `extension ${oid} value`);
    if (parts.length !== i + 1) throw new CertificateParseError(`extension ${oid} with extra elements`);
    const inner = buf.subarray(value.start, value.end);
    if (oid === "2.5.29.19") {
      const seq = readTlv(inner, 0, inner.length);
      if (seq.end !== inner.length) throw new CertificateParseError("basicConstraints has trailing bytes");
      const fields = children(inner, expect(seq, SEQUENCE, "basicConstraints"));
      let at = 0;
      out.ca = false;
      if (fields[at]?.tag === BOOLEAN) out.ca = readBoolean(inner, fields[at++], "basicConstraints cA");
      if (fields[at]?.tag === INTEGER) readInteger(inner, fields[at++], "basicConstraints pathLenConstraint");
      if (at !== fields.length) throw new CertificateParseError("basicConstraints is malformed");
    } else if (oid === "2.5.29.15") {
      const tlv = readTlv(inner, 0, inner.length);
      if (tlv.end !== inner.length) throw new CertificateParseError("keyUsage has trailing bytes");
      const bits = bitStringBytes(inner, tlv, "keyUsage");
      // keyCertSign is bit 5: the first content byte, mask 0x04.
      out.keyCertSign = bits.length > 1 && (bits[1] & 0x04) !== 0;
    }
  }
  return out;
}

/**
 * Reads a DER certificate.
 *
 * @throws {CertificateParseError} naming what is not a well-formed certificate.
 */
export function parseCertificate(der: Uint8Array): CertificateInfo {
  const top = readTlv(der, 0, der.length);
  if (top.end !== der.length) throw new CertificateParseError("bytes after the end of the certificate");
  const [tbs, sigAlg, sigValue, ...extra] = children(der, expect(top, SEQUENCE, "certificate"));
  if (extra.length) throw new CertificateParseError("certificate with extra elements");
  expect(sigAlg, SEQUENCE, "signature algorithm");
  expect(sigValue, BIT_STRING, "signature");
  const fields = children(der, expect(tbs, SEQUENCE, "certificate body"));
  let at = 0;
  if (fields[at]?.tag === 0xa0) {
    const [version, ...more] = children(der, fields[at++]);
    const v = readInteger(der, version, "version");
    if (more.length || v.length !== 1 || v[0] > 2) {
      throw new CertificateParseError("unknown certificate version");
    }
  }
  const serial = readInteger(der, fields[at++], "serial number");
  expect(fields[at++], SEQUENCE, "signature algorithm of the body");
  const issuer = readName(der, fields[at++]);
  const validity = children(der, expect(fields[at++], SEQUENCE, "validity"));
  if (validity.length !== 2) throw new CertificateParseError("validity must hold two times");
  const notBefore = readTime(der, validity[0], "notBefore");
  const notAfter = readTime(der, validity[1], "notAfter");
  const subject = readName(der, fields[at++]);
  const key = readKey(der, fields[at++]);
  if (fields[at]?.tag === 0x81) at++;
  if (fields[at]?.tag === 0x82) at++;
  let extensions: Extensions = {};
  if (fields[at]?.tag === 0xa3) extensions = readExtensions(der, fields[at++]);
  if (at !== fields.length) throw new CertificateParseError("unexpected element in the certificate body");
  let s = 0;
  while (s < serial.length - 1 && serial[s] === 0) s++;
  return {
    der,
    subject,
    issuer,
    notBefore,
    notAfter,
    serial: Array.from(serial.subarray(s), hex).join(""),
    key,
    ca: extensions.ca,
    keyCertSign: extensions.keyCertSign,
  };
}

const BEGIN = "-----BEGIN ";
const END = "-----END ";
const DASHES = "-----";
const LABEL = /^[A-Z0-9 ]{1,64}$/;

/**
 * The PEM blocks of `text`: each block's label and body, and whether anything but whitespace lies outside. One
 * pass with `indexOf` (never a backtracking pattern), so hostile text costs time linear in its length.
 */
export function pemBlocks(text: string): { blocks: { label: string; body: string }[]; strayText: boolean } {
  const blocks: { label: string; body: string }[] = [];
  let strayText = false;
  let pos = 0;
  const outside = (from: number, to: number) => {
    strayText ||= /\S/.test(text.slice(from, to));
  };
  for (;;) {
    const begin = text.indexOf(BEGIN, pos);
    const labelEnd = begin < 0 ? -1 : text.indexOf(DASHES, begin + BEGIN.length);
    const end = labelEnd < 0 ? -1 : text.indexOf(END, labelEnd + DASHES.length);
    const endLabelEnd = end < 0 ? -1 : text.indexOf(DASHES, end + END.length);
    if (endLabelEnd < 0) {
      outside(pos, text.length);
      return { blocks, strayText };
    }
    const label = text.slice(begin + BEGIN.length, labelEnd);
    const endLabel = text.slice(end + END.length, endLabelEnd);
    if (!LABEL.test(label) || !LABEL.test(endLabel)) {
      // Not a PEM boundary: text like any other, and the search goes on after it.
      outside(pos, begin + BEGIN.length);
      pos = begin + BEGIN.length;
      continue;
    }
    outside(pos, begin);
    blocks.push({
      label: label === endLabel ? label : `${label}/${endLabel}`,
      body: text.slice(labelEnd + 5, end),
    });
    pos = endLabelEnd + DASHES.length;
  }
}

/**
 * The DER bytes of a PEM body.
 *
 * @throws {CertificateParseError} when the body is not plain base64 (PEM headers such as `Proc-Type` included).
 */
export function pemBodyBytes(body: string): Uint8Array {
  const compact = body.replace(/[ \t\r\n]+/g, "");
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 !== 0 || compact.length === 0) {
    throw new CertificateParseError("the PEM block is not base64 text");
  }
  const binary = atob(compact);
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

/** Base64 of DER bytes on one line (Chromium's CACertificates policy, comparisons). */
export function derBase64(der: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < der.length; i += 0x8000) binary += String.fromCharCode(...der.subarray(i, i + 0x8000));
  return btoa(binary);
}

/** A certificate as PEM text: 64-character base64 lines between the CERTIFICATE markers. */
export function certificatePem(der: Uint8Array): string {
  const lines = derBase64(der).match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE-----\n${lines.join("\n")}\n-----END CERTIFICATE-----\n`;
}

/** SHA-256 fingerprint of DER bytes as uppercase hex pairs joined by ':' (as OpenSSL prints it). */
export async function sha256Fingerprint(der: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", der as BufferSource));
  return Array.from(digest, (b) => hex(b).toUpperCase()).join(":");
}
