/**
 * REST routes for policies: list, read, create, update, state change, deprecation, delete, the registry of
 * policy types, and export/import bundles. Handlers only translate HTTP to the domain (server/domain/).
 */
import type { ServerContext } from "../../context.ts";
import {
  changePolicyState,
  createPolicy,
  deletePolicy,
  deprecatePolicy,
  getPolicy,
  getPolicySummary,
  listPolicies,
  POLICY_SORT_COLUMNS,
  POLICY_STATES,
  type PolicyState,
  updatePolicy,
} from "../../domain/policies.ts";
import {
  discardRevision,
  duplicatePolicy,
  findRevision,
  getRevision,
  releaseRevision,
  saveRevision,
} from "../../domain/policy_revisions.ts";
import {
  type BundleFormat,
  checkBundleText,
  type ConflictMode,
  exportBundle,
  importBundle,
  MAX_BUNDLE_BYTES,
} from "../../domain/export_import.ts";
import type { CheckedBundle, CheckedContent } from "../../domain/bundle_codec.ts";
import { checkContentOffLoop, INLINE_CONTENT_LENGTH, precheckContent } from "../../domain/content_offloop.ts";
import { getPolicyType, listPolicyTypes, MAX_CONTENT_BYTES } from "../../../shared/policy_types/mod.ts";
import { dryRunScripts } from "../../domain/scripts_policy.ts";
import { caContentSigner } from "../../pki/content_signer.ts";
import { forbidden, HttpError } from "../errors.ts";
import { closedObject, type JsonSchema, objectSchema, UUID_SCHEMA } from "../json_schema.ts";
import { listQuery, listRequest, pageSchema } from "../pagination.ts";
import {
  auditResource,
  body,
  caller,
  callerEvent,
  created,
  prepared,
  queryBool,
  respondJson,
  type RouteContext,
  type RouteSpec,
  uuidParam,
} from "../route.ts";
import { auditChanges } from "../audit_changes.ts";
import {
  changeById,
  DATE_TIME,
  LOCKOUT_REASON,
  NAME_PATTERN,
  noContent,
  readById,
  TEXT_PATTERN,
} from "./common.ts";
import type { RawBodyRoute } from "../openapi.ts";
import { policiesRoute as route } from "./tags.ts";
import { readCapped } from "../body_limit.ts";

const TYPE_SCHEMA: JsonSchema = {
  type: "string",
  pattern: "^[A-Z][A-Za-z0-9]{0,63}$",
  description: "Policy type wire name, e.g. Firefox (unknown types are accepted for forward compatibility)",
};
const NAME: JsonSchema = { type: "string", minLength: 1, maxLength: 200, pattern: NAME_PATTERN };
const DESCRIPTION: JsonSchema = { type: "string", maxLength: 4000, pattern: TEXT_PATTERN };
const CONTENT: JsonSchema = {
  type: "string",
  maxLength: MAX_CONTENT_BYTES,
  description: "protojson of the type's content message (json_name or snake_case field names)",
};

const POLICY_SUMMARY_PROPERTIES: Record<string, JsonSchema> = {
  id: UUID_SCHEMA,
  name: { type: "string" },
  description: { type: "string" },
  type: { type: "string" },
  version: { type: "integer", minimum: 1 },
  state: { type: "string", enum: POLICY_STATES },
  deprecated: { type: "boolean" },
  deprecated_at: { type: ["string", "null"], format: "date-time" },
  deprecation_message: { type: "string" },
  replacement_policy_id: { type: ["string", "null"], format: "uuid" },
  created_by: { type: "string" },
  created_at: DATE_TIME,
  updated_at: DATE_TIME,
  bindings_count: { type: "integer" },
  enabled_bindings_count: { type: "integer" },
  revision_pending: {
    type: "boolean",
    description: "A revision of this released policy is being prepared (GET …/revision)",
  },
};

