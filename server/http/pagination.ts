/**
 * Pages and sorting, HTTP side, for every list route: the query schemas to declare, reading the validated
 * `page`, `per_page`, `sort` and `order`, and the response schema of a page. What a page is and how it is read
 * from the database lives in server/db/pagination.ts.
 */
import {
  DEFAULT_PER_PAGE,
  type ListOptions,
  MAX_PER_PAGE,
  type Page,
  type PageRequest,
} from "../db/pagination.ts";
import { type JsonSchema, objectSchema } from "./json_schema.ts";
import { queryInt, type RouteContext, type RouteDeclaration } from "./route.ts";

/** Query schemas of a paginated list: `page` (≥ 1, default 1) and `per_page` (1..200, default 50). */
export const PAGE_QUERY: Record<string, JsonSchema> = {
  page: { type: "integer", minimum: 1, maximum: 1_000_000 },
  per_page: { type: "integer", minimum: 1, maximum: MAX_PER_PAGE },
};

/** The validated page parameters (route declares {@link PAGE_QUERY}). */
export function pageRequest(c: RouteContext): PageRequest {
  return { page: queryInt(c, "page", 1), perPage: queryInt(c, "per_page", DEFAULT_PER_PAGE) };
}

/**
 * Query schemas of a sortable paginated list: {@link PAGE_QUERY} plus `sort` (one of the allow-listed
 * `columns`) and `order` (asc or desc).
 */
export function listQuery(columns: Record<string, string>): Record<string, JsonSchema> {
  return {
    ...PAGE_QUERY,
    sort: { type: "string", enum: Object.keys(columns), description: "Column to sort by" },
    order: { type: "string", enum: ["asc", "desc"], description: "Sort direction" },
  };
}

/** The validated page and sort parameters (route declares {@link listQuery}). */
export function listRequest(c: RouteContext): ListOptions {
  const order = c.req.query("order");
  return {
    page: pageRequest(c),
    sort: { field: c.req.query("sort"), order: order === "asc" || order === "desc" ? order : undefined },
  };
}

/** Response schema of one page of `item`, with `extra` properties (always sent, too) beside the page fields. */
export function pageSchema(item: JsonSchema, extra: Record<string, JsonSchema> = {}): JsonSchema {
  return objectSchema({
    items: { type: "array", items: item },
    total: { type: "integer", minimum: 0 },
    page: { type: "integer", minimum: 1 },
    per_page: { type: "integer", minimum: 1, maximum: MAX_PER_PAGE },
    ...extra,
  });
}

/**
 * The declaration of a plain paginated list (see routesTagged in ./route.ts): `page` and `per_page` in the
 * query, answered with the page of `item`s (`items` names them in the OpenAPI text) that `list` reads for the
 * validated page parameters.
 */
export function pageRoute<T>(
  summary: string,
  options: {
    items: string;
    item: JsonSchema;
    list: (page: PageRequest, c: RouteContext) => Promise<Page<T>>;
  },
): RouteDeclaration {
  return {
    summary,
    query: PAGE_QUERY,
    responses: { "200": { description: `A page of ${options.items}`, schema: pageSchema(options.item) } },
    handler: async (c) => c.json(await options.list(pageRequest(c), c)),
  };
}
