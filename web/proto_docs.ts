/**
 * Reads the comments of the policy content messages (`proto/svc/policy/v1/*.proto`) so the generated policy
 * forms can show each setting's documentation and group settings the way the .proto file does. The
 * embedded protobuf descriptors carry no comments, so the .proto text is the only source; running this at
 * build time keeps forms and protocol from drifting apart.
 *
 * Conventions read (the ones the policy .proto files follow):
 * - comment lines directly above a field document it;
 * - in a comment block that opens a new paragraph (after a blank line or the message's `{`), a short first
 *   line without closing punctuation ("Privacy and telemetry") is a group heading for the fields that follow;
 * - comment lines directly above `message X {` document the message.
 */

/** Documentation of one message. */
export interface MessageDocs {
  doc?: string;
  fields: Record<string, { doc?: string; group?: string }>;
}

/** Full message name (`svc.policy.v1.FirefoxPolicy`) → its docs. */
export type ProtoDocs = Record<string, MessageDocs>;

const FIELD = /^(?:optional\s+|repeated\s+)?(?:map\s*<[^>]+>|[A-Za-z_][\w.]*)\s+([a-z_][a-z0-9_]*)\s*=\s*\d+/;

/** Comment lines as text: lines of a paragraph joined by spaces, paragraphs by a blank line. */
function joinComment(lines: string[]): string {
  const paragraphs: string[][] = [[]];
  for (const line of lines) {
    if (line === "") paragraphs.push([]);
    else paragraphs[paragraphs.length - 1].push(line);
  }
  return paragraphs.filter((p) => p.length > 0).map((p) => p.join(" ")).join("\n\n");
}

function isHeading(line: string): boolean {
  return line.length > 0 && line.length <= 60 && !/[.:;)"]$/.test(line) && !line.startsWith('"');
}

/** Extracts the docs of every message in one .proto file. */
export function parseProtoDocs(text: string): ProtoDocs {
  const out: ProtoDocs = {};
  const pkg = /^package\s+([\w.]+)\s*;/m.exec(text)?.[1] ?? "";
  const stack: Array<{ kind: "message" | "enum" | "oneof" | "other"; name: string; group?: string }> = [];
  let comment: string[] = [];
  let paragraphStart = true;

  const currentMessage = () => {
    for (let i = stack.length - 1; i >= 0; i--) {
      if (stack[i].kind === "message") return stack[i];
      if (stack[i].kind === "enum" || stack[i].kind === "other") return undefined;
    }
    return undefined;
  };
  const fullName = () => [pkg, ...stack.filter((s) => s.kind === "message").map((s) => s.name)].join(".");

  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("//")) {
      comment.push(line.replace(/^\/\/\s?/, "").trim());
      continue;
    }
    if (line === "") {
      comment = [];
      paragraphStart = true;
      continue;
    }
    const open = /^(message|enum|oneof|service)\s+(\w+)\s*\{/.exec(line);
    if (open) {
      const kind = open[1] === "message"
        ? "message"
        : open[1] === "enum"
        ? "enum"
        : open[1] === "oneof"
        ? "oneof"
        : "other";
      stack.push({ kind, name: open[2] });
      if (kind === "message") {
        out[fullName()] = { ...(comment.length ? { doc: joinComment(comment) } : {}), fields: {} };
      }
      comment = [];
      paragraphStart = true;
      continue;
    }
    if (line.startsWith("}")) {
      stack.pop();
      comment = [];
      paragraphStart = false;
      continue;
    }
    const message = currentMessage();
    const field = FIELD.exec(line);
    if (message && field && !/^(reserved|option)\s/.test(line)) {
      let docLines = comment;
      if (paragraphStart && comment.length > 0 && isHeading(comment[0])) {
        message.group = comment[0];
        docLines = comment.slice(1);
      }
      const entry: { doc?: string; group?: string } = {};
      if (docLines.length) entry.doc = joinComment(docLines);
      if (message.group) entry.group = message.group;
      out[fullName()].fields[field[1]] = entry;
    }
    comment = [];
    paragraphStart = false;
  }
  return out;
}

/** Docs of every .proto file in `dir`, merged, keys sorted (stable output). */
export async function readProtoDocs(dir: URL): Promise<ProtoDocs> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (entry.isFile && entry.name.endsWith(".proto")) names.push(entry.name);
  }
  const all: ProtoDocs = {};
  for (const name of names.sort()) {
    Object.assign(all, parseProtoDocs(await Deno.readTextFile(new URL(name, dir))));
  }
  return Object.fromEntries(Object.keys(all).sort().map((k) => [k, all[k]]));
}
