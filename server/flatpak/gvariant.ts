/**
 * A small reader of serialized GVariant data (the format of OSTree commits, directory trees and
 * summaries), for the types those use: `y b n q i u x t s ay a(...) a{..} (...)`; a `v` is returned as its
 * raw bytes. Little-endian integers. Bytes come from the network, so every offset is checked and a
 * malformed value throws instead of reading out of bounds.
 *
 * @module
 */

/**
 * A decoded value: numbers/bigints, strings, byte arrays, arrays and tuples (as arrays). Untyped, unlike
 * `GValue` of shared/gvariant.ts (a typed value of the text format that dconf uses).
 */
export type DecodedGVariant = number | bigint | boolean | string | Uint8Array | DecodedGVariant[];

interface TypeInfo {
  sig: string;
  align: number;
  /** Fixed serialized size, or 0 when variable. */
  fixed: number;
  children: TypeInfo[];
}

const BASIC: Record<string, [number, number]> = {
  y: [1, 1],
  b: [1, 1],
  n: [2, 2],
  q: [2, 2],
  i: [4, 4],
  u: [4, 4],
  x: [8, 8],
  t: [8, 8],
  d: [8, 8],
};

function alignUp(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}

function parseType(sig: string, at = 0): [TypeInfo, number] {
  const c = sig[at];
  if (c in BASIC) return [{ sig: c, align: BASIC[c][0], fixed: BASIC[c][1], children: [] }, at + 1];
  if (c === "s" || c === "o" || c === "g") return [{ sig: c, align: 1, fixed: 0, children: [] }, at + 1];
  if (c === "v") return [{ sig: c, align: 8, fixed: 0, children: [] }, at + 1];
  if (c === "a") {
    const [child, next] = parseType(sig, at + 1);
    return [{ sig: sig.slice(at, next), align: child.align, fixed: 0, children: [child] }, next];
  }
  if (c === "(" || c === "{") {
    const close = c === "(" ? ")" : "}";
    const children: TypeInfo[] = [];
    let next = at + 1;
    while (sig[next] !== close) {
      if (next >= sig.length) throw new Error(`unterminated GVariant type ${sig}`);
      const [child, after] = parseType(sig, next);
      children.push(child);
      next = after;
    }
    const align = Math.max(1, ...children.map((ch) => ch.align));
    let fixed = 0;
    if (children.every((ch) => ch.fixed > 0)) {
      for (const ch of children) fixed = alignUp(fixed, ch.align) + ch.fixed;
      fixed = children.length ? alignUp(fixed, align) : 1;
    }
    return [{ sig: sig.slice(at, next + 1), align, fixed, children }, next + 1];
  }
  throw new Error(`unsupported GVariant type "${c}" in ${sig}`);
}

function offsetSize(size: number): number {
  return size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffff ? 4 : 8;
}

function readOffset(bytes: Uint8Array, at: number, width: number): number {
  if (at < 0 || at + width > bytes.length) throw new Error("GVariant framing offset out of range");
  let value = 0;
  for (let i = width - 1; i >= 0; i--) value = value * 256 + bytes[at + i];
  return value;
}

function slice(bytes: Uint8Array, start: number, end: number): Uint8Array {
  if (start < 0 || end < start || end > bytes.length) throw new Error("GVariant member out of range");
  return bytes.subarray(start, end);
}

function decodeWith(type: TypeInfo, bytes: Uint8Array): DecodedGVariant {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (type.sig[0]) {
    case "y":
      return bytes.length === 1 ? bytes[0] : 0;
    case "b":
      return bytes.length === 1 && bytes[0] === 1;
    case "n":
      return bytes.length === 2 ? view.getInt16(0, true) : 0;
    case "q":
      return bytes.length === 2 ? view.getUint16(0, true) : 0;
    case "i":
      return bytes.length === 4 ? view.getInt32(0, true) : 0;
    case "u":
      return bytes.length === 4 ? view.getUint32(0, true) : 0;
    case "x":
      return bytes.length === 8 ? view.getBigInt64(0, true) : 0n;
    case "t":
      return bytes.length === 8 ? view.getBigUint64(0, true) : 0n;
    case "d":
      return bytes.length === 8 ? view.getFloat64(0, true) : 0;
    case "s":
    case "o":
    case "g": {
      const end = bytes.length && bytes[bytes.length - 1] === 0 ? bytes.length - 1 : bytes.length;
      return new TextDecoder().decode(bytes.subarray(0, end));
    }
    case "v":
      return bytes;
    case "a": {
      const child = type.children[0];
      if (child.sig === "y") return bytes;
      if (child.fixed > 0) {
        const out: DecodedGVariant[] = [];
        for (let at = 0; at + child.fixed <= bytes.length; at += child.fixed) {
          out.push(decodeWith(child, bytes.subarray(at, at + child.fixed)));
        }
        return out;
      }
      return Array.from(arraySlices(type, bytes), (element) => decodeWith(child, element));
    }
    default:
      return tupleSlices(type, bytes).map((member, i) => decodeWith(type.children[i], member));
  }
}

