/**
 * Export and import of policies (and optionally their bindings) as YAML or JSON bundles.
 *
 * A bundle is a list of documents `{apiVersion: svc.dev/v1, kind: Policy | PolicyBinding, metadata, spec}`.
 * Export canonicalises content through the type's message and orders everything by name, so exporting the
 * same policies always gives the same bytes, and export → import → export is byte-identical. Import is
 * strict (unknown fields, anchors, aliases and tags refused; size, document and depth limits; a policy of an
 * unknown type is left out and reported, with its bindings),
 * validates every document before writing anything, and writes all or nothing in one transaction; a dry run
 * does the whole import and rolls it back. Parsing, content validation and rendering run in a worker
 * (`server/domain/content_offloop.ts`), so a large or hostile bundle never holds up other requests, and content checked there
 * is stored without being checked again; this module does the database part.
 */
import type { Db, Queryable } from "../db/db.ts";
import { getPolicyType } from "../../shared/policy_types/mod.ts";
import {
  type BindingDoc,
  type BundleFormat,
  type CheckedBundle,
  type CheckedContent,
  type ExportBindingRow,
  type ExportPolicyRow,
  type PolicyDoc,
} from "./bundle_codec.ts";
import { checkBundleOffLoop, renderExportOffLoop } from "./content_offloop.ts";
import { createBinding } from "./bindings.ts";
import { DomainError, forbiddenError, invalidError, notFoundError } from "../core/errors.ts";
import { createPolicy, findPolicyByName, type PolicyRecord, updatePolicy } from "./policies.ts";

export {
  BUNDLE_API_VERSION,
  type BundleFormat,
  MAX_BUNDLE_BYTES,
  MAX_BUNDLE_DEPTH,
  MAX_BUNDLE_DOCUMENTS,
  MAX_BUNDLE_NODES,
  parseBundle,
  slugify,
} from "./bundle_codec.ts";

/** What import does when a policy (by name) or binding already exists. */
export type ConflictMode = "error" | "skip" | "new-version";

/** An exported bundle. */
export interface ExportedBundle {
  text: string;
  contentType: string;
  filename: string;
  policies: number;
  bindings: number;
}

/**
 * Exports policies (all, or those in `ids`) and, when asked, their bindings. Content goes through the type's
 * message (canonical form); a policy of a type this server does not know goes out as stored. Refuses content of
 * a known type that no longer parses, naming it, because such a bundle could not be imported again.
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
  let bindings: ExportBindingRow[] | undefined;
  if (options.includeBindings) {
    bindings = await q.query<ExportBindingRow>(
      `SELECT b.policy_id, g.name AS group_name, b.priority
       FROM policy_bindings b JOIN policies p ON p.id = b.policy_id JOIN node_groups g ON g.id = b.node_group_id
       WHERE b.policy_id = ANY($1::uuid[]) ORDER BY p.name, g.name`,
      [policies.map((p) => p.id)],
    );
  }
  const rendered = await renderExportOffLoop({
    policies: policies.map((p): ExportPolicyRow => ({
      id: p.id,
      name: p.name,
      description: p.description,
      type: p.type,
      content: p.content,
    })),
    bindings,
    format: options.format,
  });
  const problems = rendered.problems;
  if (problems.length > 0) {
    throw invalidError(
      `cannot export ${problems.map((p) => p.field.slice("policies.".length)).join(", ")}: ${
        problems[0].message
      }; leave ${problems.length === 1 ? "it" : "them"} out with ids=`,
      problems,
    );
  }
  const base = policies.length === 1 ? rendered.slugs[0] : "svc-policies";
  return {
    text: rendered.text,
    contentType: options.format === "json" ? "application/json" : "application/yaml",
    filename: `${base}.${options.format}`,
    policies: policies.length,
    bindings: bindings?.length ?? 0,
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
 * Parses a bundle and validates every policy's content in a worker (no database access). Structural problems
 * (size, syntax, envelope) throw `invalid` naming the document and field. The import route calls this before
 * its unit of work opens, so no database connection waits on the parse.
 */
export async function checkBundleText(text: string, format?: BundleFormat): Promise<CheckedBundle> {
  return await checkBundleOffLoop({ text, format });
}

/**
 * Imports a bundle (its text, or what {@link checkBundleText} made of it) in one transaction: nothing is
 * written unless every document imports cleanly, and a dry run rolls back even then. Structural problems
 * (size, syntax, envelope) throw `invalid` naming the document and field; per-document problems come back in
 * the report with `ok: false`.
 */
