/**
 * REST routes are declared, not just registered: one {@link RouteSpec} carries the method, path, required
 * permission, audit resource type, request schema and OpenAPI text. From that one declaration the server
 * mounts the handler behind authentication, permission and audit; the OpenAPI document is generated; and
 * the table-driven permission test walks every route. A route cannot exist without a permission decision.
 *
 * Audit is atomic by construction. A mutating route with `audit` runs its handler inside one unit of work
 * (`Db.unitOfWork`, server/db/db.ts): the transaction is ambient for everything the handler awaits, so the
 * `ctx.db` handlers captured in closures at start-up joins it without being passed anything (their own
 * `db.transaction(...)` calls become savepoints). The success audit row is inserted in that same
 * transaction before it commits, so the change and its row commit together or not at all; an insert that
 * fails fails the request and leaves nothing behind. A refused request (validation, permission, a domain
 * refusal, an error response, a crash) rolls back whatever the handler did and then writes its
 * failure/denied row in a transaction of its own. (So a handler cannot make a refusal durable from inside:
 * a failure counter kept in the database must be written after the unit settles, or kept out of audited
 * routes, as login throttling is.) This was chosen over handing handlers an explicit
 * transaction because every handler, and every route other engineers add, reaches the database through the
 * captured `ctx.db`; an ambient unit covers them all without touching one of them, and a forgotten parameter
 * cannot silently bypass it. The body is read and validated before the unit starts, and the unit begins its
 * transaction only at the first statement, so a slow upload or a long parse holds no connection (nor, on
 * PGlite, the one connection everybody shares). Work a handler would do before its first statement but that
 * may take long (reading a raw upload, parsing and validating a large bundle or policy content in a worker)
 * goes into the route's `prepare`, which runs before the unit opens; the handler reads its value with
 * {@link prepared}. (A handler that awaits a parse after a statement, e.g. after reading a row, would hold the
 * transaction open for the whole parse.) What must happen only after a commit (syslog forwarding)
 * uses `afterCommit`; hub notifications are already transactional (`notifyIn`); LISTEN callbacks run outside
 * any unit. Work a handler starts without awaiting it falls back to the pool once the unit has settled.
 */
import type { Context, Hono } from "hono";
import type { Permission } from "../../shared/permissions.ts";
import type { AuditEvent } from "../audit/event.ts";
import { badRequest, type FieldError, forbidden, HttpError, toHttpError, unauthorized } from "./errors.ts";
import { isUuid, type JsonSchema, unstorableReason, validateJson } from "./json_schema.ts";
import {
  isLargeJson,
  LARGE_JSON_BYTES,
  parseJsonBody,
  parseJsonBodyOffLoop,
  stringifyOffLoop,
  summarizeFields,
} from "./json_body.ts";
import type { AuthUser } from "../auth/rbac.ts";
import { inUnitOfWork } from "../db/db.ts";

/** Hono environment: variables set by middlewares. */
export type AppEnv = {
  Variables: {
    user: AuthUser | null;
    /** Set by handlers so the audit row carries the real resource id and name. */
    auditResource: AuditResource | undefined;
    /** Extra audit details (redacted by the audit service). */
    auditDetails: Record<string, unknown> | undefined;
    /** Parsed and validated JSON body. */
    body: unknown;
    /** Client IP after trusted-proxy handling. */
    clientIp: string;
    route: RouteSpec | undefined;
    /** What the route's `prepare` returned (see {@link prepared}). */
    prepared: unknown;
    /**
     * Authenticates the request again (null once its session ended): for long-lived responses such as the
     * live-event stream, which must end with the session that opened it.
     */
    reauthenticate: () => Promise<AuthUser | null>;
    /** A large answer decided inside the request's unit of work, serialized once it ends (see respondJson). */
    largeAnswer: { value: unknown; status: 200 | 201 } | undefined;
  };
};

/** Handler context. */
export type RouteContext = Context<AppEnv>;

/** Who may call a route. */
export type Access = Permission | "authenticated" | "public";

