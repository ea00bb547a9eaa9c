/**
 * The pure half of export and import: parsing and checking bundles, validating their policy content and
 * rendering exports. Nothing here touches the database, so the work runs in a worker
 * (`server/offloop/worker.ts`) and never holds up the server's event loop; `export_import.ts` does the database part.
 *
 * Work is bounded before the parser sees a byte: size, documents, flow nesting and an upper bound of the
 * keys and items. Duplicate keys are found with one set per mapping (linear), not by the parser's pairwise
 * comparison.
 */
import { isAlias, isMap, isScalar, parseAllDocuments, stringify, visit, type YAMLMap } from "yaml";
import { checkPolicyContent, getPolicyType } from "../../shared/policy_types/mod.ts";
import { jsonDepth, utf8Length } from "../../shared/policy_types/json_guard.ts";
import { multiLineText, singleLine } from "../../shared/policy_types/sanitizers.ts";
import { DomainError, type DomainFieldError, fieldsError, invalidError } from "../core/errors.ts";

/** Envelope version of every document. */
export const BUNDLE_API_VERSION = "svc.dev/v1";
/** Largest accepted bundle, in bytes. */
export const MAX_BUNDLE_BYTES = 1 << 20;
/** Most documents in one bundle. */
export const MAX_BUNDLE_DOCUMENTS = 200;
/** Deepest nesting of a bundle (envelope levels plus the content's own limit). */
export const MAX_BUNDLE_DEPTH = 40;
/**
 * Most keys and items in one YAML bundle, counted before parsing as lines plus flow separators and
 * brackets. 100,000 leaves room for 200 large policies; parsing that many takes about 2 s of a worker.
 */
export const MAX_BUNDLE_NODES = 100_000;

/** Bundle formats. */
export type BundleFormat = "yaml" | "json";

/** A Policy document of a bundle. */
export interface PolicyDoc {
  apiVersion: string;
  kind: "Policy";
  metadata: { name: string; displayName: string; description: string };
  spec: { type: string; content: unknown };
}

/** A PolicyBinding document of a bundle. */
export interface BindingDoc {
  apiVersion: string;
  kind: "PolicyBinding";
  metadata: { name: string };
  spec: { policy: string; nodeGroup: string; priority: number };
}

/** A checked bundle with every policy's content validated. */
export interface CheckedBundle {
  docs: (PolicyDoc | BindingDoc)[];
  /** Per document: the content's canonical form (what is stored), or the first validation problem. */
  contents: ({ canonical: string } | { problem: string } | null)[];
}

/** A policy row to export. */
export interface ExportPolicyRow {
  id: string;
  name: string;
  description: string;
  type: string;
  content: string;
}

/** A binding row to export. */
export interface ExportBindingRow {
  policy_id: string;
  group_name: string;
  priority: number;
}

/** Rendered export text, or the problems that prevent it. */
export interface RenderedExport {
  text: string;
  slugs: string[];
  problems: DomainFieldError[];
}

/** Lowercase slug: `[^a-z0-9]+` → `-`, trimmed, at most 63 characters, `policy` when nothing is left. */
export function slugify(name: string): string {
  const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 63)
    .replace(/-+$/, "");
  return slug || "policy";
}

function uniqueSlugs(names: readonly string[]): string[] {
  const used = new Set<string>();
  return names.map((name) => {
    const base = slugify(name);
    let slug = base;
    for (let n = 2; used.has(slug); n++) slug = `${base.slice(0, 60)}-${n}`;
    used.add(slug);
    return slug;
  });
}

/**
 * Renders policies (canonical content through each type's message) and bindings as a bundle. A policy of a type
 * this server does not know (accepted for forward compatibility) goes out with its content as stored: a
 * mapping when the text is a JSON object, the text itself otherwise, so one such record never blocks an
 * export. Content of a known type that no longer parses comes back as a problem: it could not be imported again.
 */
