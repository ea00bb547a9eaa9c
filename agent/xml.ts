/**
 * A small, strict XML reader for the catalogue files the agent scans (GSettings schemas, polkit
 * actions). It builds an element tree and nothing more: no DTD processing, no external or
 * custom entities (so no entity expansion attacks), only the five predefined entities and
 * character references. A document type declaration with an internal subset is refused.
 *
 * @module
 */

/** An element with its attributes, child elements and direct text. */
export interface XmlElement {
  name: string;
  attrs: Record<string, string>;
  children: XmlElement[];
  /** Concatenated text directly inside the element (entities decoded). */
  text: string;
}

/** Malformed or unsupported XML. */
export class XmlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "XmlError";
  }
}

const PREDEFINED: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };
const NAME = /^[A-Za-z_:][-A-Za-z0-9_:.]*/;

function decode(text: string): string {
  return text.replace(/&(#x[0-9A-Fa-f]+|#[0-9]+|[A-Za-z]+);/g, (whole, ref: string) => {
    if (ref.startsWith("#")) {
      const code = ref[1] === "x" ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return PREDEFINED[ref] ?? whole;
  });
}

/**
 * Parses `text` into its root element.
 *
 * @throws {XmlError} when the document is malformed, too large or uses a DTD internal subset.
 */
export function parseXml(text: string, options: { maxLength?: number } = {}): XmlElement {
  if (text.length > (options.maxLength ?? 4 * 1024 * 1024)) throw new XmlError("document is too large");
  const stack: XmlElement[] = [];
  let root: XmlElement | undefined;
  let i = 0;
  const fail = (what: string): never => {
    throw new XmlError(`${what} at offset ${i}`);
  };
  while (i < text.length) {
    const lt = text.indexOf("<", i);
    const chunk = text.slice(i, lt === -1 ? text.length : lt);
    if (chunk.length) {
      if (stack.length) stack[stack.length - 1].text += decode(chunk);
      else if (chunk.trim() !== "") fail("text outside the root element");
    }
    if (lt === -1) break;
    i = lt;
    if (text.startsWith("<?", i)) {
      const end = text.indexOf("?>", i);
      if (end === -1) fail("unterminated processing instruction");
      i = end + 2;
    } else if (text.startsWith("<!--", i)) {
      const end = text.indexOf("-->", i + 4);
      if (end === -1) fail("unterminated comment");
      i = end + 3;
    } else if (text.startsWith("<![CDATA[", i)) {
      const end = text.indexOf("]]>", i);
      if (end === -1) fail("unterminated CDATA section");
      if (!stack.length) fail("CDATA outside the root element");
      stack[stack.length - 1].text += text.slice(i + 9, end);
      i = end + 3;
    } else if (text.startsWith("<!", i)) {
      const end = text.indexOf(">", i);
      if (end === -1) fail("unterminated declaration");
      if (text.slice(i, end).includes("[")) {
        fail("document type declarations with an internal subset are not supported");
      }
      i = end + 1;
    } else if (text.startsWith("</", i)) {
      const end = text.indexOf(">", i);
      if (end === -1) fail("unterminated end tag");
      const name = text.slice(i + 2, end).trim();
      const open = stack.pop();
      if (!open || open.name !== name) fail(`end tag </${name}> does not match <${open?.name ?? ""}>`);
      i = end + 1;
    } else {
      i++;
      const name = NAME.exec(text.slice(i, i + 256))?.[0] ?? fail("bad element name");
      i += name.length;
      const element: XmlElement = { name, attrs: {}, children: [], text: "" };
      const parent = stack[stack.length - 1];
      if (parent) parent.children.push(element);
      else if (root) fail("more than one root element");
      else root = element;
      for (;;) {
        while (/\s/.test(text[i] ?? "")) i++;
        if (text.startsWith("/>", i)) {
          i += 2;
          break;
        }
        if (text[i] === ">") {
          i++;
          if (stack.length >= 256) fail("elements nested too deeply");
          stack.push(element);
          break;
        }
        const attr = NAME.exec(text.slice(i, i + 256))?.[0] ?? fail(`bad attribute in <${name}>`);
        i += attr.length;
        while (/\s/.test(text[i] ?? "")) i++;
        if (text[i] !== "=") fail(`attribute ${attr} of <${name}> has no value`);
        i++;
        while (/\s/.test(text[i] ?? "")) i++;
        const quote = text[i];
        if (quote !== '"' && quote !== "'") fail(`attribute ${attr} of <${name}> is not quoted`);
        const end = text.indexOf(quote, i + 1);
        if (end === -1) fail(`unterminated attribute ${attr}`);
        element.attrs[attr] = decode(text.slice(i + 1, end));
        i = end + 1;
      }
    }
  }
  if (stack.length) throw new XmlError(`element <${stack[stack.length - 1].name}> is not closed`);
  if (!root) throw new XmlError("document has no root element");
  return root;
}

/** Child elements named `name`. */
export function childrenNamed(element: XmlElement, name: string): XmlElement[] {
  return element.children.filter((c) => c.name === name);
}

/** Trimmed text of the first child named `name` without an `xml:lang` attribute, or "". */
export function childText(element: XmlElement, name: string): string {
  const child = element.children.find((c) => c.name === name && !("xml:lang" in c.attrs));
  return child?.text.trim() ?? "";
}

/** An element to write: attributes, then child elements or comments, or text. */
export interface XmlNode {
  name: string;
  attrs?: Record<string, string>;
  children?: (XmlNode | XmlComment)[];
  text?: string;
}

/** A comment to write (must not contain `--`). */
export interface XmlComment {
  comment: string;
}

/** Characters XML 1.0 cannot carry: C0 controls but tab/LF/CR, U+FFFE/U+FFFF and unpaired surrogates. */
const NOT_XML_CHAR = new RegExp(
  "[\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\ufffe\\uffff]|[\\ud800-\\udbff](?![\\udc00-\\udfff])|" +
    "(?<![\\ud800-\\udbff])[\\udc00-\\udfff]",
);

function escapeText(value: string, where: string): string {
  const bad = NOT_XML_CHAR.exec(value);
  if (bad) {
    const code = bad[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0");
    throw new XmlError(`${where} contains U+${code}, which XML cannot carry`);
  }
  return value.replace(
    /[&<>"\t\n\r]/g,
    (ch) =>
      ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\t": "&#9;", "\n": "&#10;", "\r": "&#13;" })[
        ch
      ]!,
  );
}

function checkName(name: string): string {
  if (NAME.exec(name)?.[0] !== name) throw new XmlError(`"${name.slice(0, 40)}" is not an XML name`);
  return name;
}

function writeNode(node: XmlNode | XmlComment, indent: string, out: string[]): void {
  if ("comment" in node) {
    if (node.comment.includes("--") || node.comment.endsWith("-")) {
      throw new XmlError("a comment must not contain --");
    }
    out.push(`${indent}<!-- ${escapeText(node.comment, "a comment").replace(/&quot;/g, '"')} -->\n`);
    return;
  }
  const name = checkName(node.name);
  const attrs = Object.entries(node.attrs ?? {})
    .map(([k, v]) => ` ${checkName(k)}="${escapeText(v, `attribute ${k} of <${name}>`)}"`).join("");
  const children = node.children ?? [];
  if (children.length === 0 && !node.text) {
    out.push(`${indent}<${name}${attrs}/>\n`);
  } else if (children.length === 0) {
    out.push(`${indent}<${name}${attrs}>${escapeText(node.text!, `the text of <${name}>`)}</${name}>\n`);
  } else {
    if (node.text) throw new XmlError(`<${name}> cannot have both text and child elements here`);
    out.push(`${indent}<${name}${attrs}>\n`);
    for (const child of children) writeNode(child, `${indent}  `, out);
    out.push(`${indent}</${name}>\n`);
  }
}

/**
 * Writes a document: the XML declaration, then `root` indented by two spaces per level. Every
 * attribute value and text is escaped (`&`, `<`, `>`, `"`, tab and line breaks as references);
 * names must be XML names; characters XML 1.0 cannot carry (NUL, other C0 controls, lone
 * surrogates, U+FFFE/U+FFFF) are refused.
 *
 * @throws {XmlError} naming the element or attribute that cannot be written.
 */
export function serializeXml(root: XmlNode, options: { leading?: XmlComment[] } = {}): string {
  const out = ['<?xml version="1.0" encoding="utf-8"?>\n'];
  for (const comment of options.leading ?? []) writeNode(comment, "", out);
  writeNode(root, "", out);
  return out.join("");
}
