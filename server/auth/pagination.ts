/** List pagination: query `page` (≥ 1, default 1) and `per_page` (1..200, default 50) → `{items, total, page, per_page}`. */
import type { JsonSchema } from "../http/json_schema.ts";
import { queryInt, type RouteContext } from "../http/route.ts";

/** Query schemas to spread into a list route's `query`. */
export const PAGE_QUERY: Record<string, JsonSchema> = {
  page: { type: "integer", minimum: 1, maximum: 1_000_000 },
  per_page: { type: "integer", minimum: 1, maximum: 200 },
};

/** A requested page. */
export interface PageRequest {
  page: number;
  perPage: number;
  /** Rows to skip. */
  offset: number;
}

/** A page of results as the API returns it. */
export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  per_page: number;
}

/** Reads the (already validated) page parameters. */
export function pageRequest(c: RouteContext): PageRequest {
  const page = queryInt(c, "page", 1);
  const perPage = queryInt(c, "per_page", 50);
  return { page, perPage, offset: (page - 1) * perPage };
}

/** Wraps rows and a total into the response shape. */
export function pageOf<T>(items: T[], total: number, req: PageRequest): Page<T> {
  return { items, total, page: req.page, per_page: req.perPage };
}