export function renderExport(
  policies: readonly ExportPolicyRow[],
  bindings: readonly ExportBindingRow[] | undefined,
  format: BundleFormat,
): RenderedExport {
  const problems: DomainFieldError[] = [];
  const slugs = uniqueSlugs(policies.map((p) => p.name));
  const docs: (PolicyDoc | BindingDoc)[] = policies.map((p, i) => {
    const def = getPolicyType(p.type);
    let content: unknown = {};
    if (!def) {
      content = storedContent(p.content);
    } else {
      try {
        content = JSON.parse(def.toCanonicalJson(def.parse(p.content, { ignoreUnknownFields: true })));
      } catch (err) {
        problems.push({
          field: `policies.${p.name}`,
          message: `content does not parse: ${(err as Error).message}`,
        });
      }
    }
    return {
      apiVersion: BUNDLE_API_VERSION,
      kind: "Policy",
      metadata: { name: slugs[i], displayName: p.name, description: p.description },
      spec: { type: p.type, content },
    };
  });
  if (problems.length > 0) return { text: "", slugs, problems };
  if (bindings) {
    const slugById = new Map(policies.map((p, i) => [p.id, slugs[i]]));
    const bindingSlugs = uniqueSlugs(bindings.map((b) => `${slugById.get(b.policy_id)}-${b.group_name}`));
    bindings.forEach((b, i) => {
      docs.push({
        apiVersion: BUNDLE_API_VERSION,
        kind: "PolicyBinding",
        metadata: { name: bindingSlugs[i] },
        spec: { policy: slugById.get(b.policy_id)!, nodeGroup: b.group_name, priority: b.priority },
      });
    });
  }
  const text = format === "json"
    ? JSON.stringify(docs, null, 2) + "\n"
    : docs.map((d) => stringify(d, { lineWidth: 0, aliasDuplicateObjects: false })).join("---\n");
  return { text, slugs, problems };
}

/** Unknown-type content as stored: the object when the text is a JSON object, else the text unchanged. */
function storedContent(text: string): unknown {
  try {
    const value = JSON.parse(text);
    if (isObject(value)) return value;
  } catch {
    // Not JSON: exported as the text it is.
  }
  return text;
}

/**
 * Policy content that passed validation (spec rules 1–5): the text as given and the text to store (canonical
 * protojson for a known type, the trimmed text for an unknown one). Made only by {@link checkContent}, here
 * or in a worker, so that whoever stores it does not validate it again.
 */
export interface CheckedContent {
  type: string;
  content: string;
  canonical: string;
}

/**
 * The one content check of the server: validates `content` for `type` and returns what to store. Throws
 * `invalid` naming the field (`content.…`).
 */
export function checkContent(type: string, content: string): CheckedContent {
  const { issues, canonical } = checkPolicyContent(type, content);
  if (issues.length > 0) throw fieldsError(issues, "content");
  return { type, content, canonical: canonical ?? content.trim() };
}

/** Parses a bundle and validates the content of every Policy document of a known type. */
export function checkBundle(text: string, format?: BundleFormat): CheckedBundle {
  const docs = parseBundle(text, format);
  const contents = docs.map((doc) => {
    if (doc.kind !== "Policy" || !getPolicyType(doc.spec.type)) return null;
    const json = JSON.stringify(doc.spec.content);
    const { issues, canonical } = checkPolicyContent(doc.spec.type, json);
    if (issues.length > 0) {
      const first = issues[0];
      return { problem: `spec.content${first.field ? `.${first.field}` : ""}: ${first.message}` };
    }
    return { canonical: canonical ?? json };
  });
  return { docs, contents };
}

/** Parses and checks the structure of a bundle (no database access, no limit beyond the bundle's own). */
export function parseBundle(text: string, format?: BundleFormat): (PolicyDoc | BindingDoc)[] {
  const bytes = utf8Length(text);
  if (bytes > MAX_BUNDLE_BYTES) {
    throw invalidError(`bundle is too large (${bytes} bytes); the limit is ${MAX_BUNDLE_BYTES} bytes`);
  }
  const trimmed = text.trimStart();
  const json = format === "json" ||
    (format === undefined && (trimmed.startsWith("[") || trimmed.startsWith("{")));
  const raw = json ? parseJsonBundle(text) : parseYamlBundle(text);
  if (raw.length === 0) throw invalidError("bundle contains no documents");
  if (raw.length > MAX_BUNDLE_DOCUMENTS) {
    throw invalidError(`bundle has ${raw.length} documents; the limit is ${MAX_BUNDLE_DOCUMENTS}`);
  }
  const problems: DomainFieldError[] = [];
  const docs = raw.map((value, i) => checkEnvelope(value, `documents[${i}]`, problems));
  if (problems.length > 0) throw fieldProblems("bundle is not valid", problems);
  return docs as (PolicyDoc | BindingDoc)[];
}

