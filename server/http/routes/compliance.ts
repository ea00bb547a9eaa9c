/** REST routes for compliance views: fleet list and summary, per node, per policy. */
import type { ServerContext } from "../../context.ts";
import {
  COMPLIANCE_SORT_COLUMNS,
  COMPLIANCE_STATUSES,
  type ComplianceStatus,
  failingSettings,
  fleetSummary,
  listCompliance,
  nodeCompliance,
  policyCompliance,
} from "../../domain/compliance.ts";
import { policyRollout, ROLLOUT_STATES, rolloutCounts, type RolloutState } from "../../domain/rollout.ts";
import { badRequest } from "../errors.ts";
import { type JsonSchema, objectSchema, UUID_SCHEMA } from "../json_schema.ts";
import { listQuery, listRequest, PAGE_QUERY, pageRequest, pageSchema } from "../pagination.ts";
import { queryBool, queryInt, type RouteContext, type RouteSpec, uuidParam } from "../route.ts";
import { readById } from "./common.ts";
import { complianceRoute as route } from "./tags.ts";

/** Counts per status. */
export const STATUS_COUNTS_SCHEMA: JsonSchema = objectSchema(
  Object.fromEntries([...COMPLIANCE_STATUSES, "total"].map((s) => [s, { type: "integer" }])),
);

const ROW_SCHEMA: JsonSchema = objectSchema({
  node_id: UUID_SCHEMA,
  node_name: { type: "string" },
  policy_id: UUID_SCHEMA,
  policy_name: { type: "string" },
  policy_type: { type: "string" },
  reported_version: { type: ["integer", "null"] },
  policy_version: { type: "integer" },
  status: { type: "string", enum: COMPLIANCE_STATUSES },
  message: { type: "string" },
  items: {
    type: "array",
    items: objectSchema({
      schema_id: { type: "string" },
      key: { type: "string" },
      status: { type: "string" },
      message: { type: "string" },
    }),
  },
  reported_at: { type: ["string", "null"], format: "date-time" },
});

const STATUS_QUERY: JsonSchema = { type: "string", enum: COMPLIANCE_STATUSES };

const UUID_TEXT = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";

const ROLLOUT_COUNTS_SCHEMA: JsonSchema = {
  type: "object",
  required: [...ROLLOUT_STATES, "total"],
  properties: Object.fromEntries([...ROLLOUT_STATES, "total"].map((s) => [s, { type: "integer" }])),
};

const ROLLOUT_ROW_SCHEMA: JsonSchema = objectSchema({
  node_id: UUID_SCHEMA,
  node_name: { type: "string" },
  node_status: { type: "string", enum: ["online", "degraded", "offline", "unknown"] },
  last_seen: { type: ["string", "null"], format: "date-time" },
  state: {
    type: "string",
    enum: ROLLOUT_STATES,
    description: "pending: the node has not reported on the current version yet",
  },
  reported_version: { type: ["integer", "null"] },
  message: { type: "string" },
  reported_at: { type: ["string", "null"], format: "date-time" },
  via: {
    type: "array",
    description: "The enabled bindings through which the policy reaches the node",
    items: objectSchema({
      binding_id: UUID_SCHEMA,
      node_group_id: UUID_SCHEMA,
      node_group_name: { type: "string" },
      priority: { type: "integer" },
    }),
  },
});

/** The `setting` filter of the result list (with its schema), when given. */
function failingSettingQuery(c: RouteContext): { schemaId: string; key: string } | undefined {
  const key = c.req.query("setting");
  const schemaId = c.req.query("setting_schema");
  if (!key && schemaId) {
    throw badRequest("setting_schema narrows the setting filter: give the setting key too (setting=…)", [
      { field: "setting_schema", message: "needs setting" },
    ]);
  }
  return key ? { key, schemaId: schemaId ?? "" } : undefined;
}

