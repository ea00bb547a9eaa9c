/**
 * REST routes of saved views: a signed-in person's named list queries (filters and sort), per list page,
 * kept on the server so they follow the person across browsers. Anyone signed in manages their own views
 * only; another person's view answers 404.
 */
import type { ServerContext } from "../../context.ts";
import {
  createSavedView,
  deleteSavedView,
  listSavedViews,
  type SavedView,
  updateSavedView,
} from "../../domain/saved_views.ts";
import { closedObject, type JsonSchema, UUID_SCHEMA } from "../json_schema.ts";
import { auditResource, body, caller, type RouteContext, type RouteSpec, uuidParam } from "../route.ts";
import { DATE_TIME, VISIBLE_NAME_PATTERN } from "./common.ts";
import { savedViewsRoute as route } from "./tags.ts";

const LIST: JsonSchema = {
  type: "string",
  pattern: "^[a-z][a-z0-9-]{0,39}$",
  description: "The list page the view belongs to, e.g. nodes",
};
const NAME: JsonSchema = { type: "string", minLength: 1, maxLength: 100, pattern: VISIBLE_NAME_PATTERN };
const QUERY: JsonSchema = {
  type: "string",
  maxLength: 2000,
  // A URL query: printable text only.
  pattern: "^[^\\u0000-\\u001f\\u007f-\\u009f]*$",
  description: "The list's URL query (filters and sort, e.g. status=online&sort=name); paging is not stored",
};

const VIEW_SCHEMA: JsonSchema = {
  type: "object",
  required: ["id", "list", "name", "query", "created_at", "updated_at"],
  properties: {
    id: UUID_SCHEMA,
    list: LIST,
    name: NAME,
    query: QUERY,
    created_at: DATE_TIME,
    updated_at: DATE_TIME,
  },
};

function named(c: RouteContext, view: SavedView): SavedView {
  auditResource(c, { id: view.id, name: `${view.list}: ${view.name}` });
  return view;
}

/** The saved-view routes. */
export function savedViewRoutes({ db }: ServerContext): RouteSpec[] {
  return [
    route("GET /api/v1/saved-views", "authenticated", {
      summary: "Your saved views of one list page, by name",
      query: { list: LIST },
      responses: {
        "200": {
          description: "The views",
          schema: {
            type: "object",
            required: ["items"],
            properties: { items: { type: "array", items: VIEW_SCHEMA } },
          },
        },
      },
      handler: async (c) =>
        c.json({ items: await listSavedViews(db, caller(c).id, c.req.query("list") ?? "nodes") }),
    }),
    route("POST /api/v1/saved-views", "authenticated", {
      summary: "Save the current filters and sort of a list page under a name (names are unique per list)",
      audit: { resourceType: "saved_view" },
      body: closedObject({ list: LIST, name: NAME, query: QUERY }, ["list", "name", "query"]),
      responses: { "201": { description: "The view", schema: VIEW_SCHEMA } },
      handler: async (c) => {
        const input = body<{ list: string; name: string; query: string }>(c);
        auditResource(c, { name: `${input.list}: ${input.name}` });
        return c.json(named(c, await createSavedView(db, caller(c).id, input)), 201);
      },
    }),
    route("PUT /api/v1/saved-views/:id", "authenticated", {
      summary: "Rename one of your views or replace its query",
      audit: { resourceType: "saved_view" },
      body: closedObject({ name: NAME, query: QUERY }),
      responses: { "200": { description: "The view", schema: VIEW_SCHEMA } },
      handler: async (c) => {
        const view = await updateSavedView(db, caller(c).id, uuidParam(c, "id"), body(c));
        return c.json(named(c, view));
      },
    }),
    route("DELETE /api/v1/saved-views/:id", "authenticated", {
      summary: "Delete one of your views",
      audit: { resourceType: "saved_view" },
      responses: { "204": { description: "Deleted" } },
      handler: async (c) => {
        named(c, await deleteSavedView(db, caller(c).id, uuidParam(c, "id")));
        return c.body(null, 204);
      },
    }),
  ];
}
