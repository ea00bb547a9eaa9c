/**
 * AppStream catalogue documents (`appstream.xml`, gzip or not) → the applications the catalogue
 * indexes: id, name, summary, icon and versions. Only what the index needs is read; untranslated
 * `name`/`summary` win over translations; everything but `component` elements and their fields is skipped.
 *
 * The reader is a streaming tokenizer over the document's bytes, not a general XML parser, built for
 * documents from strangers (a remote repository, or an upload of up to `flatpak.catalog_max_bytes`):
 * - every byte is looked at a bounded number of times, whatever the document holds (unclosed tags, endless
 *   attribute names, stray end tags), so its work is linear in the document's size. Regular expressions over
 *   the document are avoided on purpose: the lazy `<component>(.*?)</component>` this replaces rescanned the
 *   rest of the document for every unclosed start tag, and 644 KiB of them held the event loop for 20 s;
 * - it reads the document in pieces and gives the event loop a turn whenever it has worked for
 *   {@link LONG_WORK_MS} (server/core/loop_turn.ts), so a 64 MiB document delays other requests by milliseconds
 *   at a time, never by its whole parse; the gzip stream is inflated and hashed piece by piece too;
 * - tags ({@link MAX_TAG_BYTES}), nesting ({@link MAX_DEPTH}), the text kept per field and the number of
 *   applications ({@link MAX_APPS}) are limited;
 * - no DTDs or entity definitions are honoured (only the five predefined entities and character
 *   references), so entity-expansion attacks have nothing to expand.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { LONG_WORK_MS, nextTurn } from "../core/loop_turn.ts";

/** One indexed application. */
export interface CatalogApp {
  appId: string;
  name: string;
  summary: string;
  /** A remote icon URL, a cached icon's URL under the repository, or "". */
  iconUrl: string;
  /** Release versions, newest first as listed. */
  versions: string[];
}

/** A read catalogue: its applications, sorted by id, and the SHA-256 (hex) of the (inflated) document. */
export interface AppstreamDocument {
  apps: CatalogApp[];
  sha256: string;
}

/** Most applications one catalogue may list. */
export const MAX_APPS = 100_000;
/** Deepest element nesting accepted (AppStream documents nest about six deep). */
export const MAX_DEPTH = 256;
/** Longest tag accepted (with its attributes); real ones are well under 1 KiB. */
export const MAX_TAG_BYTES = 64 * 1024;
/** Bytes of text kept per field (more than any shown value; the rest is skipped, never stored). */
const MAX_FIELD_BYTES = 8192;
/** Bytes handed to the tokenizer at once: a piece costs well under a millisecond. */
const PIECE_BYTES = 16 * 1024;

const APP_TYPES = new Set(["desktop-application", "desktop", "console-application", "web-application"]);
const FIELDS = new Set(["id", "name", "summary", "icon"]);

const LT = 0x3c;
const GT = 0x3e;
const SLASH = 0x2f;
const BANG = 0x21;
const QUESTION = 0x3f;
const DASH = 0x2d;
const BRACKET_OPEN = 0x5b;
const BRACKET_CLOSE = 0x5d;
const QUOTE = 0x22;
const APOSTROPHE = 0x27;
const AMPERSAND = 0x26;
const AMP_ESCAPE = new TextEncoder().encode("&amp;");
const LT_ESCAPE = new TextEncoder().encode("&lt;");
const CDATA_OPEN = new TextEncoder().encode("![CDATA[");
const COMMENT_OPEN = new TextEncoder().encode("!--");

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]{1,6}|#[0-9]{1,7}|amp|lt|gt|quot|apos);/g, (_, e: string) => {
    if (e[0] === "#") {
      const code = e[1] === "x" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : "";
    }
    return { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" }[e]!;
  });
}

function oneLine(text: string, max: number): string {
  // deno-lint-ignore no-control-regex
  return text.replace(/[\x00-\x1f\x7f]+/g, " ").replace(/\s+/g, " ").trim().slice(0, max);
}

/** Whether bytes start with the gzip magic number. */
export function isGzip(bytes: Uint8Array): boolean {
  return bytes.length > 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;
}

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x09 || code === 0x0d;
}

