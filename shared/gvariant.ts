/**
 * GVariant text format (the syntax of `dconf` keyfiles, `dconf read` and `gsettings get`), shared by the server
 * (policy validation), the agent (re-validation, rendering, read-back) and the web editor (validation as you
 * type).
 *
 * Three steps, each usable alone:
 *
 * 1. {@linkcode parseGVariantText} reads text into a syntax tree (no types yet): literals, containers, type
 *    keywords (`uint32 300`), `@type` annotations, `just`/`nothing`, byte strings.
 * 2. {@linkcode typeGVariant} gives the tree a definite type: the expected one (a GSettings key's type) or the
 *    one GLib would infer (`300` is int32, `'x'` a string, `[]` needs a type). Integers are range-checked,
 *    object paths and signatures checked.
 * 3. {@linkcode formatGVariant} prints a typed value canonically: one line, every control character escaped,
 *    annotated exactly where a reader without the schema would otherwise infer another type (`uint32 300`,
 *    `@as []`). Equal values print equal text, which is what {@linkcode gvariantEquals} compares.
 *
 * A printed value never contains a raw newline or other control character, so it cannot break out of the
 * `key=value` line of a keyfile.
 *
 * @module
 */

/** A typed value. Integers of 64 bits are bigints; every other number is a JS number. */
export type GValue =
  | { type: "b"; value: boolean }
  | { type: "x" | "t"; value: bigint }
  | { type: "y" | "n" | "q" | "i" | "u" | "h" | "d"; value: number }
  | { type: "s" | "o" | "g"; value: string }
  | { type: string; value: GValue[] | GValue | null };

/** Malformed text, an unknown type, or a value that does not fit its type. */
export class GVariantError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GVariantError";
  }
}

/** Longest accepted text, in characters. */
export const MAX_GVARIANT_TEXT = 64 * 1024;
const MAX_DEPTH = 64;

type Node =
  | { kind: "number"; text: string }
  | { kind: "string"; value: string }
  | { kind: "bytes"; value: number[] }
  | { kind: "bool"; value: boolean }
  | { kind: "array"; items: Node[] }
  | { kind: "tuple"; items: Node[] }
  | { kind: "dict"; entries: [Node, Node][] }
  | { kind: "entry"; key: Node; value: Node }
  | { kind: "variant"; inner: Node }
  | { kind: "nothing" }
  | { kind: "just"; inner: Node }
  | { kind: "typed"; type: string; inner: Node };

const KEYWORD_TYPES: Record<string, string> = {
  boolean: "b",
  byte: "y",
  int16: "n",
  uint16: "q",
  int32: "i",
  uint32: "u",
  int64: "x",
  uint64: "t",
  handle: "h",
  double: "d",
  string: "s",
  objectpath: "o",
  signature: "g",
};
const TYPE_KEYWORDS: Record<string, string> = Object.fromEntries(
  Object.entries(KEYWORD_TYPES).map(([k, v]) => [v, k]),
);
const BASIC = "bynqiuxthdsog";
const INT_RANGES: Record<string, [bigint, bigint]> = {
  y: [0n, 255n],
  n: [-32768n, 32767n],
  q: [0n, 65535n],
  i: [-2147483648n, 2147483647n],
  u: [0n, 4294967295n],
  h: [-2147483648n, 2147483647n],
  x: [-9223372036854775808n, 9223372036854775807n],
  t: [0n, 18446744073709551615n],
};

// ---------------------------------------------------------------------------------------------------------
// Type strings

/** Reads one complete type at `start`; returns its end. */
function typeEnd(text: string, start: number, depth = 0): number {
  if (depth > MAX_DEPTH) throw new GVariantError("type is nested too deeply");
  const ch = text[start];
  if (ch === undefined) throw new GVariantError(`type "${text}" ends too early`);
  if (BASIC.includes(ch) || ch === "v") return start + 1;
  if (ch === "a" || ch === "m") return typeEnd(text, start + 1, depth + 1);
  if (ch === "(") {
    let i = start + 1;
    while (text[i] !== ")") {
      if (i >= text.length) throw new GVariantError(`type "${text}" has an unclosed '('`);
      i = typeEnd(text, i, depth + 1);
    }
    return i + 1;
  }
  if (ch === "{") {
    if (!BASIC.includes(text[start + 1] ?? "")) {
      throw new GVariantError(`type "${text}": a dictionary key must be a basic type`);
    }
    const i = typeEnd(text, start + 2, depth + 1);
    if (text[i] !== "}") throw new GVariantError(`type "${text}": a dictionary entry has exactly two types`);
    return i + 1;
  }
  throw new GVariantError(`type "${text}" has an unknown type character '${ch}'`);
}

