/**
 * Helpers shared by the domain routes: mapping domain errors to HTTP, pagination and sort parameters, path
 * ids, and a few schema fragments reused across routes.
 */
import { DomainError } from "../../domain/errors.ts";
import type { PageRequest, SortRequest } from "../../domain/pagination.ts";
import { HttpError } from "../errors.ts";
import type { JsonSchema } from "../json_schema.ts";
import type { AuthUser, RouteContext, RouteSpec } from "../route.ts";
import { PAGE_QUERY, pageRequest } from "../../auth/pagination.ts";
import { UUID_SCHEMA, uuidParam } from "../../auth/params.ts";

export { PAGE_QUERY, UUID_SCHEMA, uuidParam };

const STATUS_BY_KIND: Record<DomainError["kind"], { status: number; code: string }> = {
  not_found: { status: 404, code: "not_found" },
  conflict: { status: 409, code: "conflict" },
  invalid: { status: 422, code: "validation_failed" },
  forbidden: { status: 403, code: "forbidden" },
};

/** The HTTP form of a domain error (404, 409, 422 or 403 with the domain's message and fields). */
export function toHttpError(err: DomainError): HttpError {
  const { status, code } = STATUS_BY_KIND[err.kind];
  return new HttpError(status, code, err.message, err.fields);
}

/** Wraps every handler so domain errors become HTTP errors; other errors pass through unchanged. */
export function mapDomainErrors(routes: RouteSpec[]): RouteSpec[] {
  return routes.map((route) => ({
    ...route,
    handler: async (c) => {
      try {
        return await route.handler(c);
      } catch (err) {
        throw err instanceof DomainError ? toHttpError(err) : err;
      }
    },
  }));
}

/** The authenticated caller (routes that use this are never public). */
export function caller(c: RouteContext): AuthUser {
  const user = c.get("user");
  if (!user) throw new HttpError(401, "unauthorized", "authentication required: log in again");
  return user;
}

/** The validated page parameters. */
export function page(c: RouteContext): PageRequest {
  const { page, perPage } = pageRequest(c);
  return { page, perPage };
}

/** Query schemas for an allow-listed sort (`sort` one of `columns`, `order` asc/desc). */
export function sortQuery(columns: Record<string, string>): Record<string, JsonSchema> {
  return {
    sort: { type: "string", enum: Object.keys(columns), description: "Column to sort by" },
    order: { type: "string", enum: ["asc", "desc"], description: "Sort direction" },
  };
}

/** The validated sort parameters. */
export function sort(c: RouteContext): SortRequest {
  const order = c.req.query("order");
  return { field: c.req.query("sort"), order: order === "asc" || order === "desc" ? order : undefined };
}

/** A validated boolean query parameter. */
export function queryBool(c: RouteContext, name: string): boolean | undefined {
  const raw = c.req.query(name);
  return raw === undefined ? undefined : raw === "true";
}

/** Schema of the common error body. */
export const ERROR_SCHEMA: JsonSchema = { $ref: "#/components/schemas/Error" };

/** A paginated list response schema around `item`. */
export function pageSchema(item: JsonSchema, extra: Record<string, JsonSchema> = {}): JsonSchema {
  return {
    type: "object",
    required: ["items", "total", "page", "per_page"],
    properties: {
      items: { type: "array", items: item },
      total: { type: "integer", minimum: 0 },
      page: { type: "integer", minimum: 1 },
      per_page: { type: "integer", minimum: 1, maximum: 200 },
      ...extra,
    },
  };
}

/** Single-line name text: no control characters. */
export const NAME_PATTERN = "^[^\\u0000-\\u001f\\u007f]+$";
/** Free text: no control characters except tab and newline. */
export const TEXT_PATTERN = "^[^\\u0000-\\u0008\\u000b-\\u001f\\u007f]*$";

/** Timestamp schema. */
export const DATE_TIME: JsonSchema = { type: "string", format: "date-time" };