/** A start tag as read: its name, attributes and whether it closes itself. */
interface Tag {
  name: string;
  attributes: Record<string, string>;
  selfClosing: boolean;
}

/**
 * Reads a tag's text (between `<` and `>`) in one pass: the name, then `name="value"` pairs; anything
 * malformed between attributes is skipped.
 */
function readTag(text: string): Tag {
  const end = text.length;
  let at = 0;
  while (at < end && !isSpace(text.charCodeAt(at)) && text.charCodeAt(at) !== SLASH) at++;
  const name = text.slice(0, at);
  const selfClosing = text.charCodeAt(end - 1) === SLASH;
  const attributes: Record<string, string> = {};
  while (at < end) {
    const nameStart = at;
    while (at < end && !isSpace(text.charCodeAt(at)) && text[at] !== "=" && text.charCodeAt(at) !== SLASH) {
      at++;
    }
    const attribute = text.slice(nameStart, at);
    while (at < end && isSpace(text.charCodeAt(at))) at++;
    if (text[at] !== "=") {
      if (at === nameStart) at++;
      continue;
    }
    at++;
    while (at < end && isSpace(text.charCodeAt(at))) at++;
    const quote = text.charCodeAt(at);
    if (quote !== QUOTE && quote !== APOSTROPHE) continue;
    let close = at + 1;
    while (close < end && text.charCodeAt(close) !== quote) close++;
    if (attribute && !(attribute in attributes)) {
      attributes[attribute] = decodeEntities(text.slice(at + 1, close));
    }
    at = close + 1;
  }
  return { name, attributes, selfClosing };
}

/** A component being read. */
interface Component {
  /** How many elements were open around the `<component>` element. */
  depth: number;
  type: string;
  /** Untranslated value of each field, and the first English translation as a fallback. */
  fields: Map<string, string>;
  fallbacks: Map<string, string>;
  icons: { attributes: Record<string, string>; value: string }[];
  versions: string[];
}

/** A field element being read; its text is in the reader's field buffer (decoded when it closes). */
interface OpenField {
  depth: number;
  name: string;
  attributes: Record<string, string>;
  length: number;
}

/** What the tokenizer is in the middle of (markup can span pieces). */
const enum State {
  Text,
  /** After `<`: a tag, or the start of a comment, CDATA section, processing instruction or declaration. */
  Tag,
  Comment,
  Cdata,
  Instruction,
  Declaration,
}

/**
 * The streaming reader: {@link feed} the document's bytes in order, then {@link finish}. Each call does
 * work proportional to the bytes given.
 */
class AppstreamReader {
  readonly #iconBase: string;
  readonly #apps = new Map<string, CatalogApp>();
  /** Names of the open elements, innermost last, and how many of each are open (stray end tags: O(1)). */
  readonly #open: string[] = [];
  readonly #openCount = new Map<string, number>();
  #sawCatalogue = false;
  #component: Component | undefined;
  #field: OpenField | undefined;
  #state = State.Text;
  readonly #tag = new Uint8Array(MAX_TAG_BYTES);
  #tagLength = 0;
  /** The quote a tag or declaration is inside (0: none). */
  #quote = 0;
  /** `-` (comment), `]` (CDATA) or `?` (instruction) seen just before, for the end marker. */
  #run = 0;
  /** `[`…`]` depth of a declaration's internal subset. */
  #brackets = 0;
  readonly #decoder = new TextDecoder();
  /** The open field's text so far (one field is open at a time). */
  readonly #fieldBytes = new Uint8Array(MAX_FIELD_BYTES);

  constructor(iconBase: string) {
    this.#iconBase = iconBase;
  }

  feed(chunk: Uint8Array): void {
    let at = 0;
    while (at < chunk.length) {
      switch (this.#state) {
        case State.Text: {
          const lt = chunk.indexOf(LT, at);
          const end = lt < 0 ? chunk.length : lt;
          this.#keep(chunk, at, end);
          if (lt < 0) return;
          this.#state = State.Tag;
          this.#tagLength = 0;
          this.#quote = 0;
          at = lt + 1;
          break;
        }
        case State.Tag:
          at = this.#readTag(chunk, at);
          break;
        case State.Comment:
          at = this.#until(chunk, at, DASH, State.Comment);
          break;
        case State.Cdata:
          at = this.#readCdata(chunk, at);
          break;
        case State.Instruction:
          at = this.#until(chunk, at, QUESTION, State.Instruction);
          break;
        case State.Declaration:
          at = this.#readDeclaration(chunk, at);
          break;
      }
    }
  }