/** A policy record in responses. */
export const POLICY_SCHEMA: JsonSchema = objectSchema({
  ...POLICY_SUMMARY_PROPERTIES,
  content: { type: "string" },
});
const POLICY_SUMMARY_SCHEMA: JsonSchema = objectSchema(POLICY_SUMMARY_PROPERTIES);

/** The pending revision of a released policy in responses. */
export const REVISION_SCHEMA: JsonSchema = objectSchema({
  restored_from: {
    type: ["integer", "null"],
    description: "The released version whose content this revision restores (until its content is edited)",
  },
  policy_id: UUID_SCHEMA,
  base_version: { type: "integer", minimum: 1, description: "Released version the revision started from" },
  description: { type: "string" },
  content: { type: "string", description: "protojson of the type's content message (canonical form)" },
  created_by: { type: "string" },
  created_at: DATE_TIME,
  updated_at: DATE_TIME,
});

const IMPORT_REPORT_SCHEMA: JsonSchema = {
  type: "object",
  required: ["ok", "dry_run", "created", "updated", "skipped", "errors", "results"],
  properties: {
    ok: { type: "boolean" },
    dry_run: { type: "boolean" },
    created: { type: "integer" },
    updated: { type: "integer" },
    skipped: { type: "integer" },
    errors: { type: "integer" },
    results: {
      type: "array",
      items: objectSchema({
        doc: { type: "integer", description: "0-based index of the document in the bundle" },
        kind: { type: "string", enum: ["Policy", "PolicyBinding"] },
        name: { type: "string" },
        status: { type: "string", enum: ["created", "updated", "skipped", "error"] },
        message: { type: "string" },
      }),
    },
  },
};

/**
 * Refuses (403) a caller who lacks the extra permission a type asks for creating or editing its policies
 * (Scripts: `policy:edit_scripts`, because its content runs as root on every node it reaches).
 */
function assertMayAuthor(c: RouteContext, type: string): void {
  const needed = getPolicyType(type)?.editPermission;
  if (needed && !caller(c).permissions.has(needed)) {
    throw forbidden(`permission ${needed} is required to create or edit a ${type} policy`);
  }
}

/**
 * The checks of edited content that run before the unit of work opens: the type's scripts are dry-run, and
 * large content is validated in a worker (its result goes to the handler; small content is validated inline
 * by the domain, as before).
 */
async function checkEditedContent(
  type: string,
  content: string | undefined,
): Promise<CheckedContent | undefined> {
  if (content === undefined) return undefined;
  await dryRunScripts(type, content);
  if (content.length <= INLINE_CONTENT_LENGTH) return undefined;
  return await checkContentOffLoop(type, content);
}

