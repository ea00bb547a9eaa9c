/**
 * REST view of the polkit action catalogue for the Polkit editor: search the merged catalogue (agents' reports
 * over the built-in one), with each action's implicit defaults and the prefixes matching actions share. Anyone
 * who may view policies may read it.
 */
import type { ServerContext } from "../../context.ts";
import { POLKIT_BUILTIN_SOURCE, searchPolkitActions } from "../../domain/polkit_catalogue.ts";
import { type JsonSchema, objectSchema } from "../json_schema.ts";
import type { RouteSpec } from "../route.ts";
import { catalogueSearchRoute } from "./catalogues.ts";

const IMPLICIT: JsonSchema = {
  type: "string",
  description:
    "Implicit authorization: no, yes, auth_self, auth_self_keep, auth_admin, auth_admin_keep (empty: not stated)",
};

/** Routes of the polkit catalogue. */
export function polkitCatalogueRoutes({ db }: ServerContext): RouteSpec[] {
  return [catalogueSearchRoute(db, {
    path: "/api/v1/catalogues/polkit",
    summary: "Search polkit actions (by id, description or vendor) for the Polkit editor",
    description: "Matching actions, the most widely installed first, and the prefixes they share",
    item: {
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
    extra: {
      prefixes: {
        type: "array",
        items: objectSchema({ prefix: { type: "string" }, action_count: { type: "integer", minimum: 0 } }),
      },
    },
    search: searchPolkitActions,
    builtinSource: POLKIT_BUILTIN_SOURCE,
  })];
}