/** A REST route declaration. */
export interface RouteSpec {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Hono path with `:params`, always under `/api/v1/`. */
  path: string;
  summary: string;
  tag: string;
  access: Access;
  /**
   * Audit resource type (e.g. `policy`). Every mutating route is audited; the action defaults to
   * create/update/delete by method, or `audit.action` when given (e.g. `policy.release`).
   */
  audit?: { resourceType: string; action?: string };
  /** JSON request body schema (validated before the handler runs; 400 naming fields). */
  body?: JsonSchema;
  /** A body the handler reads itself (e.g. a YAML bundle), documented in OpenAPI only. */
  rawBody?: { description: string; contentTypes: string[] };
  /** Query parameter schemas (strings in the URL; `integer`/`boolean` are coerced first). */
  query?: Record<string, JsonSchema>;
  /** Response documentation by status code. */
  responses?: Record<string, { description: string; schema?: JsonSchema; contentType?: string }>;
  /**
   * Slow work that needs no transaction, run after authentication, permission and body validation but before
   * the unit of work opens (so no connection is held while it runs): reading a raw upload, parsing it,
   * validating large content in a worker. It may read through the pool, never write. Its value reaches the
   * handler through {@link prepared}; a throw refuses the request and is audited as a failure like any other.
   */
  prepare?: (c: RouteContext) => Promise<unknown>;
  handler: (c: RouteContext) => Response | Promise<Response>;
}

/** A route's method and path as the OpenAPI document and the generated client key it: `GET /api/v1/roles`. */
export type RouteKey = `${RouteSpec["method"]} /api/v1/${string}`;

/** What a route declares besides its method, path, tag and access. */
export type RouteDeclaration = Omit<RouteSpec, "method" | "path" | "tag" | "access">;

/**
 * The declarer of one area's routes (one OpenAPI tag): `route("GET /api/v1/roles", "role:view", { summary, … })`
 * is the {@link RouteSpec} with that method, path, tag and access, so each declaration opens with who may call
 * what, and the tag is said once per area.
 */
export function routesTagged(
  tag: string,
): (key: RouteKey, access: Access, declaration: RouteDeclaration) => RouteSpec {
  return (key, access, declaration) => {
    const space = key.indexOf(" ");
    const method = key.slice(0, space) as RouteSpec["method"];
    return { method, path: key.slice(space + 1), tag, access, ...declaration };
  };
}

/** Hooks the identity module provides to the route mounter. */
export interface RouteHooks {
  /** Resolves the caller from cookie or bearer token; null when absent or invalid. */
  authenticate(c: RouteContext): Promise<AuthUser | null>;
  /**
   * Records the outcome of a mutating or denied request. A success row is written in the request's unit of
   * work and a failure to write it throws; a failure/denied row that cannot be written is logged instead.
   */
  audit(
    c: RouteContext,
    route: RouteSpec,
    outcome: "success" | "failure" | "denied",
    status: number,
  ): Promise<void>;
  /**
   * Runs `fn` as one unit of work: every database statement it issues (through any handle on the server's
   * database) joins one transaction, committed when `fn` resolves, rolled back when it throws.
   */
  atomically<T>(fn: () => Promise<T>): Promise<T>;
}

/** Maximum JSON body accepted by ordinary routes (import has its own, larger limit). */
export const MAX_JSON_BODY = 1 << 20;