export async function importBundle(
  db: Pick<Db, "transaction">,
  bundle: string | CheckedBundle,
  options: ImportOptions,
): Promise<ImportReport> {
  const checked = typeof bundle === "string" ? await checkBundleText(bundle, options.format) : bundle;
  const docs = checked.docs;
  if (!options.mayCreateBindings && docs.some((d) => d.kind === "PolicyBinding")) {
    throw forbiddenError(
      "importing bindings needs the binding:create permission; remove the PolicyBinding documents or ask for the permission",
    );
  }
  try {
    return await db.transaction(async (tx) => {
      const report = await applyBundle(tx, checked, options);
      if (!report.ok || options.dryRun) throw new Rollback(report);
      return report;
    });
  } catch (err) {
    if (err instanceof Rollback) return err.report;
    throw err;
  }
}

/** Validates every document against the database, then writes them; per-document problems go to the report. */
async function applyBundle(
  tx: Queryable,
  checked: CheckedBundle,
  options: ImportOptions,
): Promise<ImportReport> {
  const docs: (PolicyDoc | BindingDoc)[] = checked.docs;
  const mode = options.onConflict ?? "error";
  const results: ImportResult[] = [];
  const error = (doc: number, kind: string, name: string, message: string) =>
    results.push({ doc, kind, name, status: "error", message });

  // Pass 1: everything that can be checked without writing.
  const slugs = new Map<string, number>();
  const names = new Map<string, number>();
  const contents = new Map<number, { canonical: string }>();
  // Documents left out on purpose: policies of unknown types and the bindings that refer to them.
  const refused: ImportResult[] = [];
  const unknownSlugs = new Set<string>();
  for (const [i, doc] of docs.entries()) {
    if (doc.kind !== "Policy") continue;
    const name = doc.metadata.displayName;
    if (slugs.has(doc.metadata.name)) {
      error(i, doc.kind, name, `metadata.name "${doc.metadata.name}" is used twice`);
    }
    if (names.has(name)) error(i, doc.kind, name, `a policy named "${name}" appears twice in the bundle`);
    slugs.set(doc.metadata.name, i);
    names.set(name, i);
    if (!getPolicyType(doc.spec.type)) {
      // Spec: import rejects types whose content message this server does not know (their content cannot be
      // checked). The document is refused alone, so one such record never blocks the rest of a bundle.
      unknownSlugs.add(doc.metadata.name);
      refused.push({
        doc: i,
        kind: doc.kind,
        name,
        status: "skipped",
        message:
          `not imported: policy type "${doc.spec.type}" is unknown to this server; import it into a server that knows the type`,
      });
      continue;
    }
    const checkedContent = checked.contents[i];
    if (!checkedContent || "problem" in checkedContent) {
      error(i, doc.kind, name, checkedContent?.problem ?? "spec.content could not be checked");
      continue;
    }
    contents.set(i, checkedContent);
  }
  const groups = new Map(
    (await tx.query<{ id: string; name: string }>("SELECT id, name FROM node_groups")).map((
      g,
    ) => [g.name, g.id]),
  );
  const bindingKeys = new Set<string>();
  for (const [i, doc] of docs.entries()) {
    if (doc.kind !== "PolicyBinding") continue;
    const label = `${doc.spec.policy} → ${doc.spec.nodeGroup}`;
    if (unknownSlugs.has(doc.spec.policy)) {
      refused.push({
        doc: i,
        kind: doc.kind,
        name: label,
        status: "skipped",
        message:
          `not imported: policy "${doc.spec.policy}" was not imported (its type is unknown to this server)`,
      });
      continue;
    }
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
  if (results.length > 0) return summarize([...results, ...refused], options);
  results.push(...refused);

  // Pass 2: write, in document order (policies first so bindings can refer to them).
  const policyIds = new Map<string, string>();
  for (const [i, doc] of docs.entries()) {
    if (doc.kind !== "Policy" || unknownSlugs.has(doc.metadata.name)) continue;
    // An embedded database answers without giving timers a turn: let other requests in between documents.
    await yieldToLoop();
    const name = doc.metadata.displayName;
    // Checked in the worker already, which answers only the canonical form (the text as written in the bundle
    // is not stored, and sending both would cost the loop a copy of each): the policy domain stores it
    // without checking it again.
    const { canonical } = contents.get(i)!;
    const content = canonical;
    const checkedContent: CheckedContent = { type: doc.spec.type, content, canonical };
    const existing = await findPolicyByName(tx, name);
    if (!existing) {
      const created = await createPolicy(tx, {
        name,
        description: doc.metadata.description,
        type: doc.spec.type,
        content,
        createdBy: options.createdBy,
        checked: checkedContent,
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
      existing.content === canonical &&
      existing.description === doc.metadata.description
    ) {
      results.push({ doc: i, kind: doc.kind, name, status: "skipped", message: "already up to date" });
    } else {
      const updated = await updatePolicy(tx, existing.id, {
        description: doc.metadata.description,
        content,
        checked: checkedContent,
      });
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
    if (doc.kind !== "PolicyBinding" || unknownSlugs.has(doc.spec.policy)) continue;
    await yieldToLoop();
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

/** Lets timers, I/O and other requests run before the next step. */
function yieldToLoop(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
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