  finish(): CatalogApp[] {
    if (!this.#sawCatalogue) throw new Error("not an AppStream catalogue: no <components> element");
    return [...this.#apps.values()].sort((a, b) => (a.appId < b.appId ? -1 : 1));
  }

  /** Collects a tag up to its unquoted `>`; turns into a comment, CDATA, instruction or declaration. */
  #readTag(chunk: Uint8Array, from: number): number {
    const tag = this.#tag;
    for (let at = from; at < chunk.length; at++) {
      const byte = chunk[at];
      if (this.#quote) {
        if (byte === this.#quote) this.#quote = 0;
      } else if (byte === GT) {
        this.#state = State.Text;
        this.#onTag();
        return at + 1;
      } else if (byte === QUOTE || byte === APOSTROPHE) this.#quote = byte;
      if (this.#tagLength === MAX_TAG_BYTES) {
        throw new Error(`the AppStream document has a tag longer than ${MAX_TAG_BYTES} bytes`);
      }
      tag[this.#tagLength++] = byte;
      if (this.#tagLength <= CDATA_OPEN.length && (tag[0] === BANG || tag[0] === QUESTION)) {
        const special = this.#special(this.#tagLength);
        if (special !== undefined) {
          this.#state = special;
          this.#quote = 0;
          this.#run = 0;
          return at + 1;
        }
      }
    }
    return chunk.length;
  }

  /** Whether the first `length` bytes of the tag (starting `!` or `?`) start a comment, CDATA and so on. */
  #special(length: number): State | undefined {
    const tag = this.#tag;
    this.#brackets = 0;
    if (tag[0] === QUESTION) return State.Instruction;
    if (length < 2) return undefined;
    const prefixOf = (marker: Uint8Array) => {
      for (let i = 0; i < length && i < marker.length; i++) if (tag[i] !== marker[i]) return false;
      return true;
    };
    if (prefixOf(COMMENT_OPEN)) return length === COMMENT_OPEN.length ? State.Comment : undefined;
    if (prefixOf(CDATA_OPEN)) return length === CDATA_OPEN.length ? State.Cdata : undefined;
    // `<!DOCTYPE …>` and the like: the bytes read so far hold no quote or bracket of consequence.
    if (tag[length - 1] === BRACKET_OPEN) this.#brackets = 1;
    return State.Declaration;
  }

  /** Skips to the end of a comment (`-->`) or instruction (`?>`): `>` after two `-`, or after `?`. */
  #until(chunk: Uint8Array, from: number, marker: number, state: State): number {
    const needed = state === State.Comment ? 2 : 1;
    for (let at = from; at < chunk.length; at++) {
      const byte = chunk[at];
      if (byte === GT && this.#run >= needed) {
        this.#state = State.Text;
        return at + 1;
      }
      this.#run = byte === marker ? this.#run + 1 : 0;
    }
    return chunk.length;
  }

  /** CDATA text goes to the open field as text, with `&` and `<` escaped (it is decoded with the rest). */
  #readCdata(chunk: Uint8Array, from: number): number {
    for (let at = from; at < chunk.length; at++) {
      const byte = chunk[at];
      if (byte === BRACKET_CLOSE) {
        this.#run++;
        continue;
      }
      const brackets = this.#run;
      this.#run = 0;
      if (byte === GT && brackets >= 2) {
        for (let i = 2; i < brackets; i++) this.#keepByte(BRACKET_CLOSE);
        this.#state = State.Text;
        return at + 1;
      }
      for (let i = 0; i < brackets; i++) this.#keepByte(BRACKET_CLOSE);
      if (byte === AMPERSAND) this.#keepBytes(AMP_ESCAPE);
      else if (byte === LT) this.#keepBytes(LT_ESCAPE);
      else this.#keepByte(byte);
    }
    return chunk.length;
  }