function parseJsonBundle(text: string): unknown[] {
  if (jsonDepth(text, MAX_BUNDLE_DEPTH) > MAX_BUNDLE_DEPTH) {
    throw invalidError(`bundle is nested too deeply; at most ${MAX_BUNDLE_DEPTH} levels are allowed`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw invalidError(`bundle is not valid JSON: ${(err as Error).message}`);
  }
  return Array.isArray(value) ? value : [value];
}

function parseYamlBundle(text: string): unknown[] {
  // Cheap scans first, so hostile input never reaches the parser: document separators and flow nesting.
  const separators = text.match(/^---/gm)?.length ?? 0;
  if (separators > MAX_BUNDLE_DOCUMENTS) {
    throw invalidError(
      `bundle has more than ${MAX_BUNDLE_DOCUMENTS} documents; the limit is ${MAX_BUNDLE_DOCUMENTS}`,
    );
  }
  if (flowDepth(text) > MAX_BUNDLE_DEPTH) {
    throw invalidError(`bundle is nested too deeply; at most ${MAX_BUNDLE_DEPTH} levels are allowed`);
  }
  const nodes = nodeEstimate(text);
  if (nodes > MAX_BUNDLE_NODES) {
    throw invalidError(
      `bundle has about ${nodes} keys and items; the limit is ${MAX_BUNDLE_NODES}: split it into smaller bundles`,
    );
  }
  // The parser's own duplicate-key check compares every key with every earlier one (quadratic: 30,000 keys
  // took seconds); keys are checked below with one set per mapping instead.
  const docs = parseAllDocuments(text, { uniqueKeys: false, prettyErrors: false });
  if (!Array.isArray(docs)) return [];
  const out: unknown[] = [];
  docs.forEach((doc, i) => {
    const at = `documents[${i}]`;
    if (doc.errors.length > 0) throw invalidError(`${at}: YAML syntax error: ${doc.errors[0].message}`);
    if (doc.warnings.length > 0) throw invalidError(`${at}: ${doc.warnings[0].message}`);
    let problem: string | undefined;
    visit(doc, {
      Node(_key, node, path) {
        if (isAlias(node)) problem = "YAML aliases are not allowed; write the value out";
        else if ("anchor" in node && node.anchor) {
          problem = "YAML anchors are not allowed; write the value out";
        } else if ("tag" in node && node.tag) problem = `YAML tags such as ${node.tag} are not allowed`;
        else if (path.length > MAX_BUNDLE_DEPTH * 2) {
          problem = `document is nested too deeply; at most ${MAX_BUNDLE_DEPTH} levels are allowed`;
        } else if (isMap(node)) problem = duplicateKey(node);
        return problem ? visit.BREAK : undefined;
      },
      Pair(_key, pair) {
        if (!isScalar(pair.key) || typeof pair.key.value !== "string") {
          problem = "mapping keys must be strings";
        }
        return problem ? visit.BREAK : undefined;
      },
    });
    if (problem) throw invalidError(`${at}: ${problem}`);
    if (doc.contents === null) return; // an empty document between separators
    out.push(doc.toJS({ maxAliasCount: 0 }));
  });
  return out;
}

/** The first key that a mapping repeats, found with one set (linear). */
function duplicateKey(map: YAMLMap): string | undefined {
  const seen = new Set<unknown>();
  for (const pair of map.items) {
    const key = isScalar(pair.key) ? pair.key.value : pair.key;
    if (seen.has(key)) return `map keys must be unique; "${String(key).slice(0, 80)}" appears twice`;
    seen.add(key);
  }
  return undefined;
}

/**
 * An upper bound of the keys and items in a YAML text, found in one pass before parsing: every line and every
 * flow separator or opening bracket can start at most one node.
 */
function nodeEstimate(text: string): number {
  let n = 1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x0a || c === 0x2c || c === 0x5b || c === 0x7b) n++;
  }
  return n;
}

/** Deepest `[`/`{` nesting outside quoted YAML scalars; stops counting past the limit. */
function flowDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let quote = "";
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quote) {
      if (quote === '"' && ch === "\\") i++;
      else if (ch === quote) quote = "";
    } else if ((ch === '"' || ch === "'") && (i === 0 || " \t\n[{,:-".includes(text[i - 1]))) {
      // A quote opens a quoted scalar only at the start of a token (not the apostrophe in "it's").
      quote = ch;
    } else if (ch === "[" || ch === "{") {
      max = Math.max(max, ++depth);
      if (max > MAX_BUNDLE_DEPTH) return max;
    } else if (ch === "]" || ch === "}") {
      depth--;
    }
  }
  return max;
}

