/**
 * REST view of the polkit action catalogue for the Polkit editor: search the merged catalogue (agents' reports
 * over the built-in one), with each action's implicit defaults and the prefixes matching actions share. Anyone
 * who may view policies may read it.
 */
import type { ServerContext } from "../../context.ts";
import { POLKIT_BUILTIN_SOURCE, searchPolkitActions } from "../../domain/polkit_catalogue.ts";
import type { JsonSchema } from "../json_schema.ts";
import { queryInt, type RouteSpec } from "../route.ts";

const IMPLICIT: JsonSchema = {
  type: "string",
  description:
    "Implicit authorization: no, yes, auth_self, auth_self_keep, auth_admin, auth_admin_keep (empty: not stated)",
};

/** Routes of the polkit catalogue. */
export function polkitCatalogueRoutes(ctx: ServerContext): RouteSpec[] {
  const { db } = ctx;
  return [{
    method: "GET",
    path: "/api/v1/catalogues/polkit",
    summary: "Search polkit actions (by id, description or vendor) for the Polkit editor",
    tag: "catalogues",
    access: "policy:view",
    query: {
      q: { type: "string", maxLength: 200, description: "Case-insensitive text; empty lists everything" },
      limit: { type: "integer", minimum: 1, maximum: 500, description: "Default 50" },
    },
    responses: {
      "200": {
        description: "Matching actions, the most widely installed first, and the prefixes they share",
        schema: {
          type: "object",
          required: ["total", "nodes_reporting", "builtin_source", "items", "prefixes"],
          properties: {
            total: { type: "integer", minimum: 0 },
            nodes_reporting: { type: "integer", minimum: 0, description: "Nodes that reported a catalogue" },
            builtin_source: { type: "string", description: "Origin of the built-in catalogue" },
            items: {
              type: "array",
              items: {
                type: "object",
                properties: {
                  action_id: { type: "string" },
                  description: { type: "string" },
                  message: { type: "string" },
                  vendor: { type: "string" },
                  default_any: IMPLICIT,
                  default_inactive: IMPLICIT,
                  default_active: IMPLICIT,
                  node_count: { type: "integer", minimum: 0 },
                  builtin: { type: "boolean", description: "Shipped with the server" },
                },
              },
            },
            prefixes: {
              type: "array",
              items: {
                type: "object",
                properties: { prefix: { type: "string" }, action_count: { type: "integer", minimum: 0 } },
              },
            },
          },
        },
      },
    },
    handler: async (c) => {
      const result = await searchPolkitActions(db, {
        query: c.req.query("q") ?? "",
        limit: queryInt(c, "limit", 50),
      });
      return c.json({ ...result, builtin_source: POLKIT_BUILTIN_SOURCE });
    },
  }];
}