  /** Skips a declaration (`<!DOCTYPE …>` with its internal subset): never honoured. */
  #readDeclaration(chunk: Uint8Array, from: number): number {
    for (let at = from; at < chunk.length; at++) {
      const byte = chunk[at];
      if (this.#quote) {
        if (byte === this.#quote) this.#quote = 0;
      } else if (byte === QUOTE || byte === APOSTROPHE) this.#quote = byte;
      else if (byte === BRACKET_OPEN) this.#brackets++;
      else if (byte === BRACKET_CLOSE) this.#brackets = Math.max(0, this.#brackets - 1);
      else if (byte === GT && this.#brackets === 0) {
        this.#state = State.Text;
        return at + 1;
      }
    }
    return chunk.length;
  }

  #keep(chunk: Uint8Array, from: number, to: number): void {
    const field = this.#field;
    if (!field || field.length >= MAX_FIELD_BYTES || to <= from) return;
    const taken = Math.min(to - from, MAX_FIELD_BYTES - field.length);
    this.#fieldBytes.set(chunk.subarray(from, from + taken), field.length);
    field.length += taken;
  }

  #keepByte(byte: number): void {
    const field = this.#field;
    if (field && field.length < MAX_FIELD_BYTES) this.#fieldBytes[field.length++] = byte;
  }

  #keepBytes(bytes: Uint8Array): void {
    for (const byte of bytes) this.#keepByte(byte);
  }

  /**
   * Handles the tag just collected. Most tags matter only by name, so their attributes are read (and the
   * tag decoded as UTF-8) only where the index uses them: a component's type, a field's language or icon
   * kind, a release's version.
   */
  #onTag(): void {
    const tag = this.#tag;
    const length = this.#tagLength;
    const closing = tag[0] === SLASH;
    let at = closing ? 1 : 0;
    while (at < length && !isSpace(tag[at]) && tag[at] !== SLASH) at++;
    const name = this.#name(closing ? 1 : 0, at);
    if (closing) return this.#endElement(name);
    const component = this.#component;
    const wanted = component
      ? !this.#field && (name === "release" || FIELDS.has(name))
      : name === "component";
    this.#startElement(
      wanted ? readTag(this.#decoder.decode(tag.subarray(0, length))) : {
        name,
        attributes: {},
        selfClosing: tag[length - 1] === SLASH,
      },
    );
  }

  /** An element name from the tag's bytes; short names are read byte for byte (cheaper than a decoder). */
  #name(from: number, to: number): string {
    if (to - from > 64) return this.#decoder.decode(this.#tag.subarray(from, to));
    let name = "";
    for (let i = from; i < to; i++) name += String.fromCharCode(this.#tag[i]);
    return name;
  }

  #startElement(tag: Tag): void {
    if (tag.name === "components") this.#sawCatalogue = true;
    const depth = this.#open.length;
    const component = this.#component;
    if (tag.name === "component" && !component && !tag.selfClosing) {
      this.#component = {
        depth,
        type: tag.attributes.type ?? "",
        fields: new Map(),
        fallbacks: new Map(),
        icons: [],
        versions: [],
      };
    } else if (component && !this.#field) {
      if (tag.name === "release" && component.versions.length < 20) {
        const version = oneLine(tag.attributes.version ?? "", 64);
        if (version) component.versions.push(version);
      } else if (depth === component.depth + 1 && FIELDS.has(tag.name) && !tag.selfClosing) {
        this.#field = {
          depth,
          name: tag.name,
          attributes: tag.attributes,
          length: 0,
        };
      }
    }
    if (tag.selfClosing) return;
    if (depth >= MAX_DEPTH) {
      throw new Error(`the AppStream document nests elements deeper than ${MAX_DEPTH} levels`);
    }
    this.#open.push(tag.name);
    this.#openCount.set(tag.name, (this.#openCount.get(tag.name) ?? 0) + 1);
  }

  /** Closes `name`, and the elements left open inside it; a stray end tag is skipped. */
  #endElement(name: string): void {
    if (!this.#openCount.get(name)) return;
    for (;;) {
      const closed = this.#open.pop()!;
      this.#openCount.set(closed, this.#openCount.get(closed)! - 1);
      if (this.#field && this.#open.length === this.#field.depth) this.#closeField();
      if (this.#component && this.#open.length === this.#component.depth) this.#closeComponent();
      if (closed === name) return;
    }
  }

  #closeField(): void {
    const field = this.#field!;
    const component = this.#component!;
    this.#field = undefined;
    const value = decodeEntities(this.#decoder.decode(this.#fieldBytes.subarray(0, field.length)));
    if (field.name === "icon") {
      component.icons.push({ attributes: field.attributes, value });
      return;
    }
    const lang = field.attributes["xml:lang"];
    if (!lang) {
      if (!component.fields.has(field.name)) component.fields.set(field.name, value);
    } else if (lang.startsWith("en") && !component.fallbacks.has(field.name)) {
      component.fallbacks.set(field.name, value);
    }
  }

  #closeComponent(): void {
    const app = toApp(this.#component!, this.#iconBase);
    this.#component = undefined;
    if (!app) return;
    this.#apps.set(app.appId, app);
    if (this.#apps.size > MAX_APPS) {
      throw new Error(`the AppStream catalogue lists more than ${MAX_APPS} applications`);
    }
  }
}

/** The indexed application of a component that closed, or undefined when it is none (or not an app). */
function toApp(component: Component, iconBase: string): CatalogApp | undefined {
  if (component.type && !APP_TYPES.has(component.type)) return undefined;
  const value = (name: string) => component.fields.get(name) ?? component.fallbacks.get(name) ?? "";
  const appId = oneLine(value("id"), 255).replace(/\.desktop$/, "");
  if (!/^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*){2,}$/.test(appId)) return undefined;
  let iconUrl = "";
  for (const icon of component.icons) {
    const url = oneLine(icon.value, 2048);
    const attrs = icon.attributes;
    if (attrs.type === "remote" && /^https:\/\//.test(url)) {
      iconUrl = url;
      break;
    }
    if (attrs.type === "cached" && iconBase && /^[A-Za-z0-9._-]+\.png$/.test(url) && !iconUrl) {
      const size = attrs.width && /^\d{1,4}$/.test(attrs.width) ? `${attrs.width}x${attrs.width}` : "64x64";
      iconUrl = `${iconBase}/icons/${size}/${url}`;
    }
  }
  return {
    appId,
    name: oneLine(value("name"), 256) || appId,
    summary: oneLine(value("summary"), 512),
    iconUrl,
    versions: component.versions,
  };
}

