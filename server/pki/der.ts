/**
 * The few DER pieces certificate issuance needs, encoded and walked by hand: building a client certificate
 * from prepared bytes costs microseconds, where a general ASN.1 library spends milliseconds per certificate
 * in schema-driven serialization and re-parsing.
 *
 * @module
 */

/** DER tags used by certificates. */
export const TAG = {
  boolean: 0x01,
  integer: 0x02,
  bitString: 0x03,
  octetString: 0x04,
  null: 0x05,
  oid: 0x06,
  utf8String: 0x0c,
  sequence: 0x30,
  set: 0x31,
  utcTime: 0x17,
  generalizedTime: 0x18,
  /** `[0]` constructed (version, extensions' wrapper is `[3]`). */
  context0: 0xa0,
  context3: 0xa3,
  /** `[0]` primitive (keyIdentifier of AuthorityKeyIdentifier). */
  implicit0: 0x80,
} as const;

/** One tag-length-value with its contents concatenated from `parts`. */
export function tlv(tag: number, ...parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const length = parts.reduce((n, p) => n + p.length, 0);
  const header = lengthHeader(tag, length);
  const out = new Uint8Array(header.length + length);
  out.set(header);
  let at = header.length;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function lengthHeader(tag: number, length: number): number[] {
  if (length < 0x80) return [tag, length];
  const bytes: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return [tag, 0x80 | bytes.length, ...bytes];
}

/** A SEQUENCE of `parts`. */
export function sequence(...parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  return tlv(TAG.sequence, ...parts);
}

/** A non-negative INTEGER from its big-endian magnitude (leading zeros dropped, a sign byte added). */
export function unsignedInteger(magnitude: Uint8Array): Uint8Array<ArrayBuffer> {
  let start = 0;
  while (start < magnitude.length - 1 && magnitude[start] === 0) start++;
  const trimmed = magnitude.subarray(start);
  return trimmed[0] & 0x80 ? tlv(TAG.integer, Uint8Array.of(0), trimmed) : tlv(TAG.integer, trimmed);
}

/** An OBJECT IDENTIFIER from dotted text. */
export function oid(dotted: string): Uint8Array<ArrayBuffer> {
  const arcs = dotted.split(".").map(Number);
  const body: number[] = [];
  for (const arc of [arcs[0] * 40 + arcs[1], ...arcs.slice(2)]) {
    const base128: number[] = [arc & 0x7f];
    for (let n = Math.floor(arc / 128); n > 0; n = Math.floor(n / 128)) base128.unshift(0x80 | (n & 0x7f));
    body.push(...base128);
  }
  return tlv(TAG.oid, Uint8Array.from(body));
}

/** A UTF8String. */
export function utf8String(text: string): Uint8Array<ArrayBuffer> {
  return tlv(TAG.utf8String, new TextEncoder().encode(text));
}

/** A BIT STRING of whole bytes. */
export function bitString(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  return tlv(TAG.bitString, Uint8Array.of(0), bytes);
}

/** An OCTET STRING. */
export function octetString(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  return tlv(TAG.octetString, bytes);
}

/**
 * A certificate validity time (RFC 5280 4.1.2.5): UTCTime through 2049, GeneralizedTime from 2050, whole
 * seconds in UTC.
 */
export function certificateTime(date: Date): Uint8Array<ArrayBuffer> {
  const iso = date.toISOString(); // YYYY-MM-DDTHH:MM:SS.sssZ
  const digits = iso.slice(0, 19).replace(/[-T:]/g, "") + "Z";
  const year = date.getUTCFullYear();
  return year < 2050
    ? tlv(TAG.utcTime, new TextEncoder().encode(digits.slice(2)))
    : tlv(TAG.generalizedTime, new TextEncoder().encode(digits));
}

/** One element found by {@linkcode readElement}: its tag, and where its header and contents lie. */
export interface DerElement {
  tag: number;
  /** Offset of the tag byte. */
  start: number;
  /** Offset of the contents. */
  contentStart: number;
  /** Offset just past the contents. */
  end: number;
}

/**
 * The element starting at `offset` of `der`.
 *
 * @throws {Error} when the bytes are not DER there
 */
export function readElement(der: Uint8Array, offset: number): DerElement {
  if (offset + 2 > der.length) throw new Error("DER ends inside an element header");
  const tag = der[offset];
  let length = der[offset + 1];
  let contentStart = offset + 2;
  if (length & 0x80) {
    const count = length & 0x7f;
    if (count === 0 || count > 4 || contentStart + count > der.length) throw new Error("bad DER length");
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + der[contentStart + i];
    contentStart += count;
  }
  const end = contentStart + length;
  if (end > der.length) throw new Error("DER element runs past its container");
  return { tag, start: offset, contentStart, end };
}

/** The elements directly inside the constructed element `outer`. */
export function children(der: Uint8Array, outer: DerElement): DerElement[] {
  const found: DerElement[] = [];
  for (let at = outer.contentStart; at < outer.end;) {
    const element = readElement(der, at);
    found.push(element);
    at = element.end;
  }
  return found;
}

/**
 * Converts a WebCrypto ECDSA signature (r‖s, each `size` bytes) to the DER `Ecdsa-Sig-Value` that X.509
 * carries.
 */
export function ecdsaSignatureToDer(raw: Uint8Array): Uint8Array<ArrayBuffer> {
  const half = raw.length / 2;
  return sequence(unsignedInteger(raw.subarray(0, half)), unsignedInteger(raw.subarray(half)));
}

/**
 * Converts a DER `Ecdsa-Sig-Value` to WebCrypto's r‖s, each `size` bytes.
 *
 * @throws {Error} when the bytes are not two INTEGERs that fit `size`
 */
export function ecdsaSignatureFromDer(der: Uint8Array, size: number): Uint8Array<ArrayBuffer> {
  const outer = readElement(der, 0);
  const parts = children(der, outer);
  if (outer.tag !== TAG.sequence || outer.end !== der.length || parts.length !== 2) {
    throw new Error("ECDSA signature is not a SEQUENCE of two INTEGERs");
  }
  const raw = new Uint8Array(size * 2);
  for (const [i, part] of parts.entries()) {
    if (part.tag !== TAG.integer) throw new Error("ECDSA signature part is not an INTEGER");
    let value = der.subarray(part.contentStart, part.end);
    while (value.length > size && value[0] === 0) value = value.subarray(1);
    if (value.length > size) throw new Error("ECDSA signature part is too long for the curve");
    raw.set(value, (i + 1) * size - value.length);
  }
  return raw;
}
