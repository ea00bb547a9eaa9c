/**
 * REST routes of a policy's version history: the released versions (who released each, when, how), one
 * version with its content (for diffs), and the rollback, which starts a revision from an old version's
 * content (or edits a draft to it) and is audited as `policy.rollback`; the usual release follows.
 */
import type { ServerContext } from "../../context.ts";
import { getPolicyVersion, listPolicyVersions } from "../../domain/policy_versions.ts";
import { restoreVersion } from "../../domain/policy_revisions.ts";
import { badRequest } from "../errors.ts";
import { type JsonSchema, objectSchema, UUID_SCHEMA } from "../json_schema.ts";
import {
  auditResource,
  caller,
  respondJson,
  type RouteContext,
  type RouteSpec,
  uuidParam,
} from "../route.ts";
import { DATE_TIME } from "./common.ts";
import { POLICY_SCHEMA, REVISION_SCHEMA } from "./policies.ts";
import { policiesRoute as route } from "./tags.ts";

const VERSION_PROPERTIES: Record<string, JsonSchema> = {
  policy_id: UUID_SCHEMA,
  version: { type: "integer", minimum: 1 },
  name: { type: "string", description: "The policy's name when this version was released" },
  description: { type: "string" },
  released_by: {
    type: "string",
    description: 'Username of whoever released it; "" for versions released before history was kept',
  },
  released_at: DATE_TIME,
  origin: {
    type: "string",
    enum: ["release", "revision", "rollback"],
    description: "A draft released, a revision released, or a revision restoring an earlier version released",
  },
  restored_from: { type: ["integer", "null"], description: "For a rollback: the version it restored" },
};

const VERSION_SUMMARY_SCHEMA: JsonSchema = {
  type: "object",
  properties: VERSION_PROPERTIES,
  required: Object.keys(VERSION_PROPERTIES),
};

const VERSION_SCHEMA: JsonSchema = {
  type: "object",
  properties: { ...VERSION_PROPERTIES, content: { type: "string", description: "protojson, as delivered" } },
  required: [...Object.keys(VERSION_PROPERTIES), "content"],
};

/** The `:version` path parameter: a version number (400 naming it otherwise). */
function versionParam(c: RouteContext): number {
  const raw = c.req.param("version") ?? "";
  const n = /^[1-9][0-9]{0,8}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(n)) {
    throw badRequest(`version in the path must be a version number (1, 2, …), got "${raw.slice(0, 20)}"`, [
      { field: "version", message: "must be a whole number of at least 1" },
    ]);
  }
  return n;
}

/** Routes of the version history. */
export function policyVersionRoutes({ db }: ServerContext): RouteSpec[] {
  return [
    route("GET /api/v1/policies/all/:id/versions", "policy:view", {
      summary: "The released versions of a policy, newest first: who released each, when and how",
      responses: {
        "200": {
          description: "The versions (without content)",
          schema: {
            type: "object",
            required: ["items"],
            properties: { items: { type: "array", items: VERSION_SUMMARY_SCHEMA } },
          },
        },
      },
      handler: async (c) => c.json({ items: await listPolicyVersions(db, uuidParam(c, "id")) }),
    }),
    route("GET /api/v1/policies/all/:id/versions/:version", "policy:view", {
      summary: "One released version of a policy with its content",
      responses: { "200": { description: "The version", schema: VERSION_SCHEMA } },
      handler: async (c) =>
        await respondJson(c, await getPolicyVersion(db, uuidParam(c, "id"), versionParam(c))),
    }),
    route("POST /api/v1/policies/all/:id/versions/:version/restore", "policy:edit", {
      summary:
        "Roll back to an earlier released version without rewriting history: on a released policy, starts a revision with that version's content and description (409 while another revision is pending), released as usual; on a draft, edits the draft to it",
      audit: { resourceType: "policy", action: "policy.rollback" },
      responses: {
        "200": {
          description: "The policy, and the revision started from the old version (released policies)",
          schema: objectSchema({
            policy: POLICY_SCHEMA,
            revision: { ...REVISION_SCHEMA, type: ["object", "null"] },
          }),
        },
      },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const version = versionParam(c);
        const restored = await db.transaction((tx) =>
          restoreVersion(tx, id, version, { by: caller(c).username })
        );
        auditResource(c, { id, name: restored.policy.name });
        c.set("auditDetails", {
          restores_version: version,
          from_version: restored.fromVersion,
          as: restored.revision ? "revision" : "draft",
        });
        return await respondJson(c, { policy: restored.policy, revision: restored.revision ?? null });
      },
    }),
  ];
}