/** The pieces of a document: inflated when it is gzip (at most `maxBytes`), else cut from it. */
async function* pieces(bytes: Uint8Array, maxBytes: number): AsyncGenerator<Uint8Array> {
  if (!isGzip(bytes)) {
    for (let at = 0; at < bytes.length; at += PIECE_BYTES) yield bytes.subarray(at, at + PIECE_BYTES);
    return;
  }
  const reader = new Blob([bytes as Uint8Array<ArrayBuffer>]).stream()
    .pipeThrough(new DecompressionStream("gzip")).getReader();
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      size += value.length;
      if (size > maxBytes) throw new Error(`the AppStream document inflates beyond ${maxBytes} bytes`);
      for (let at = 0; at < value.length; at += PIECE_BYTES) yield value.subarray(at, at + PIECE_BYTES);
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/**
 * Reads an AppStream catalogue (`appstream.xml`, plain or gzip; inflated to at most `maxBytes`).
 * `iconBase` is the URL cached icons live under (`…/icons/64x64/<name>`), or "" to leave cached icons
 * out. Throws when the document is no AppStream catalogue or passes a limit. Gives the event loop a turn
 * every few milliseconds of work.
 */
export async function readAppstream(
  bytes: Uint8Array,
  options: { maxBytes: number; iconBase?: string },
): Promise<AppstreamDocument> {
  const reader = new AppstreamReader(options.iconBase ?? "");
  const hasher = createHash("sha256");
  let started = performance.now();
  for await (const piece of pieces(bytes, options.maxBytes)) {
    hasher.update(piece);
    reader.feed(piece);
    if (performance.now() - started > LONG_WORK_MS) {
      await nextTurn();
      started = performance.now();
    }
  }
  return { apps: reader.finish(), sha256: hasher.digest("hex") };
}