/** Routes of the compliance area. */
export function complianceRoutes({ db }: ServerContext): RouteSpec[] {
  return [
    route("GET /api/v1/compliance", "compliance:view", {
      summary:
        "Latest reported results, only where the policy still reaches the node; with counts per status",
      query: {
        ...listQuery(COMPLIANCE_SORT_COLUMNS),
        status: STATUS_QUERY,
        node_id: UUID_SCHEMA,
        policy_id: UUID_SCHEMA,
        search: { type: "string", maxLength: 200, description: "Substring of the node or policy name" },
        include_unreported: {
          type: "boolean",
          description:
            "Also list the pairs the node has not reported on yet (status unknown), so the counts equal /compliance/summary's",
        },
        setting: {
          type: "string",
          minLength: 1,
          maxLength: 512,
          description: "Only pairs whose item for this setting key is failing (error or non_compliant)",
        },
        setting_schema: {
          type: "string",
          maxLength: 512,
          description: "The schema of `setting` (dconf items); empty or absent for settings without one",
        },
        cursor: {
          type: "string",
          maxLength: 200,
          description:
            "The next_cursor of the previous page (keyset paging of reported results by report time; page is then ignored): any depth at the cost of the first page",
        },
      },
      responses: {
        "200": {
          description: "A page of results",
          schema: pageSchema(ROW_SCHEMA, {
            status_counts: STATUS_COUNTS_SCHEMA,
            next_cursor: {
              type: ["string", "null"],
              description:
                "Pass as cursor for the next page; null on a page that is not full, or with include_unreported or another sort",
            },
          }),
        },
      },
      handler: async (c) =>
        c.json(
          await listCompliance(db, {
            status: c.req.query("status") as ComplianceStatus | undefined,
            nodeId: c.req.query("node_id")?.toLowerCase(),
            policyId: c.req.query("policy_id")?.toLowerCase(),
            search: c.req.query("search"),
            includeUnreported: queryBool(c, "include_unreported") ?? false,
            failingSetting: failingSettingQuery(c),
          }, { ...listRequest(c), cursor: c.req.query("cursor") || undefined }),
        ),
    }),
    route("GET /api/v1/compliance/failing-settings", "compliance:view", {
      summary: "The settings failing on most nodes (items reported as error or non_compliant, where the " +
        "policy still reaches the node), by policy and setting, most nodes first",
      query: { limit: { type: "integer", minimum: 1, maximum: 100, description: "How many (default 5)" } },
      responses: {
        "200": {
          description: "Failing settings",
          schema: {
            type: "array",
            items: {
              type: "object",
              required: [
                "policy_id",
                "policy_name",
                "policy_type",
                "schema_id",
                "key",
                "nodes",
                "error",
                "non_compliant",
              ],
              properties: {
                policy_id: UUID_SCHEMA,
                policy_name: { type: "string" },
                policy_type: { type: "string" },
                schema_id: { type: "string", description: "Empty for settings without a schema" },
                key: { type: "string" },
                nodes: { type: "integer", description: "Nodes where the setting fails" },
                error: { type: "integer" },
                non_compliant: { type: "integer" },
              },
            },
          },
        },
      },
      handler: async (c) => c.json(await failingSettings(db, queryInt(c, "limit", 5))),
    }),
    route("GET /api/v1/compliance/summary", "compliance:view", {
      summary: "Fleet summary: expected results per status (missing reports count as unknown), score, nodes",
      responses: {
        "200": {
          description: "Summary",
          schema: objectSchema({
            results: STATUS_COUNTS_SCHEMA,
            score: {
              type: ["number", "null"],
              description: "compliant / (compliant + non_compliant + error)",
            },
            nodes: objectSchema({
              total: { type: "integer" },
              compliant: { type: "integer" },
              non_compliant: { type: "integer" },
              without_policies: { type: "integer" },
            }),
          }),
        },
      },
      handler: async (c) => c.json(await fleetSummary(db)),
    }),
    route("GET /api/v1/nodes/:id/compliance", "compliance:view", {
      summary: "Every policy that reaches the node with its latest result",
      responses: {
        "200": {
          description: "Per-node compliance",
          schema: objectSchema({
            node_id: UUID_SCHEMA,
            summary: STATUS_COUNTS_SCHEMA,
            results: { type: "array", items: ROW_SCHEMA },
          }),
        },
      },
      handler: readById(db, nodeCompliance),
    }),
    route("GET /api/v1/policies/all/:id/compliance", "compliance:view", {
      summary: "Every node the policy reaches with its latest result, with counts per status",
      query: { ...PAGE_QUERY, status: STATUS_QUERY },
      responses: {
        "200": {
          description: "Per-policy compliance",
          schema: pageSchema(ROW_SCHEMA, { policy_id: UUID_SCHEMA, status_counts: STATUS_COUNTS_SCHEMA }),
        },
      },
      handler: async (c) =>
        c.json(
          await policyCompliance(db, uuidParam(c, "id"), {
            page: pageRequest(c),
            status: c.req.query("status") as ComplianceStatus | undefined,
          }),
        ),
    }),
    route("GET /api/v1/policies/all/:id/rollout", "compliance:view", {
      summary:
        "Rollout of the policy: every node it reaches, through which bindings, and its state with the current version (pending until the node reports on it), problems first, with counts per state",
      query: {
        ...PAGE_QUERY,
        state: { type: "string", enum: ROLLOUT_STATES },
        search: {
          type: "string",
          maxLength: 200,
          description: "Case-insensitive substring of the node name",
        },
      },
      responses: {
        "200": {
          description: "The rollout",
          schema: pageSchema(ROLLOUT_ROW_SCHEMA, {
            policy_id: UUID_SCHEMA,
            version: { type: "integer" },
            counts: ROLLOUT_COUNTS_SCHEMA,
          }),
        },
      },
      handler: async (c) =>
        c.json(
          await policyRollout(db, uuidParam(c, "id"), {
            page: pageRequest(c),
            filter: {
              state: c.req.query("state") as RolloutState | undefined,
              search: c.req.query("search") || undefined,
            },
          }),
        ),
    }),
    route("GET /api/v1/policies/rollout", "compliance:view", {
      summary: "Rollout counts per state of up to 200 policies (one grouped query; for list pages)",
      query: {
        ids: {
          type: "string",
          pattern: `^${UUID_TEXT}(,${UUID_TEXT}){0,199}$`,
          description: "Comma-separated policy ids",
        },
      },
      responses: {
        "200": {
          description: "Counts by policy id",
          schema: { type: "object", additionalProperties: ROLLOUT_COUNTS_SCHEMA },
        },
      },
      handler: async (c) => {
        const ids = (c.req.query("ids") ?? "").split(",").filter(Boolean).map((s) => s.toLowerCase());
        return c.json(Object.fromEntries(await rolloutCounts(db, ids)));
      },
    }),
  ];
}