/** Converts `/api/v1/policies/:id` into OpenAPI's `/api/v1/policies/{id}`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z_]+)/g, "{$1}");
}

/** Mounts routes on `app` behind authentication, permission, validation and audit. */
export function mountRoutes(app: Hono<AppEnv>, routes: readonly RouteSpec[], hooks: RouteHooks): void {
  const seen = new Set<string>();
  for (const route of routes) {
    const key = `${route.method} ${route.path}`;
    if (seen.has(key)) throw new Error(`route declared twice: ${key}`);
    seen.add(key);
    if (!route.path.startsWith("/api/v1/")) throw new Error(`route ${key} must live under /api/v1/`);
    app.on(route.method, route.path, async (c) => {
      c.set("route", route);
      const audited = route.method !== "GET" && route.audit !== undefined;
      if (route.access !== "public") {
        const user = await hooks.authenticate(c);
        c.set("user", user);
        if (!user) throw unauthorized();
        c.set("reauthenticate", () => hooks.authenticate(c));
        if (route.access !== "authenticated" && !user.permissions.has(route.access)) {
          // The refused request's row, in its own transaction (nothing of the request was written).
          await hooks.audit(c, route, "denied", 403);
          throw forbidden(`permission ${route.access} is required for this action`);
        }
      }
      if (!audited) {
        validateRequest(c, route);
        if (route.body) c.set("body", await readJsonBody(c, route.body));
        if (route.prepare) c.set("prepared", await route.prepare(c));
        return await route.handler(c);
      }
      try {
        // Validation is inside the try so that a rejected mutation is audited as a failure too.
        validateRequest(c, route);
        if (route.body) c.set("body", await readJsonBody(c, route.body));
        if (route.prepare) c.set("prepared", await route.prepare(c));
        const res = await hooks.atomically(async () => {
          const res = await route.handler(c);
          if (res.status >= 400) throw new RefusedResponse(res);
          await hooks.audit(c, route, "success", res.status);
          return res;
        });
        const large = c.get("largeAnswer");
        return large ? await serializedOffLoop(c, large.value, large.status) : res;
      } catch (err) {
        if (err instanceof RefusedResponse) {
          // Rows of refusals are written in their own transaction (the request's changes are rolled back).
          await hooks.audit(
            c,
            route,
            err.response.status === 403 ? "denied" : "failure",
            err.response.status,
          );
          return err.response;
        }
        // The status the client will see, so the audit row agrees with the response.
        const refusal = toHttpError(err);
        // Only a missing permission is an access denial; other 403s from inside the handler (step-up missing
        // or failed, a wrong current password) come from a caller who holds the route's permission: a failed
        // attempt at the action, recorded under the action with the refusal's code.
        const denied = refusal?.status === 403 && refusal.code === "forbidden";
        if (refusal && !denied) c.set("auditDetails", { ...c.get("auditDetails"), error: refusal.code });
        await hooks.audit(c, route, denied ? "denied" : "failure", refusal?.status ?? 500);
        throw err;
      }
    });
  }
}

/** An error response a handler returned: its changes are rolled back like those of a thrown error. */
class RefusedResponse extends Error {
  constructor(readonly response: Response) {
    super(`refused with ${response.status}`);
  }
}

/**
 * Reads and validates a JSON body: on the loop when it is small, in an off-loop worker when it is large
 * (json_body.ts says why), with the same answers either way.
 */
async function readJsonBody(c: RouteContext, schema: JsonSchema): Promise<unknown> {
  const type = c.req.header("content-type") ?? "";
  // An action route whose body is all optional (e.g. revoke with an optional reason) may be called bare.
  if (!type && !(schema.required?.length) && (c.req.header("content-length") ?? "0") === "0") return {};
  if (!type.includes("application/json")) {
    throw new HttpError(
      415,
      "unsupported_media_type",
      "send the request body as JSON (Content-Type: application/json)",
    );
  }
  const bytes = new Uint8Array(await c.req.arrayBuffer());
  if (bytes.length > MAX_JSON_BODY) {
    throw new HttpError(413, "payload_too_large", `request body exceeds ${MAX_JSON_BODY} bytes`);
  }
  const parsed = bytes.length < LARGE_JSON_BYTES
    ? parseJsonBody(new TextDecoder().decode(bytes), schema)
    : await parseJsonBodyOffLoop({ bytes, schema });
  if (!parsed.ok) throw badRequest(parsed.message, parsed.fields);
  return parsed.value;
}

/**
 * Checks what the URL carries: no query or path value PostgreSQL cannot store (whatever the route declares),
 * then the declared query parameters.
 */
function validateRequest(c: RouteContext, route: RouteSpec): void {
  const errors: FieldError[] = [];
  const values = [
    ...Object.entries(c.req.queries()),
    ...Object.entries(c.req.param() as Record<string, string>),
  ];
  for (const [name, value] of values) {
    for (const v of Array.isArray(value) ? value : [value]) {
      const reason = unstorableReason(v);
      if (reason) errors.push({ field: name, message: reason });
    }
  }
  if (errors.length > 0) throw badRequest(summarizeFields(errors), errors);
  if (route.query) validateQuery(c, route.query);
}

function validateQuery(c: RouteContext, schemas: Record<string, JsonSchema>): void {
  const errors: FieldError[] = [];
  for (const [name, schema] of Object.entries(schemas)) {
    const raw = c.req.query(name);
    if (raw === undefined) continue;
    let value: unknown = raw;
    if (schema.type === "integer") value = /^-?\d+$/.test(raw) ? Number(raw) : raw;
    if (schema.type === "boolean") value = raw === "true" ? true : raw === "false" ? false : raw;
    errors.push(...validateJson(schema, value, name));
  }
  for (const name of Object.keys(c.req.query())) {
    if (!(name in schemas)) errors.push({ field: name, message: "is not a known query parameter" });
  }
  if (errors.length > 0) throw badRequest(summarizeFields(errors), errors);
}

