/**
 * Export and import of policies (and optionally their bindings) as YAML or JSON bundles.
 *
 * A bundle is a list of documents `{apiVersion: svc.dev/v1, kind: Policy | PolicyBinding, metadata, spec}`.
 * Export canonicalises content through the type's message and orders everything by name, so exporting the
 * same policies always gives the same bytes, and export → import → export is byte-identical. Import is
 * strict (unknown fields, unknown types, anchors, aliases and tags refused; size, document and depth limits),
 * validates every document before writing anything, and writes all or nothing in one transaction; a dry run
 * does the whole import and rolls it back.
 */
import { isAlias, isScalar, parseAllDocuments, stringify, visit } from "yaml";
import type { Db, Queryable } from "../db/db.ts";
import {
  canonicalPolicyContent,
  getPolicyType,
  validatePolicyContent,
} from "../../shared/policy_types/mod.ts";
import { jsonDepth, utf8Length } from "../../shared/policy_types/json_guard.ts";
import { createBinding } from "./bindings.ts";
import { DomainError, type DomainFieldError, forbiddenError, invalidError, notFoundError } from "./errors.ts";
import { createPolicy, findPolicyByName, type PolicyRecord, updatePolicy } from "./policies.ts";

/** Envelope version of every document. */
export const BUNDLE_API_VERSION = "svc.dev/v1";
/** Largest accepted bundle, in bytes. */
export const MAX_BUNDLE_BYTES = 1 << 20;
/** Most documents in one bundle. */
export const MAX_BUNDLE_DOCUMENTS = 200;
/** Deepest nesting of a bundle (envelope levels plus the content's own limit). */
export const MAX_BUNDLE_DEPTH = 40;

/** Bundle formats. */
export type BundleFormat = "yaml" | "json";
/** What import does when a policy (by name) or binding already exists. */
export type ConflictMode = "error" | "skip" | "new-version";

interface PolicyDoc {
  apiVersion: string;
  kind: "Policy";
  metadata: { name: string; displayName: string; description: string };
  spec: { type: string; content: unknown };
}

interface BindingDoc {
  apiVersion: string;
  kind: "PolicyBinding";
  metadata: { name: string };
  spec: { policy: string; nodeGroup: string; priority: number };
}

