/**
 * `GET /api/v1/dashboard/summary`: the dashboard's numbers in one request. Any logged-in user may call it,
 * and each section is present only when the caller holds the permission that guards the same data in its
 * own list (nodes and certificates: node:view; compliance: compliance:view; policies: policy:view;
 * bindings: binding:view), so the summary never reveals more than the lists would.
 */
import type { ServerContext } from "../../context.ts";
import { BINDING_STATES } from "../../domain/bindings.ts";
import { dashboardSummary, EXPIRY_BUCKETS } from "../../domain/dashboard.ts";
import { NODE_STATUSES } from "../../domain/nodes.ts";
import { POLICY_STATES } from "../../domain/policies.ts";
import { type JsonSchema, objectSchema } from "../json_schema.ts";
import { caller, type RouteSpec } from "../route.ts";
import { STATUS_COUNTS_SCHEMA } from "./compliance.ts";
import { dashboardRoute as route } from "./tags.ts";

const COUNT: JsonSchema = { type: "integer", minimum: 0 };

/** An object with one count per key (every key present), plus `total` unless told otherwise. */
function countsSchema(
  keys: readonly string[],
  options: { description?: string; total?: boolean } = {},
): JsonSchema {
  const all = options.total === false ? [...keys] : [...keys, "total"];
  return {
    type: "object",
    ...(options.description ? { description: options.description } : {}),
    required: all,
    properties: Object.fromEntries(all.map((k) => [k, COUNT])),
  };
}

const SUMMARY_SCHEMA: JsonSchema = objectSchema({
  nodes: countsSchema(NODE_STATUSES, { description: "Nodes per status (node:view)" }),
  certificates: countsSchema(EXPIRY_BUCKETS, {
    description: "Every node's agent certificate in one bucket (node:view): expired; within_7_days, " +
      "within_30_days, within_90_days (days left, upper bound inclusive); later; none (no certificate " +
      "recorded); revoked (the current certificate is revoked, whatever its date)",
  }),
  compliance: {
    type: "object",
    description: "Expected results of the policies that still reach their nodes, the same numbers as " +
      "GET /api/v1/compliance/summary (compliance:view)",
    required: ["results", "score", "nodes"],
    properties: {
      results: { ...STATUS_COUNTS_SCHEMA, description: "(node, policy) pairs; unreported ones as unknown" },
      score: { type: ["number", "null"], description: "compliant / (compliant + non_compliant + error)" },
      nodes: {
        ...countsSchema(["compliant", "non_compliant", "without_policies"]),
        description: "compliant: every expected result compliant or inapplicable; non_compliant: at least " +
          "one non_compliant or error; without_policies: no policy reaches the node",
      },
    },
  },
  policies: {
    type: "object",
    description: "Policies per state and per type (policy:view)",
    required: ["total", "by_state", "by_type"],
    properties: {
      total: { type: "integer", minimum: 0 },
      by_state: countsSchema(POLICY_STATES, { total: false }),
      by_type: {
        type: "array",
        description: "Types that have at least one policy, by type name",
        items: {
          type: "object",
          required: ["type", "total", "by_state"],
          properties: {
            type: { type: "string", description: "Wire name, e.g. Firefox" },
            total: { type: "integer", minimum: 0 },
            by_state: countsSchema(POLICY_STATES, { total: false }),
          },
        },
      },
    },
  },
  bindings: countsSchema(BINDING_STATES, { description: "Policy bindings per state (binding:view)" }),
}, {
  description: "A section is absent when the caller lacks the permission named in its description",
  optional: ["nodes", "certificates", "compliance", "policies", "bindings"],
});

/** The dashboard route. */
export function dashboardRoutes({ db }: ServerContext): RouteSpec[] {
  return [
    route("GET /api/v1/dashboard/summary", "authenticated", {
      summary: "Fleet and policy counts for the dashboard in one request; each section only with its " +
        "permission (node:view → nodes, certificates; compliance:view; policy:view; binding:view)",
      // No parameters: declaring none makes a stray one a 400 instead of being ignored.
      query: {},
      responses: { "200": { description: "The sections the caller may see", schema: SUMMARY_SCHEMA } },
      async handler(c) {
        const may = caller(c).permissions;
        return c.json(
          await dashboardSummary(db, {
            nodes: may.has("node:view"),
            certificates: may.has("node:view"),
            compliance: may.has("compliance:view"),
            policies: may.has("policy:view"),
            bindings: may.has("binding:view"),
          }),
        );
      },
    }),
  ];
}
