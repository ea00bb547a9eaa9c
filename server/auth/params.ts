/** Path parameters of identity routes. */
import { badRequest } from "../http/errors.ts";
import type { RouteContext } from "../http/route.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A path parameter that must be a UUID (400 naming it otherwise). */
export function uuidParam(c: RouteContext, name: string): string {
  const value = c.req.param(name) ?? "";
  if (!UUID.test(value)) {
    throw badRequest(`${name} in the path must be a UUID, got "${value.slice(0, 60)}"`, [
      { field: name, message: "must be a UUID" },
    ]);
  }
  return value.toLowerCase();
}

/** JSON Schema for a UUID string. */
export const UUID_SCHEMA = { type: "string", format: "uuid" } as const;
