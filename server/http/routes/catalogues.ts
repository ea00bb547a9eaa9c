/**
 * REST view of the GSettings catalogue for the Dconf editor: search the merged catalogue (agents' reports over
 * the built-in one) and read one schema with all its keys. Anyone who may view policies may read it.
 */
import type { ServerContext } from "../../context.ts";
import type { Db } from "../../db/db.ts";
import {
  BUILTIN_SOURCE,
  getGSettingsSchema,
  searchGSettingsSchemas,
} from "../../domain/gsettings_catalogue.ts";
import { type JsonSchema, objectSchema } from "../json_schema.ts";
import { queryInt, type RouteSpec } from "../route.ts";
import { cataloguesRoute as route } from "./tags.ts";

const KEY_SCHEMA: JsonSchema = {
  type: "object",
  required: ["name", "type", "summary", "default_value"],
  properties: {
    name: { type: "string" },
    type: { type: "string", description: "GVariant type string, e.g. b, u, s, as" },
    summary: { type: "string" },
    description: { type: "string" },
    default_value: { type: "string", description: "GVariant text" },
    enum_values: {
      type: "array",
      items: objectSchema({ nick: { type: "string" }, value: { type: "integer" } }),
    },
    range_min: { type: "string" },
    range_max: { type: "string" },
    choices: { type: "array", items: { type: "string" } },
    flags: { type: "boolean" },
  },
};

const SCHEMA_FIELDS = {
  schema_id: { type: "string" },
  path: { type: "string", description: "Fixed dconf path; empty for relocatable schemas" },
  relocatable: { type: "boolean" },
  node_count: { type: "integer", minimum: 0, description: "Nodes whose last report lists the schema" },
  builtin: { type: "boolean", description: "Shipped with the server" },
} satisfies Record<string, JsonSchema>;

/** How a catalogue of what nodes have installed is searched, and what one page of results adds. */
export interface CatalogueSearch<R> {
  path: string;
  summary: string;
  /** What the 200 answer holds. */
  description: string;
  /** Properties of one item. */
  item: Record<string, JsonSchema>;
  /** Properties of the answer besides total, nodes_reporting, builtin_source and items. */
  extra?: Record<string, JsonSchema>;
  search(db: Db, request: { query: string; limit: number }): Promise<R>;
  /** Where the built-in catalogue comes from. */
  builtinSource: string;
}

/**
 * `GET` search of a catalogue (GSettings schemas, polkit actions): text `q` and `limit` in, the merged
 * catalogue's matches out, with how many nodes reported one and the origin of the built-in part.
 */
export function catalogueSearchRoute<R extends object>(db: Db, catalogue: CatalogueSearch<R>): RouteSpec {
  const extra = catalogue.extra ?? {};
  return {
    method: "GET",
    path: catalogue.path,
    summary: catalogue.summary,
    tag: "catalogues",
    access: "policy:view",
    query: {
      q: { type: "string", maxLength: 200, description: "Case-insensitive text; empty lists everything" },
      limit: { type: "integer", minimum: 1, maximum: 500, description: "Default 50" },
    },
    responses: {
      "200": {
        description: catalogue.description,
        schema: {
          type: "object",
          required: ["total", "nodes_reporting", "builtin_source", "items", ...Object.keys(extra)],
          properties: {
            total: { type: "integer", minimum: 0 },
            nodes_reporting: { type: "integer", minimum: 0, description: "Nodes that reported a catalogue" },
            builtin_source: { type: "string", description: "Origin of the built-in catalogue" },
            items: { type: "array", items: objectSchema(catalogue.item) },
            ...extra,
          },
        },
      },
    },
    handler: async (c) => {
      const result = await catalogue.search(db, {
        query: c.req.query("q") ?? "",
        limit: queryInt(c, "limit", 50),
      });
      return c.json({ ...result, builtin_source: catalogue.builtinSource });
    },
  };
}

/** Routes of the catalogue area. */
export function catalogueRoutes({ db }: ServerContext): RouteSpec[] {
  return [
    catalogueSearchRoute(db, {
      path: "/api/v1/catalogues/gsettings",
      summary: "Search GSettings schemas (by schema id, key name or summary) for the Dconf editor",
      description: "Matching schemas, the most widely installed first",
      item: {
        ...SCHEMA_FIELDS,
        key_count: { type: "integer", minimum: 0 },
        matching_keys: {
          type: "array",
          items: objectSchema({
            name: { type: "string" },
            type: { type: "string" },
            summary: { type: "string" },
          }),
        },
      },
      search: searchGSettingsSchemas,
      builtinSource: BUILTIN_SOURCE,
    }),
    route("GET /api/v1/catalogues/gsettings/:schema_id", "policy:view", {
      summary: "One GSettings schema with every key (type, default, enum values, range, choices)",
      responses: {
        "200": {
          description: "The schema",
          schema: objectSchema({ ...SCHEMA_FIELDS, keys: { type: "array", items: KEY_SCHEMA } }),
        },
        "404": { description: "No such schema in the catalogue" },
      },
      handler: async (c) => c.json(await getGSettingsSchema(db, c.req.param("schema_id") ?? "")),
    }),
  ];
}