/** The serialized members of a tuple or dict entry, undecoded (each offset checked). */
function tupleSlices(type: TypeInfo, bytes: Uint8Array): Uint8Array[] {
  const width = offsetSize(bytes.length);
  const out: Uint8Array[] = [];
  let pos = 0;
  let frame = 0;
  const children = type.children;
  const frames = children.slice(0, -1).filter((ch) => ch.fixed === 0).length;
  children.forEach((child, i) => {
    pos = alignUp(pos, child.align);
    let end: number;
    if (child.fixed > 0) end = pos + child.fixed;
    else if (i === children.length - 1) end = bytes.length - frames * width;
    else end = readOffset(bytes, bytes.length - (++frame) * width, width);
    out.push(slice(bytes, pos, end));
    pos = end;
  });
  return out;
}

/** The serialized elements of an array whose elements vary in size, undecoded, one at a time. */
function* arraySlices(type: TypeInfo, bytes: Uint8Array): Generator<Uint8Array> {
  if (bytes.length === 0) return;
  const child = type.children[0];
  const width = offsetSize(bytes.length);
  const tableStart = readOffset(bytes, bytes.length - width, width);
  if (tableStart > bytes.length || (bytes.length - tableStart) % width !== 0) {
    throw new Error("GVariant array framing is malformed");
  }
  const count = (bytes.length - tableStart) / width;
  let start = 0;
  for (let i = 0; i < count; i++) {
    const end = readOffset(bytes, tableStart + i * width, width);
    start = alignUp(start, child.align);
    yield slice(bytes, start, end);
    start = end;
  }
}

function typeOf(signature: string): TypeInfo {
  const [type, end] = parseType(signature);
  if (end !== signature.length) throw new Error(`trailing characters in GVariant type ${signature}`);
  return type;
}

/**
 * The serialized bytes of one member of a tuple of type `signature`, undecoded, without decoding the others:
 * a commit's root tree is 32 bytes, while the commit around it may carry megabytes of metadata from a
 * stranger. Decode it with {@link decodeGVariant}, or look through it with {@link tupleElements}.
 */
export function tupleMember(signature: string, bytes: Uint8Array, index: number): Uint8Array {
  const type = typeOf(signature);
  if (type.sig[0] !== "(" || index >= type.children.length) {
    throw new Error(`GVariant type ${signature} has no member ${index}`);
  }
  return tupleSlices(type, bytes)[index];
}

/**
 * The elements of an array of tuples (type `signature`, e.g. `a(say)`), each as its members' serialized
 * bytes, one element at a time: a caller looking for one entry decodes only what it compares, and can give
 * the event loop a turn between elements (an array from the network may hold millions).
 */
export function* tupleElements(signature: string, bytes: Uint8Array): Generator<Uint8Array[]> {
  const type = typeOf(signature);
  const child = type.children[0];
  if (type.sig[0] !== "a" || (child.sig[0] !== "(" && child.sig[0] !== "{")) {
    throw new Error(`GVariant type ${signature} is no array of tuples`);
  }
  if (child.fixed > 0) {
    for (let at = 0; at + child.fixed <= bytes.length; at += child.fixed) {
      yield tupleSlices(child, bytes.subarray(at, at + child.fixed));
    }
    return;
  }
  for (const element of arraySlices(type, bytes)) yield tupleSlices(child, element);
}

/** Decodes serialized bytes as GVariant type `signature` (a member or element from the functions above). */
/** Decodes `bytes` as a value of GVariant type `signature`. */
export function decodeGVariant(signature: string, bytes: Uint8Array): DecodedGVariant {
  return decodeWith(typeOf(signature), bytes);
}

/** Lowercase hex of bytes (OSTree checksums). */
export function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