/** Routes of the policy area. */
export function policyRoutes(ctx: ServerContext): RouteSpec[] {
  const { db } = ctx;
  const importRoute: RouteSpec & RawBodyRoute = route("POST /api/v1/policies/import", "policy:create", {
    summary:
      "Import a YAML or JSON bundle of policies (and bindings). All or nothing; dry_run=true validates and rolls back. Bindings in the bundle also need binding:create.",
    audit: { resourceType: "policy", action: "policy.import" },
    query: {
      dry_run: { type: "boolean", description: "Validate and report without writing" },
      on_conflict: {
        type: "string",
        enum: ["error", "skip", "new-version"],
        description:
          "What to do when a policy with the same name exists (new-version: drafts only, same type)",
      },
      format: { type: "string", enum: ["yaml", "json"], description: "Bundle format (default: detected)" },
    },
    rawBody: {
      description: `A bundle (at most ${MAX_BUNDLE_BYTES} bytes): YAML documents or a JSON array`,
      contentTypes: ["application/yaml", "application/json"],
    },
    responses: {
      "200": {
        description: "Import report (nothing was written when dry_run is true)",
        schema: IMPORT_REPORT_SCHEMA,
      },
    },
    // Upload, parse and content checks (in a worker) before the unit of work opens: no connection waits.
    prepare: async (c) => {
      const checked = await checkBundleText(
        await readLimitedText(c, MAX_BUNDLE_BYTES),
        c.req.query("format") as BundleFormat | undefined ?? formatFromContentType(c),
      );
      for (const [i, doc] of checked.docs.entries()) {
        if (doc.kind !== "Policy") continue;
        assertMayAuthor(c, doc.spec.type);
        const content = checked.contents[i];
        if (content && "canonical" in content) await dryRunScripts(doc.spec.type, content.canonical);
      }
      return checked;
    },
    handler: async (c) => {
      const user = caller(c);
      const dryRun = queryBool(c, "dry_run") ?? false;
      const report = await importBundle(db, prepared<CheckedBundle>(c), {
        onConflict: (c.req.query("on_conflict") ?? "error") as ConflictMode,
        dryRun,
        createdBy: user.username,
        mayCreateBindings: user.permissions.has("binding:create"),
      });
      c.set("auditDetails", {
        dry_run: dryRun,
        created: report.created,
        updated: report.updated,
        skipped: report.skipped,
        errors: report.errors,
      });
      if (!report.ok) {
        const failed = report.results.filter((r) => r.status === "error");
        throw new HttpError(
          422,
          "validation_failed",
          `import refused, nothing was written: ${failed[0].name}: ${failed[0].message}${
            failed.length > 1 ? ` (and ${failed.length - 1} more)` : ""
          }`,
          failed.map((r) => ({ field: `documents[${r.doc}]`, message: `${r.name}: ${r.message}` })),
        );
      }
      return c.json(report);
    },
  });

  return [
    route("GET /api/v1/policies/all", "policy:view", {
      summary: "List policies (without content), filtered, sorted and paginated",
      query: {
        ...listQuery(POLICY_SORT_COLUMNS),
        state: { type: "string", enum: POLICY_STATES },
        type: TYPE_SCHEMA,
        name: { type: "string", maxLength: 200, description: "Case-insensitive substring of the name" },
        deprecated: { type: "boolean" },
      },
      responses: { "200": { description: "A page of policies", schema: pageSchema(POLICY_SUMMARY_SCHEMA) } },
      handler: async (c) =>
        c.json(
          await listPolicies(db, {
            state: c.req.query("state") as PolicyState | undefined,
            type: c.req.query("type"),
            name: c.req.query("name"),
            deprecated: queryBool(c, "deprecated"),
          }, listRequest(c)),
        ),
    }),
    route("POST /api/v1/policies/all", "policy:create", {
      summary: "Create a policy (draft, version 1); its content is validated for the type",
      audit: { resourceType: "policy" },
      body: closedObject({ name: NAME, description: DESCRIPTION, type: TYPE_SCHEMA, content: CONTENT }, [
        "name",
        "type",
        "content",
      ]),
      responses: { "201": { description: "The created policy", schema: POLICY_SCHEMA } },
      // Content is checked before the unit of work opens; large content in a worker (server/domain/content_offloop.ts).
      prepare: async (c) => {
        const input = body<{ name: string; type: string; content: string }>(c);
        auditResource(c, { name: input.name });
        assertMayAuthor(c, input.type);
        const checked = await checkContentOffLoop(input.type, input.content);
        await dryRunScripts(input.type, checked.canonical);
        return checked;
      },
      handler: (c) => {
        const input = body<{ name: string; description?: string; type: string; content: string }>(c);
        const checked = prepared<CheckedContent>(c);
        return created(c, {
          name: input.name,
          create: () =>
            db.transaction((tx) => createPolicy(tx, { ...input, createdBy: caller(c).username, checked })),
        });
      },
    }),
    route("GET /api/v1/policies/all/:id", "policy:view", {
      summary: "Read a policy with its content",
      responses: { "200": { description: "The policy", schema: POLICY_SCHEMA } },
      handler: readById(db, getPolicy),
    }),
    route("PUT /api/v1/policies/all/:id", "policy:edit", {
      summary:
        "Edit a draft policy (bumps its version); give `version` to refuse the edit if someone else changed it",
      audit: { resourceType: "policy" },
      body: closedObject({
        name: NAME,
        description: DESCRIPTION,
        type: TYPE_SCHEMA,
        content: CONTENT,
        version: {
          type: "integer",
          minimum: 1,
          description: "Expected current version (lost-update guard)",
        },
      }),
      responses: { "200": { description: "The updated policy", schema: POLICY_SCHEMA } },
      // Large content is checked in a worker before the unit of work opens (small content inline, as before).
      prepare: async (c) => {
        const input = body<{ type?: string; content?: string }>(c);
        const stored = (await getPolicySummary(db, uuidParam(c, "id"))).type;
        assertMayAuthor(c, stored);
        if (input.type) assertMayAuthor(c, input.type);
        return await checkEditedContent(input.type ?? stored, input.content);
      },
      handler: changeById(db, (tx, id, c) => {
        const input = body<
          { name?: string; description?: string; type?: string; content?: string; version?: number }
        >(c);
        const checked = prepared<CheckedContent | undefined>(c);
        return updatePolicy(tx, id, { ...input, expectedVersion: input.version, checked });
      }, {
        track: {
          read: getPolicy,
          fields: ["name", "description", "type", "content", "version"],
          contentFields: ["content"],
        },
      }),
    }),
    route("DELETE /api/v1/policies/all/:id", "policy:delete", {
      summary: "Delete a policy and its disabled bindings (refused while enabled bindings exist)",
      audit: { resourceType: "policy" },
      responses: { "204": { description: "Deleted" } },
      handler: changeById(db, deletePolicy, { respond: noContent }),
    }),
    route("PUT /api/v1/policies/all/:id/state", "policy:view", {
      summary:
        "Change the state (draft → released → archived, released/archived → draft). Releasing needs policy:release (a reviewer need not be an editor); archiving or moving to draft needs policy:edit. Both are checked by the handler once the target state is known.",
      audit: { resourceType: "policy", action: "policy.state_change" },
      body: closedObject({
        state: { type: "string", enum: POLICY_STATES },
        lockout_reason: LOCKOUT_REASON,
      }, ["state"]),
      responses: { "200": { description: "The policy in its new state", schema: POLICY_SCHEMA } },
      // Releasing large content: checked in a worker before the unit of work opens. Invalid content is left
      // to the release itself, which refuses it with its own message; so is a caller who may not release.
      prepare: async (c) => {
        if (body<{ state: PolicyState }>(c).state !== "released") return undefined;
        if (!caller(c).permissions.has("policy:release")) return undefined;
        const current = await getPolicy(db, uuidParam(c, "id"));
        return await precheckContent(current.type, current.content);
      },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const { state, lockout_reason } = body<{ state: PolicyState; lockout_reason?: string }>(c);
        const needed = state === "released" ? "policy:release" : "policy:edit";
        if (!caller(c).permissions.has(needed)) {
          throw forbidden(
            state === "released"
              ? "permission policy:release is required to release a policy"
              : `permission policy:edit is required to move a policy to ${state}`,
          );
        }
        const { policy, from, lockoutOverride } = await db.transaction((tx) =>
          changePolicyState(tx, id, state, {
            lockoutReason: lockout_reason,
            checked: prepared<CheckedContent | undefined>(c),
            signer: caContentSigner(ctx.ca),
            by: caller(c).username,
          })
        );
        auditResource(c, { id, name: policy.name });
        c.set("auditDetails", {
          from,
          to: state,
          ...(lockoutOverride ? { lockout_override: lockoutOverride } : {}),
        });
        return await respondJson(c, policy);
      },
    }),
    route("GET /api/v1/policies/all/:id/revision", "policy:view", {
      summary: "Read the pending revision of a released policy (404 when none is being prepared)",
      responses: { "200": { description: "The pending revision", schema: REVISION_SCHEMA } },
      handler: readById(db, getRevision),
    }),
    route("PUT /api/v1/policies/all/:id/revision", "policy:edit", {
      summary:
        "Start or edit the pending revision of a released policy (content validated for the type). Nodes keep receiving the released content until the revision is released.",
      audit: { resourceType: "policy", action: "policy.revision_save" },
      body: closedObject({ description: DESCRIPTION, content: CONTENT }),
      responses: { "200": { description: "The pending revision", schema: REVISION_SCHEMA } },
      // Large content is checked in a worker before the unit of work opens, as for a draft edit.
      prepare: async (c) => {
        const { content } = body<{ content?: string }>(c);
        const type = (await getPolicySummary(db, uuidParam(c, "id"))).type;
        assertMayAuthor(c, type);
        return await checkEditedContent(type, content);
      },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const input = body<{ description?: string; content?: string }>(c);
        const checked = prepared<CheckedContent | undefined>(c);
        const { before, revision } = await db.transaction(async (tx) => {
          const before: object = await findRevision(tx, id) ?? await getPolicy(tx, id);
          const saved = await saveRevision(tx, id, { ...input, createdBy: caller(c).username, checked });
          auditResource(c, { id, name: (await getPolicySummary(tx, id)).name });
          return { before, revision: saved };
        });
        c.set("auditDetails", { base_version: revision.base_version });
        auditChanges(c, {
          before,
          after: revision,
          fields: ["description", "content"],
          contentFields: ["content"],
        });
        return await respondJson(c, revision);
      },
    }),
    route("DELETE /api/v1/policies/all/:id/revision", "policy:edit", {
      summary: "Discard the pending revision; the released policy is left untouched",
      audit: { resourceType: "policy", action: "policy.revision_discard" },
      responses: { "204": { description: "Discarded" } },
      handler: changeById(db, discardRevision, { respond: noContent }),
    }),
    route("POST /api/v1/policies/all/:id/revision/release", "policy:release", {
      summary:
        "Release the pending revision: validates it, then replaces the policy's content and description, bumps the version and resyncs the reached nodes once, in one transaction (nodes go from the old settings straight to the new ones). Needs policy:release.",
      audit: { resourceType: "policy", action: "policy.revision_release" },
      body: closedObject({ lockout_reason: LOCKOUT_REASON }),
      responses: { "200": { description: "The policy at its new version", schema: POLICY_SCHEMA } },
      // Large content is checked in a worker before the unit of work opens (see the state route).
      prepare: async (c) => {
        const id = uuidParam(c, "id");
        const [policy, revision] = [await getPolicy(db, id), await findRevision(db, id)];
        return revision ? await precheckContent(policy.type, revision.content) : undefined;
      },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const { lockout_reason } = body<{ lockout_reason?: string }>(c);
        const { policy, fromVersion, lockoutOverride, restoredFrom } = await db.transaction((tx) =>
          releaseRevision(tx, id, {
            lockoutReason: lockout_reason,
            checked: prepared<CheckedContent | undefined>(c),
            signer: caContentSigner(ctx.ca),
            by: caller(c).username,
          })
        );
        auditResource(c, { id, name: policy.name });
        c.set("auditDetails", {
          from_version: fromVersion,
          to_version: policy.version,
          ...(restoredFrom ? { restores_version: restoredFrom } : {}),
          ...(lockoutOverride ? { lockout_override: lockoutOverride } : {}),
        });
        return await respondJson(c, policy);
      },
    }),
    route("POST /api/v1/policies/all/:id/duplicate", "policy:create", {
      summary:
        'Create a new draft policy with the type, description and (released) content of this one; the name defaults to "<name> (copy)"',
      audit: { resourceType: "policy", action: "policy.duplicate" },
      body: closedObject({ name: NAME }),
      responses: { "201": { description: "The new draft policy", schema: POLICY_SCHEMA } },
      prepare: async (c) => assertMayAuthor(c, (await getPolicySummary(db, uuidParam(c, "id"))).type),
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const { name } = body<{ name?: string }>(c);
        return await created(c, {
          name: name ?? "",
          create: () =>
            db.transaction((tx) => duplicatePolicy(tx, id, { name, createdBy: caller(c).username })),
        });
      },
    }),
    route("POST /api/v1/policies/all/:id/deprecate", "policy:edit", {
      summary:
        "Deprecate a policy (message, optional replacement that must exist and not be the policy itself); deprecated=false lifts it",
      audit: { resourceType: "policy", action: "policy.deprecate" },
      body: closedObject({
        deprecated: { type: "boolean", default: true },
        message: { type: "string", maxLength: 1000, pattern: TEXT_PATTERN },
        replacement_policy_id: { type: ["string", "null"], format: "uuid" },
      }),
      responses: { "200": { description: "The policy", schema: POLICY_SCHEMA } },
      handler: changeById(db, (tx, id, c) => {
        const input = body<{ deprecated?: boolean; message?: string; replacement_policy_id?: string | null }>(
          c,
        );
        return deprecatePolicy(tx, id, {
          deprecated: input.deprecated ?? true,
          message: input.message,
          replacementPolicyId: input.replacement_policy_id?.toLowerCase() ?? null,
        });
      }),
    }),
    route("GET /api/v1/policies/export", "policy:view", {
      summary: "Export policies (all, or ids=a,b) and optionally their bindings as a YAML or JSON bundle",
      query: {
        ids: {
          type: "string",
          pattern: "^[0-9a-fA-F-]{36}(,[0-9a-fA-F-]{36}){0,199}$",
          description: "Comma-separated policy ids (default: every policy)",
        },
        include_bindings: { type: "boolean" },
        format: { type: "string", enum: ["yaml", "json"] },
      },
      responses: {
        "200": { description: "The bundle", contentType: "application/yaml", schema: { type: "string" } },
      },
      handler: async (c) => {
        const ids = c.req.query("ids")?.split(",").map((s) => s.toLowerCase());
        const format = (c.req.query("format") ?? "yaml") as BundleFormat;
        const bundle = await exportBundle(db, {
          ids,
          includeBindings: queryBool(c, "include_bindings") ?? false,
          format,
        });
        await ctx.audit.record(callerEvent(c, {
          action: "policy.export",
          resource: { type: "policy" },
          details: { policies: bundle.policies, bindings: bundle.bindings, format },
        }));
        return c.body(bundle.text, 200, {
          "Content-Type": `${bundle.contentType}; charset=utf-8`,
          "Content-Disposition": `attachment; filename="${bundle.filename}"`,
        });
      },
    }),
    importRoute,
    route("GET /api/v1/policy-types", "policy:view", {
      summary: "Known policy types: wire name, content message, typed_content member and merge rule",
      responses: {
        "200": {
          description: "Policy types",
          schema: {
            type: "array",
            items: objectSchema({
              wire_name: { type: "string" },
              message: { type: "string" },
              typed_content_case: { type: "string" },
              merge: { type: "string", enum: ["priority_merge", "file_per_policy", "union"] },
            }),
          },
        },
      },
      handler: (c) =>
        c.json(
          listPolicyTypes().map((t) => ({
            wire_name: t.wireName,
            message: t.schema.typeName,
            typed_content_case: t.typedContentCase,
            merge: t.merge,
          })),
        ),
    }),
  ];
}

function formatFromContentType(c: RouteContext): BundleFormat | undefined {
  const type = (c.req.header("content-type") ?? "").toLowerCase();
  if (type.includes("json")) return "json";
  if (type.includes("yaml")) return "yaml";
  return undefined;
}

/** Reads the request body as text, refusing (413) before buffering more than `max` bytes. */
async function readLimitedText(c: RouteContext, max: number): Promise<string> {
  const declared = Number(c.req.header("content-length") ?? "0");
  const tooLarge = () => new HttpError(413, "payload_too_large", `request body exceeds ${max} bytes`);
  if (declared > max) throw tooLarge();
  const stream = c.req.raw.body;
  if (!stream) return "";
  const all = await readCapped(stream, max, tooLarge);
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(all);
  } catch {
    throw new HttpError(400, "bad_request", "request body must be UTF-8 text");
  }
}