const SLUG = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** Checks one document's envelope strictly (no unknown fields); returns it with defaults filled in. */
function checkEnvelope(
  value: unknown,
  at: string,
  problems: DomainFieldError[],
): PolicyDoc | BindingDoc | undefined {
  const fail = (field: string, message: string) => {
    problems.push({ field: field ? `${at}.${field}` : at, message });
    return undefined;
  };
  if (!isObject(value)) return fail("", "must be a mapping with apiVersion, kind, metadata and spec");
  const unknown = (obj: Record<string, unknown>, allowed: string[], prefix: string) => {
    for (const key of Object.keys(obj)) {
      if (!allowed.includes(key)) fail(prefix ? `${prefix}.${key}` : key, "is not a known field");
    }
  };
  unknown(value, ["apiVersion", "kind", "metadata", "spec"], "");
  if (value.apiVersion !== BUNDLE_API_VERSION) return fail("apiVersion", `must be ${BUNDLE_API_VERSION}`);
  const { kind, metadata, spec } = value;
  if (kind !== "Policy" && kind !== "PolicyBinding") {
    return fail("kind", 'must be "Policy" or "PolicyBinding"');
  }
  if (!isObject(metadata)) return fail("metadata", "must be a mapping");
  if (!isObject(spec)) return fail("spec", "must be a mapping");
  if (typeof metadata.name !== "string" || !SLUG.test(metadata.name)) {
    fail("metadata.name", "must be a slug: lowercase letters, digits and '-', at most 63 characters");
  }
  if (kind === "Policy") {
    unknown(metadata, ["name", "displayName", "description"], "metadata");
    unknown(spec, ["type", "content"], "spec");
    const displayName = metadata.displayName ?? metadata.name;
    if (typeof displayName !== "string" || displayName.length === 0 || displayName.length > 200) {
      fail("metadata.displayName", "must be text of 1 to 200 characters");
    } else {
      // The same rule as a name typed in the console: it is shown and logged, so no control characters.
      const bad = singleLine(displayName);
      if (bad) fail("metadata.displayName", bad);
    }
    if (metadata.description !== undefined && typeof metadata.description !== "string") {
      fail("metadata.description", "must be text");
    } else if (typeof metadata.description === "string") {
      const bad = multiLineText(metadata.description);
      if (bad) fail("metadata.description", bad);
    }
    if (typeof spec.type !== "string" || spec.type === "") return fail("spec.type", "is required");
    // Text content is what export writes for a type this server does not know whose content is not an object.
    const textAllowed = typeof spec.content === "string" && !getPolicyType(spec.type);
    if (!isObject(spec.content) && !textAllowed) {
      return fail("spec.content", "must be a mapping (the policy content)");
    }
    return {
      apiVersion: BUNDLE_API_VERSION,
      kind,
      metadata: {
        name: metadata.name as string,
        displayName: displayName as string,
        description: (metadata.description as string | undefined) ?? "",
      },
      spec: { type: spec.type, content: spec.content },
    };
  }
  unknown(metadata, ["name"], "metadata");
  unknown(spec, ["policy", "nodeGroup", "priority"], "spec");
  if (typeof spec.policy !== "string" || spec.policy === "") return fail("spec.policy", "is required");
  if (typeof spec.nodeGroup !== "string" || spec.nodeGroup === "") {
    return fail("spec.nodeGroup", "is required");
  }
  const priority = spec.priority ?? 0;
  if (!Number.isInteger(priority) || Math.abs(priority as number) > 1_000_000) {
    return fail("spec.priority", "must be an integer between -1000000 and 1000000");
  }
  return {
    apiVersion: BUNDLE_API_VERSION,
    kind,
    metadata: { name: metadata.name as string },
    spec: { policy: spec.policy, nodeGroup: spec.nodeGroup, priority: priority as number },
  };
}

/** An `invalid` error summarising field problems. */
export function fieldProblems(summary: string, problems: DomainFieldError[]): DomainError {
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more)` : "";
  return invalidError(`${summary}: ${problems[0].field}: ${problems[0].message}${more}`, problems);
}