/** An exported bundle. */
export interface ExportedBundle {
  text: string;
  contentType: string;
  filename: string;
  policies: number;
  bindings: number;
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
 * Exports policies (all, or those in `ids`) and, when asked, their bindings. Content goes through the type's
 * message (canonical form). Refuses policies of types this server does not know and content that no longer
 * parses, naming them, because such a bundle could not be imported again.
 */
export async function exportBundle(
  q: Queryable,
  options: { ids?: readonly string[]; includeBindings?: boolean; format: BundleFormat },
): Promise<ExportedBundle> {
  const ids = options.ids && options.ids.length > 0 ? [...new Set(options.ids)] : undefined;
  const policies = await q.query<PolicyRecord>(
    `SELECT id, name, description, type, content FROM policies
     ${ids ? "WHERE id = ANY($1::uuid[])" : ""} ORDER BY name, id`,
    ids ? [ids] : [],
  );
  if (ids && policies.length !== ids.length) {
    const found = new Set(policies.map((p) => p.id));
    const missing = ids.filter((id) => !found.has(id));
    throw notFoundError(`policy ${missing.join(", ")}`);
  }
  if (policies.length === 0) throw new DomainError("not_found", "no policies to export");
  const problems: DomainFieldError[] = [];
  const slugs = uniqueSlugs(policies.map((p) => p.name));
  const docs: (PolicyDoc | BindingDoc)[] = policies.map((p, i) => {
    const def = getPolicyType(p.type);
    let content: unknown = {};
    if (!def) {
      problems.push({ field: `policies.${p.name}`, message: `type "${p.type}" is unknown to this server` });
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
  if (problems.length > 0) {
    throw invalidError(
      `cannot export ${problems.map((p) => p.field.slice("policies.".length)).join(", ")}: ${
        problems[0].message
      }; leave ${problems.length === 1 ? "it" : "them"} out with ids=`,
      problems,
    );
  }
  let bindingCount = 0;
  if (options.includeBindings) {
    const slugById = new Map(policies.map((p, i) => [p.id, slugs[i]]));
    const bindings = await q.query<
      { policy_id: string; policy_name: string; group_name: string; priority: number }
    >(
      `SELECT b.policy_id, p.name AS policy_name, g.name AS group_name, b.priority
       FROM policy_bindings b JOIN policies p ON p.id = b.policy_id JOIN node_groups g ON g.id = b.node_group_id
       WHERE b.policy_id = ANY($1::uuid[]) ORDER BY p.name, g.name`,
      [policies.map((p) => p.id)],
    );
    const bindingSlugs = uniqueSlugs(bindings.map((b) => `${slugById.get(b.policy_id)}-${b.group_name}`));
    bindings.forEach((b, i) => {
      docs.push({
        apiVersion: BUNDLE_API_VERSION,
        kind: "PolicyBinding",
        metadata: { name: bindingSlugs[i] },
        spec: { policy: slugById.get(b.policy_id)!, nodeGroup: b.group_name, priority: b.priority },
      });
    });
    bindingCount = bindings.length;
  }
  const text = options.format === "json"
    ? JSON.stringify(docs, null, 2) + "\n"
    : docs.map((d) => stringify(d, { lineWidth: 0, aliasDuplicateObjects: false })).join("---\n");
  const base = policies.length === 1 ? slugs[0] : "svc-policies";
  return {
    text,
    contentType: options.format === "json" ? "application/json" : "application/yaml",
    filename: `${base}.${options.format}`,
    policies: policies.length,
    bindings: bindingCount,
  };
}

/** Outcome of one document. */
export interface ImportResult {
  /** Index of the document in the bundle (0-based). */
  doc: number;
  kind: string;
  name: string;
  status: "created" | "updated" | "skipped" | "error";
  message: string;
}

/** Report of an import (or dry run). */
export interface ImportReport {
  ok: boolean;
  dry_run: boolean;
  created: number;
  updated: number;
  skipped: number;
  errors: number;
  results: ImportResult[];
}

/** Options of {@link importBundle}. */
export interface ImportOptions {
  format?: BundleFormat;
  onConflict?: ConflictMode;
  dryRun?: boolean;
  createdBy: string;
  /** Whether the caller may create bindings (bundles with PolicyBinding documents need it). */
  mayCreateBindings: boolean;
}

class Rollback extends Error {
  constructor(readonly report: ImportReport) {
    super("rollback");
  }
}

/**
 * Imports a bundle in one transaction: nothing is written unless every document imports cleanly, and a dry
 * run rolls back even then. Structural problems (size, syntax, envelope) throw `invalid` naming the document
 * and field; per-document problems come back in the report with `ok: false`.
 */
export async function importBundle(
  db: Pick<Db, "transaction">,
  text: string,
  options: ImportOptions,
): Promise<ImportReport> {
  const docs = parseBundle(text, options.format);
  if (!options.mayCreateBindings && docs.some((d) => d.kind === "PolicyBinding")) {
    throw forbiddenError(
      "importing bindings needs the binding:create permission; remove the PolicyBinding documents or ask for the permission",
    );
  }
  try {
    return await db.transaction(async (tx) => {
      const report = await applyBundle(tx, docs, options);
      if (!report.ok || options.dryRun) throw new Rollback(report);
      return report;
    });
  } catch (err) {
    if (err instanceof Rollback) return err.report;
    throw err;
  }
}

/** Parses and checks the structure of a bundle (no database access). */
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
  const docs = parseAllDocuments(text, { uniqueKeys: true, prettyErrors: false });
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
        }
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
    }
    if (metadata.description !== undefined && typeof metadata.description !== "string") {
      fail("metadata.description", "must be text");
    }
    if (typeof spec.type !== "string" || spec.type === "") return fail("spec.type", "is required");
    if (!isObject(spec.content)) return fail("spec.content", "must be a mapping (the policy content)");
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

function fieldProblems(summary: string, problems: DomainFieldError[]): DomainError {
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more)` : "";
  return invalidError(`${summary}: ${problems[0].field}: ${problems[0].message}${more}`, problems);
}

/** Validates every document against the database, then writes them; per-document problems go to the report. */
async function applyBundle(
  tx: Queryable,
  docs: (PolicyDoc | BindingDoc)[],
  options: ImportOptions,
): Promise<ImportReport> {
  const mode = options.onConflict ?? "error";
  const results: ImportResult[] = [];
  const error = (doc: number, kind: string, name: string, message: string) =>
    results.push({ doc, kind, name, status: "error", message });

  // Pass 1: everything that can be checked without writing.
  const slugs = new Map<string, number>();
  const names = new Map<string, number>();
  const contents = new Map<number, string>();
  docs.forEach((doc, i) => {
    if (doc.kind !== "Policy") return;
    const name = doc.metadata.displayName;
    if (slugs.has(doc.metadata.name)) {
      error(i, doc.kind, name, `metadata.name "${doc.metadata.name}" is used twice`);
    }
    if (names.has(name)) error(i, doc.kind, name, `a policy named "${name}" appears twice in the bundle`);
    slugs.set(doc.metadata.name, i);
    names.set(name, i);
    if (!getPolicyType(doc.spec.type)) {
      error(
        i,
        doc.kind,
        name,
        `policy type "${doc.spec.type}" is unknown to this server; it cannot be imported`,
      );
      return;
    }
    const content = JSON.stringify(doc.spec.content);
    const issues = validatePolicyContent(doc.spec.type, content);
    if (issues.length > 0) {
      const first = issues[0];
      error(i, doc.kind, name, `spec.content${first.field ? `.${first.field}` : ""}: ${first.message}`);
      return;
    }
    contents.set(i, content);
  });
  const groups = new Map(
    (await tx.query<{ id: string; name: string }>("SELECT id, name FROM node_groups")).map((
      g,
    ) => [g.name, g.id]),
  );
  const bindingKeys = new Set<string>();
  for (const [i, doc] of docs.entries()) {
    if (doc.kind !== "PolicyBinding") continue;
    const label = `${doc.spec.policy} → ${doc.spec.nodeGroup}`;
    if (!groups.has(doc.spec.nodeGroup)) {
      error(i, doc.kind, label, `node group "${doc.spec.nodeGroup}" does not exist; create it first`);
    }
    if (!slugs.has(doc.spec.policy) && !(await findPolicyByName(tx, doc.spec.policy))) {
      error(
        i,
        doc.kind,
        label,
        `policy "${doc.spec.policy}" is neither in the bundle nor an existing policy name`,
      );
    }
    const key = `${doc.spec.policy}\u0000${doc.spec.nodeGroup}`;
    if (bindingKeys.has(key)) error(i, doc.kind, label, "the same binding appears twice in the bundle");
    bindingKeys.add(key);
  }
  if (results.length > 0) return summarize(results, options);

  // Pass 2: write, in document order (policies first so bindings can refer to them).
  const policyIds = new Map<string, string>();
  for (const [i, doc] of docs.entries()) {
    if (doc.kind !== "Policy") continue;
    const name = doc.metadata.displayName;
    const content = contents.get(i)!;
    const existing = await findPolicyByName(tx, name);
    if (!existing) {
      const created = await createPolicy(tx, {
        name,
        description: doc.metadata.description,
        type: doc.spec.type,
        content,
        createdBy: options.createdBy,
      });
      policyIds.set(doc.metadata.name, created.id);
      results.push({
        doc: i,
        kind: doc.kind,
        name,
        status: "created",
        message: "created as draft, version 1",
      });
      continue;
    }
    policyIds.set(doc.metadata.name, existing.id);
    if (mode === "error") {
      error(
        i,
        doc.kind,
        name,
        `a policy named "${name}" already exists; import with on_conflict=skip or new-version`,
      );
    } else if (mode === "skip") {
      results.push({
        doc: i,
        kind: doc.kind,
        name,
        status: "skipped",
        message: "a policy with this name exists",
      });
    } else if (existing.type !== doc.spec.type) {
      error(
        i,
        doc.kind,
        name,
        `existing policy has type ${existing.type}, the bundle has ${doc.spec.type}; types never change`,
      );
    } else if (existing.state !== "draft") {
      error(
        i,
        doc.kind,
        name,
        `existing policy is ${existing.state}; move it to draft first or import with on_conflict=skip`,
      );
    } else if (
      existing.content === canonicalPolicyContent(doc.spec.type, content) &&
      existing.description === doc.metadata.description
    ) {
      results.push({ doc: i, kind: doc.kind, name, status: "skipped", message: "already up to date" });
    } else {
      const updated = await updatePolicy(tx, existing.id, { description: doc.metadata.description, content });
      results.push({
        doc: i,
        kind: doc.kind,
        name,
        status: "updated",
        message: `now version ${updated.version}`,
      });
    }
  }
  for (const [i, doc] of docs.entries()) {
    if (doc.kind !== "PolicyBinding") continue;
    const label = `${doc.spec.policy} → ${doc.spec.nodeGroup}`;
    const policyId = policyIds.get(doc.spec.policy) ?? (await findPolicyByName(tx, doc.spec.policy))!.id;
    const groupId = groups.get(doc.spec.nodeGroup)!;
    const existing = await tx.query(
      "SELECT 1 FROM policy_bindings WHERE policy_id = $1 AND node_group_id = $2",
      [policyId, groupId],
    );
    if (existing.length > 0) {
      if (mode === "error") {
        error(i, doc.kind, label, "this binding already exists; import with on_conflict=skip");
      } else {results.push({
          doc: i,
          kind: doc.kind,
          name: label,
          status: "skipped",
          message: "binding exists; left unchanged",
        });}
      continue;
    }
    await createBinding(tx, { policyId, nodeGroupId: groupId, priority: doc.spec.priority });
    results.push({ doc: i, kind: doc.kind, name: label, status: "created", message: "created disabled" });
  }
  return summarize(results, options);
}

function summarize(results: ImportResult[], options: ImportOptions): ImportReport {
  results.sort((a, b) => a.doc - b.doc);
  const count = (status: ImportResult["status"]) => results.filter((r) => r.status === status).length;
  const errors = count("error");
  return {
    ok: errors === 0,
    dry_run: options.dryRun ?? false,
    created: errors === 0 ? count("created") : 0,
    updated: errors === 0 ? count("updated") : 0,
    skipped: errors === 0 ? count("skipped") : 0,
    errors,
    results,
  };
}