/** Whether `type` is one complete, definite GVariant type string such as `u`, `as` or `a{sv}`. */
export function isGVariantType(type: string): boolean {
  try {
    return type.length > 0 && type.length <= 255 && typeEnd(type, 0) === type.length;
  } catch {
    return false;
  }
}

/** The complete types inside a tuple type, or the two of a dict entry. */
function memberTypes(type: string): string[] {
  const out: string[] = [];
  let i = 1;
  while (i < type.length - 1) {
    const end = typeEnd(type, i);
    out.push(type.slice(i, end));
    i = end;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Text → syntax tree

class Reader {
  pos = 0;
  constructor(readonly text: string) {}

  fail(what: string): never {
    throw new GVariantError(`${what} at position ${this.pos + 1}`);
  }

  skip(): void {
    // ASCII blanks only: GLib's parser knows no other whitespace, and U+2028 & co. must not pass as one.
    while (this.text[this.pos] === " " || this.text[this.pos] === "\t") this.pos++;
  }

  peek(): string | undefined {
    this.skip();
    return this.text[this.pos];
  }

  eat(ch: string): boolean {
    if (this.peek() === ch) {
      this.pos++;
      return true;
    }
    return false;
  }

  expect(ch: string, context: string): void {
    if (!this.eat(ch)) this.fail(`expected '${ch}' ${context}`);
  }

  word(): string | undefined {
    this.skip();
    return /^[A-Za-z_][A-Za-z0-9_]*/.exec(this.text.slice(this.pos, this.pos + 64))?.[0];
  }

  value(depth: number): Node {
    if (depth > MAX_DEPTH) this.fail("value is nested too deeply");
    const ch = this.peek();
    if (ch === undefined) this.fail("value expected");
    if (ch === "[") return this.list(depth);
    if (ch === "(") return this.tuple(depth);
    if (ch === "{") return this.brace(depth);
    if (ch === "<") {
      this.pos++;
      const inner = this.value(depth + 1);
      this.expect(">", "to close the variant");
      return { kind: "variant", inner };
    }
    if (ch === "'" || ch === '"') return { kind: "string", value: this.string() };
    if (ch === "@") {
      this.pos++;
      const start = this.pos;
      let end: number;
      try {
        end = typeEnd(this.text, start);
      } catch (err) {
        return this.fail((err as Error).message);
      }
      this.pos = end;
      return { kind: "typed", type: this.text.slice(start, end), inner: this.value(depth + 1) };
    }
    if (/[-+0-9.]/.test(ch)) return this.number();
    const word = this.word();
    if (!word) this.fail(`unexpected '${ch}'`);
    if (word === "b" && (this.text[this.pos + 1] === "'" || this.text[this.pos + 1] === '"')) {
      this.pos++;
      return { kind: "bytes", value: [...new TextEncoder().encode(this.string())] };
    }
    if (
      word !== "true" && word !== "false" && word !== "nothing" && word !== "just" && word !== "inf" &&
      word !== "nan" && !KEYWORD_TYPES[word]
    ) {
      this.fail(`unknown word "${word}" (strings need quotes: '${word}')`);
    }
    this.pos += word.length;
    if (word === "true" || word === "false") return { kind: "bool", value: word === "true" };
    if (word === "nothing") return { kind: "nothing" };
    if (word === "just") return { kind: "just", inner: this.value(depth + 1) };
    if (word === "inf" || word === "nan") return { kind: "number", text: word };
    const type = KEYWORD_TYPES[word];
    return { kind: "typed", type, inner: this.value(depth + 1) };
  }

  number(): Node {
    const m = /^[-+]?(0[xX][0-9A-Fa-f]+|inf|nan|[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?|[0-9]+\.)/.exec(
      this.text.slice(this.pos, this.pos + 512),
    );
    if (!m) this.fail("malformed number");
    this.pos += m[0].length;
    if (/^[A-Za-z0-9_.]/.test(this.text[this.pos] ?? "")) this.fail("malformed number");
    return { kind: "number", text: m[0] };
  }

  string(): string {
    const quote = this.text[this.pos++];
    let out = "";
    for (;;) {
      const ch = this.text[this.pos++];
      if (ch === undefined) this.fail("unterminated string: close the quote");
      if (ch === quote) return out;
      if (ch !== "\\") {
        out += ch;
        continue;
      }
      const esc = this.text[this.pos++];
      const simple: Record<string, string> = {
        n: "\n",
        t: "\t",
        r: "\r",
        b: "\b",
        f: "\f",
        v: "\v",
        a: "\x07",
      };
      if (esc === undefined) this.fail("unterminated string: close the quote");
      if (esc in simple) out += simple[esc];
      else if (esc === "u" || esc === "U") {
        const len = esc === "u" ? 4 : 8;
        const hex = this.text.slice(this.pos, this.pos + len);
        if (!new RegExp(`^[0-9A-Fa-f]{${len}}$`).test(hex)) this.fail(`\\${esc} needs ${len} hex digits`);
        const code = parseInt(hex, 16);
        if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) this.fail("invalid Unicode escape");
        out += String.fromCodePoint(code);
        this.pos += len;
      } else out += esc;
    }
  }

  list(depth: number): Node {
    this.pos++;
    const items: Node[] = [];
    if (this.eat("]")) return { kind: "array", items };
    for (;;) {
      items.push(this.value(depth + 1));
      if (this.eat("]")) return { kind: "array", items };
      this.expect(",", "between array items");
    }
  }

  tuple(depth: number): Node {
    this.pos++;
    const items: Node[] = [];
    if (this.eat(")")) return { kind: "tuple", items };
    for (;;) {
      items.push(this.value(depth + 1));
      if (this.eat(")")) {
        if (items.length === 1) this.fail("a one-item tuple needs a trailing comma: (x,)");
        return { kind: "tuple", items };
      }
      this.expect(",", "between tuple items");
      if (this.eat(")")) return { kind: "tuple", items };
    }
  }

  brace(depth: number): Node {
    this.pos++;
    const entries: [Node, Node][] = [];
    if (this.eat("}")) return { kind: "dict", entries };
    const key = this.value(depth + 1);
    if (this.eat(",")) {
      const value = this.value(depth + 1);
      this.expect("}", "to close the dictionary entry");
      return { kind: "entry", key, value };
    }
    this.expect(":", "after a dictionary key");
    entries.push([key, this.value(depth + 1)]);
    for (;;) {
      if (this.eat("}")) return { kind: "dict", entries };
      this.expect(",", "between dictionary entries");
      const k = this.value(depth + 1);
      this.expect(":", "after a dictionary key");
      entries.push([k, this.value(depth + 1)]);
    }
  }
}

/** The syntax tree of GVariant text; see the module documentation. Opaque outside this module. */
export type GVariantSyntax = Node;

/**
 * Parses GVariant text into a syntax tree.
 *
 * @throws {GVariantError} naming the problem and its position.
 */
export function parseGVariantText(text: string): GVariantSyntax {
  if (text.length > MAX_GVARIANT_TEXT) {
    throw new GVariantError(`value is longer than ${MAX_GVARIANT_TEXT} characters`);
  }
  // deno-lint-ignore no-control-regex
  const control = /[\u0000-\u0008\u000a-\u001f\u007f]/.exec(text);
  if (control) {
    throw new GVariantError(
      `value contains the control character U+${
        control[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")
      }; write it as an escape inside a string (\\n, \\t)`,
    );
  }
  const reader = new Reader(text);
  if (reader.peek() === undefined) throw new GVariantError("value is empty");
  const node = reader.value(0);
  if (reader.peek() !== undefined) reader.fail("unexpected text after the value");
  return node;
}

// ---------------------------------------------------------------------------------------------------------
// Syntax tree → typed value

function describe(node: Node): string {
  switch (node.kind) {
    case "number":
      return `the number ${node.text}`;
    case "string":
      return "a string";
    case "bytes":
      return "a byte string";
    case "bool":
      return `the boolean ${node.value}`;
    case "array":
      return "an array";
    case "tuple":
      return "a tuple";
    case "dict":
      return "a dictionary";
    case "entry":
      return "a dictionary entry";
    case "variant":
      return "a variant";
    case "nothing":
      return "nothing";
    case "just":
      return "just …";
    case "typed":
      return `a value of type ${node.type}`;
  }
}

function mismatch(node: Node, type: string): never {
  throw new GVariantError(`expected a value of type ${type}, got ${describe(node)}`);
}

function integer(text: string, type: string): bigint {
  if (/[.eE]/.test(text) && !/^[-+]?0[xX]/.test(text) || /inf|nan/.test(text)) {
    throw new GVariantError(`${text} is not an integer (type ${type})`);
  }
  const negative = text.startsWith("-");
  const digits = text.replace(/^[-+]/, "");
  let n: bigint;
  if (/^0[xX]/.test(digits)) n = BigInt(digits);
  else if (/^0[0-7]+$/.test(digits)) n = BigInt(`0o${digits.slice(1)}`);
  else if (/^[0-9]+$/.test(digits)) n = BigInt(digits);
  else throw new GVariantError(`${text} is not an integer (type ${type})`);
  if (negative) n = -n;
  const [min, max] = INT_RANGES[type];
  if (n < min || n > max) {
    throw new GVariantError(`${text} is out of range for type ${type} (${min} to ${max})`);
  }
  return n;
}

function checkObjectPath(value: string): void {
  if (!/^\/$|^(\/[A-Za-z0-9_]+)+$/.test(value)) {
    throw new GVariantError(`'${value}' is not a D-Bus object path such as /org/example/Object`);
  }
}

function checkSignature(value: string): void {
  let i = 0;
  try {
    while (i < value.length) i = typeEnd(value, i);
  } catch {
    throw new GVariantError(`'${value}' is not a D-Bus type signature`);
  }
  if (value.length > 255) throw new GVariantError("a signature is at most 255 characters");
}

/** What GLib infers for a node without an expected type, or undefined when it cannot. */
function infer(node: Node): GValue {
  switch (node.kind) {
    case "number":
      return typed(node, /[.eE]|inf|nan/.test(node.text) && !/^[-+]?0[xX]/.test(node.text) ? "d" : "i");
    case "string":
      return { type: "s", value: node.value };
    case "bytes":
      return typed(node, "ay");
    case "bool":
      return { type: "b", value: node.value };
    case "typed":
      return typed(node.inner, node.type);
    case "variant":
      return { type: "v", value: infer(node.inner) };
    case "just": {
      const inner = infer(node.inner);
      return { type: `m${inner.type}`, value: inner };
    }
    case "tuple": {
      const items = node.items.map(infer);
      return { type: `(${items.map((i) => i.type).join("")})`, value: items };
    }
    case "entry": {
      const key = infer(node.key);
      if (!BASIC.includes(key.type)) throw new GVariantError("a dictionary key must be a basic value");
      const value = infer(node.value);
      return { type: `{${key.type}${value.type}}`, value: [key, value] };
    }
    case "array": {
      if (node.items.length === 0) {
        throw new GVariantError("cannot tell the type of an empty array: write it with a type, e.g. @as []");
      }
      const first = infer(node.items[0]);
      return typed(node, `a${first.type}`);
    }
    case "dict": {
      if (node.entries.length === 0) {
        throw new GVariantError(
          "cannot tell the type of an empty dictionary: write it with a type, e.g. @a{sv} {}",
        );
      }
      const [k, v] = node.entries[0];
      const key = infer(k);
      const value = infer(v);
      return typed(node, `a{${key.type}${value.type}}`);
    }
    case "nothing":
      throw new GVariantError("cannot tell the type of nothing: write it with a type, e.g. @ms nothing");
  }
}

function typed(node: Node, type: string, depth = 0): GValue {
  if (depth > MAX_DEPTH) throw new GVariantError("value is nested too deeply");
  if (node.kind === "typed") {
    if (!isGVariantType(node.type)) throw new GVariantError(`"${node.type}" is not a GVariant type`);
    if (node.type !== type) {
      throw new GVariantError(`expected a value of type ${type}, got one written as type ${node.type}`);
    }
    return typed(node.inner, type, depth + 1);
  }
  const head = type[0];
  if (type === "b") {
    if (node.kind !== "bool") mismatch(node, type);
    return { type, value: node.value };
  }
  if (type in INT_RANGES) {
    if (node.kind !== "number") mismatch(node, type);
    const n = integer(node.text, type);
    return type === "x" || type === "t" ? { type, value: n } : { type: type as "y", value: Number(n) };
  }
  if (type === "d") {
    if (node.kind !== "number") mismatch(node, type);
    const t = node.text.replace(/^\+/, "");
    const value = /^-?inf$/.test(t)
      ? (t.startsWith("-") ? -Infinity : Infinity)
      : t === "nan"
      ? NaN
      : /^-?0[xX]/.test(t)
      ? Number(BigInt(t.replace("-", ""))) * (t.startsWith("-") ? -1 : 1)
      : Number(t);
    return { type, value };
  }
  if (type === "s" || type === "o" || type === "g") {
    if (node.kind !== "string") mismatch(node, type);
    if (type === "o") checkObjectPath(node.value);
    if (type === "g") checkSignature(node.value);
    if (node.value.includes("\0")) throw new GVariantError("a string must not contain NUL");
    return { type, value: node.value };
  }
  if (type === "v") {
    if (node.kind !== "variant") mismatch(node, type);
    return { type, value: infer(node.inner) };
  }
  if (head === "m") {
    const inner = type.slice(1);
    if (node.kind === "nothing") return { type, value: null };
    if (node.kind === "just") return { type, value: typed(node.inner, inner, depth + 1) };
    return { type, value: typed(node, inner, depth + 1) };
  }
  if (head === "a") {
    const element = type.slice(1);
    if (node.kind === "bytes" && element === "y") {
      return { type, value: node.value.map((b) => ({ type: "y", value: b })) };
    }
    if (node.kind === "dict" && element[0] === "{") {
      const [kt, vt] = memberTypes(element);
      return {
        type,
        value: node.entries.map(([k, v]) => ({
          type: element,
          value: [typed(k, kt, depth + 1), typed(v, vt, depth + 1)],
        })),
      };
    }
    if (node.kind !== "array") mismatch(node, type);
    return { type, value: node.items.map((item) => typed(item, element, depth + 1)) };
  }
  if (head === "(") {
    if (node.kind !== "tuple") mismatch(node, type);
    const members = memberTypes(type);
    if (members.length !== node.items.length) {
      throw new GVariantError(
        `expected a tuple of ${members.length} item(s) (${type}), got ${node.items.length}`,
      );
    }
    return { type, value: node.items.map((item, i) => typed(item, members[i], depth + 1)) };
  }
  if (head === "{") {
    if (node.kind !== "entry") mismatch(node, type);
    const [kt, vt] = memberTypes(type);
    return { type, value: [typed(node.key, kt, depth + 1), typed(node.value, vt, depth + 1)] };
  }
  throw new GVariantError(`"${type}" is not a GVariant type`);
}

/**
 * Gives a syntax tree a definite type: `expected` (e.g. a GSettings key's type) or, without it, the type GLib
 * infers.
 *
 * @throws {GVariantError} when the value does not fit or its type cannot be told.
 */
export function typeGVariant(syntax: GVariantSyntax, expected?: string): GValue {
  if (expected === undefined || expected === "") return infer(syntax);
  if (!isGVariantType(expected)) throw new GVariantError(`"${expected}" is not a GVariant type`);
  return typed(syntax, expected);
}

/** Parses and types in one step; see {@linkcode parseGVariantText} and {@linkcode typeGVariant}. */
export function parseGVariant(text: string, expected?: string): GValue {
  return typeGVariant(parseGVariantText(text), expected);
}

// ---------------------------------------------------------------------------------------------------------
// Typed value → canonical text

function quote(value: string): string {
  let out = "'";
  for (const ch of value) {
    const code = ch.codePointAt(0)!;
    if (ch === "'" || ch === "\\") out += `\\${ch}`;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\r") out += "\\r";
    else if (
      code < 0x20 || code === 0x7f || (code >= 0x80 && code < 0xa0) || code === 0x2028 || code === 0x2029
    ) {
      out += `\\u${code.toString(16).padStart(4, "0")}`;
    } else out += ch;
  }
  return `${out}'`;
}

function formatDouble(n: number): string {
  if (Number.isNaN(n)) return "nan";
  if (!Number.isFinite(n)) return n > 0 ? "inf" : "-inf";
  const text = String(n);
  return /[.e]/.test(text) ? text : `${text}.0`;
}

/** Prints `v` for a reader that already knows its type. */
function bare(v: GValue): string {
  const t = v.type;
  if (t === "b") return v.value ? "true" : "false";
  if (t === "d") return formatDouble(v.value as number);
  if (t in INT_RANGES) return String(v.value);
  if (t === "s" || t === "o" || t === "g") return quote(v.value as string);
  if (t === "v") return `<${formatGVariant(v.value as GValue)}>`;
  if (t[0] === "m") {
    if (v.value === null) return "nothing";
    const inner = v.value as GValue;
    // `just` keeps a nested maybe unambiguous (mms: just nothing vs nothing).
    return inner.type[0] === "m" ? `just ${bare(inner)}` : bare(inner);
  }
  if (t[0] === "a" && t[1] === "{") {
    return `{${
      (v.value as GValue[]).map((e) => {
        const [k, val] = e.value as GValue[];
        return `${bare(k)}: ${bare(val)}`;
      }).join(", ")
    }}`;
  }
  if (t[0] === "a") return `[${(v.value as GValue[]).map(bare).join(", ")}]`;
  if (t[0] === "(") {
    const items = (v.value as GValue[]).map(bare);
    return items.length === 1 ? `(${items[0]},)` : `(${items.join(", ")})`;
  }
  if (t[0] === "{") {
    const [k, val] = v.value as GValue[];
    return `{${bare(k)}, ${bare(val)}}`;
  }
  throw new GVariantError(`cannot print type ${t}`);
}

function inferredType(text: string): string | undefined {
  try {
    return infer(parseGVariantText(text)).type;
  } catch {
    return undefined;
  }
}

/**
 * Canonical text of a typed value: annotated only where a reader without the type would infer another one
 * (`uint32 300`, `@as []`, `objectpath '/a'`), one line, control characters escaped.
 */
export function formatGVariant(v: GValue): string {
  const text = bare(v);
  if (inferredType(text) === v.type) return text;
  const keyword = TYPE_KEYWORDS[v.type];
  return keyword ? `${keyword} ${text}` : `@${v.type} ${text}`;
}

/** Canonical text of `text` read as `type` (or as GLib infers it); throws {@linkcode GVariantError}. */
export function canonicalGVariant(text: string, type?: string): string {
  return formatGVariant(parseGVariant(text, type));
}

/** Whether two values are equal: same type and same content. */
export function gvariantEquals(a: GValue, b: GValue): boolean {
  return a.type === b.type && formatGVariant(a) === formatGVariant(b);
}

/**
 * Compares an intended value with one read back, both as text: equal when both parse to the same typed value
 * (`uint32 300` and `300` read as type `u` are equal). Unparseable text is never equal.
 */
export function gvariantTextEquals(expected: string, actual: string, type?: string): boolean {
  try {
    const want = parseGVariant(expected, type);
    return gvariantEquals(want, parseGVariant(actual, type || want.type));
  } catch {
    return false;
  }
}

/** A sanitizer-style checker: `undefined` when `text` is one well-formed GVariant value, else the problem. */
export function gvariantProblem(text: string, type?: string): string | undefined {
  try {
    parseGVariant(text, type);
    return undefined;
  } catch (err) {
    if (err instanceof GVariantError) return `is not a valid GVariant value: ${err.message}`;
    throw err;
  }
}

/**
 * Like {@linkcode gvariantProblem} but checks only the syntax (the key's type is not known here: `[]` is fine
 * for an `as` key). The agent types the value against the installed schema before writing it.
 */
export function gvariantSyntaxProblem(text: string): string | undefined {
  try {
    parseGVariantText(text);
    return undefined;
  } catch (err) {
    if (err instanceof GVariantError) return `is not a valid GVariant value: ${err.message}`;
    throw err;
  }
}

/** The number inside a numeric value, for range checks; undefined for other types. */
export function gvariantNumber(v: GValue): number | bigint | undefined {
  return typeof v.value === "number" || typeof v.value === "bigint" ? v.value : undefined;
}