/** Reads a typed query integer with a default (after validation). */
export function queryInt(c: RouteContext, name: string, fallback: number): number {
  const raw = c.req.query(name);
  return raw === undefined ? fallback : Number(raw);
}

/** Reads a query boolean (after validation); undefined when absent. */
export function queryBool(c: RouteContext, name: string): boolean | undefined {
  const raw = c.req.query(name);
  return raw === undefined ? undefined : raw === "true";
}

/** A query date or time (RFC 3339); undefined when absent or empty, 400 naming the parameter when unreadable. */
export function queryTime(c: RouteContext, name: string): Date | undefined {
  const raw = c.req.query(name);
  if (raw === undefined || raw === "") return undefined;
  const t = /^\d{4}-\d{2}-\d{2}/.test(raw) ? Date.parse(raw) : NaN;
  if (Number.isNaN(t)) {
    throw badRequest(`${name}: "${raw}" is not a date or time (use RFC 3339, e.g. 2024-05-01T00:00:00Z)`, [
      { field: name, message: "must be an RFC 3339 date or time" },
    ]);
  }
  return new Date(t);
}

/** A path parameter that must be a UUID, lower-cased (400 naming it otherwise). */
export function uuidParam(c: RouteContext, name: string): string {
  const value = c.req.param(name) ?? "";
  if (!isUuid(value)) {
    throw badRequest(`${name} in the path must be a UUID, got "${value.slice(0, 60)}"`, [
      { field: name, message: "must be a UUID" },
    ]);
  }
  return value.toLowerCase();
}

/** The validated body, typed by the caller. */
export function body<T>(c: RouteContext): T {
  return c.get("body") as T;
}

/** What the route's `prepare` returned, typed by the caller (undefined for a route without one). */
export function prepared<T>(c: RouteContext): T {
  return c.get("prepared") as T;
}

/** The authenticated caller (for routes that are not public, where authentication already ran). */
export function caller(c: RouteContext): AuthUser {
  const user = c.get("user");
  if (!user) throw unauthorized();
  return user;
}

/** The resource a mutating handler touched (its type is the route's `audit.resourceType`). */
export interface AuditResource {
  id?: string;
  name?: string;
}

/** Tells the audit middleware which resource a mutating handler touched. */
export function auditResource(c: RouteContext, resource: AuditResource): void {
  c.set("auditResource", resource);
}

/**
 * Handles a create: names the new resource in the audit row by `name` first (so a refused create is named
 * too), runs `create`, names it again with its new id, and answers 201 with the created record.
 */
export async function created<T extends { id: string; name: string }>(
  c: RouteContext,
  options: { name: string; create: () => Promise<T> },
): Promise<Response> {
  auditResource(c, { name: options.name });
  const record = await options.create();
  auditResource(c, { id: record.id, name: record.name });
  return await respondJson(c, record, 201);
}

/**
 * Answers `value` as JSON; a large one (a policy with 1 MiB of content) is serialized in an off-loop worker, so
 * the escaping of every quote in it does not hold the loop.
 */
export async function respondJson(
  c: RouteContext,
  value: unknown,
  status: 200 | 201 = 200,
): Promise<Response> {
  if (!isLargeJson(value)) return c.json(value as object, status);
  if (inUnitOfWork()) {
    // Inside the request's unit of work (an audited change): serialized by mountRoutes once it has committed,
    // so the transaction is not held open while the worker runs.
    c.set("largeAnswer", { value, status });
    return new Response(null, { status });
  }
  return await serializedOffLoop(c, value, status);
}

async function serializedOffLoop(c: RouteContext, value: unknown, status: 200 | 201): Promise<Response> {
  const bytes = await stringifyOffLoop({ value });
  return c.body(bytes, status, { "content-type": "application/json" });
}

/**
 * A successful audit event by the caller of this request, for reads worth a row of their own (exports);
 * mutations are audited by the route declaration instead.
 */
export function callerEvent(
  c: RouteContext,
  event: Pick<AuditEvent, "action" | "resource" | "details">,
): AuditEvent {
  const user = caller(c);
  return {
    ...event,
    outcome: "success",
    actor: { userId: user.id, username: user.username },
    sourceIp: c.get("clientIp"),
  };
}
