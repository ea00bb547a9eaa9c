/**
 * The OpenAPI 3.1 document, generated from the same {@link RouteSpec} list the server mounts: paths and
 * methods, path and query parameters, request bodies (the schemas the server validates against), responses,
 * the common error body, and security (session cookie or bearer token, plus the CSRF header on mutations).
 * Nothing is written by hand twice, so the document cannot drift from the routes.
 */
import { type JsonSchema, UUID_SCHEMA } from "./json_schema.ts";
import { openApiPath, type RouteSpec } from "./route.ts";

/** Extra declaration for a route whose body is not JSON (e.g. a YAML bundle); read by the generator. */
export interface RawBodyRoute {
  rawBody?: { description: string; contentTypes: string[] };
}

const ERROR_SCHEMA = {
  type: "object",
  required: ["error"],
  properties: {
    error: {
      type: "object",
      required: ["code", "message"],
      properties: {
        code: { type: "string", description: "Machine-readable code, e.g. validation_failed" },
        message: { type: "string", description: "What is wrong and how to fix it, for a person" },
        fields: {
          type: "array",
          description: "Problems with individual fields",
          items: {
            type: "object",
            required: ["field", "message"],
            properties: { field: { type: "string" }, message: { type: "string" } },
          },
        },
      },
    },
  },
};

const ERROR_RESPONSES: Record<string, string> = {
  "400": "The request is malformed; `fields` names each problem",
  "401": "Not logged in, or the session expired",
  "403": "A permission (or the CSRF token) is missing",
  "404": "The resource does not exist",
  "409": "Refused because of the current state; the message says what to do first",
  "422": "The content does not validate; `fields` names each problem",
};

/** Builds the document for `routes`. */
export function openApiDocument(routes: readonly RouteSpec[], version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const path = openApiPath(route.path);
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = operation(route);
  }
  const sortedPaths = Object.fromEntries(Object.keys(paths).sort().map((p) => [p, paths[p]]));
  return {
    openapi: "3.1.0",
    info: {
      title: "svc REST API",
      version,
      description:
        "Policy management for Linux desktops. Every non-2xx response carries the Error body. Mutating requests " +
        "(POST, PUT, PATCH, DELETE) must echo the svc_csrf cookie in the X-CSRF-Token header.",
    },
    servers: [{ url: "/" }],
    tags: [...new Set(routes.map((r) => r.tag))].sort().map((name) => ({ name })),
    paths: sortedPaths,
    components: {
      schemas: { Error: ERROR_SCHEMA },
      securitySchemes: {
        sessionCookie: { type: "apiKey", in: "cookie", name: "svc_session" },
        bearerAuth: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
        csrfToken: {
          type: "apiKey",
          in: "header",
          name: "X-CSRF-Token",
          description: "Must equal the svc_csrf cookie on POST, PUT, PATCH and DELETE",
        },
      },
    },
  };
}

function operation(route: RouteSpec): Record<string, unknown> {
  const mutating = route.method !== "GET";
  const op: Record<string, unknown> = {
    operationId: operationId(route),
    summary: route.summary,
    tags: [route.tag],
    parameters: [...pathParameters(route.path), ...queryParameters(route.query ?? {})],
    responses: responses(route, mutating),
  };
  if (route.access === "public") {
    op.security = [];
  } else {
    op.security = mutating
      ? [{ sessionCookie: [], csrfToken: [] }, { bearerAuth: [], csrfToken: [] }]
      : [{ sessionCookie: [] }, { bearerAuth: [] }];
    if (route.access !== "authenticated") op["x-required-permission"] = route.access;
  }
  if (route.body) {
    op.requestBody = { required: true, content: { "application/json": { schema: route.body } } };
  } else {
    const raw = (route as RouteSpec & RawBodyRoute).rawBody;
    if (raw) {
      op.requestBody = {
        required: true,
        description: raw.description,
        content: Object.fromEntries(raw.contentTypes.map((t) => [t, { schema: { type: "string" } }])),
      };
    }
  }
  if (route.audit) op["x-audit"] = route.audit;
  return op;
}

function operationId(route: RouteSpec): string {
  const words = route.path.replace(/^\/api\/v1\//, "").split("/").map((part) =>
    part.startsWith(":") ? `by_${part.slice(1)}` : part.replace(/[^A-Za-z0-9]+/g, "_")
  );
  return `${route.method.toLowerCase()}_${words.join("_")}`;
}

function pathParameters(path: string): Record<string, unknown>[] {
  return [...path.matchAll(/:([A-Za-z_]+)/g)].map(([, name]) => ({
    name,
    in: "path",
    required: true,
    schema: UUID_SCHEMA,
  }));
}

function queryParameters(query: Record<string, JsonSchema>): Record<string, unknown>[] {
  return Object.entries(query).map(([name, schema]) => ({
    name,
    in: "query",
    required: false,
    ...(schema.description ? { description: schema.description } : {}),
    schema,
  }));
}

function responses(route: RouteSpec, mutating: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [status, response] of Object.entries(route.responses ?? { "200": { description: "Success" } })) {
    out[status] = response.schema
      ? {
        description: response.description,
        content: { [response.contentType ?? "application/json"]: { schema: response.schema } },
      }
      : { description: response.description };
  }
  const errors = ["400"];
  if (route.access !== "public") errors.push("401", "403");
  if (route.path.includes(":")) errors.push("404");
  if (mutating) errors.push("409", "422");
  for (const status of errors) {
    out[status] ??= {
      description: ERROR_RESPONSES[status],
      content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
    };
  }
  return out;
}

/**
 * `GET /api/v1/openapi.json` (public). Takes the final route list lazily because the list is assembled
 * after this route is created (it describes itself too).
 */
export function openApiRoute(getRoutes: () => readonly RouteSpec[], version: string): RouteSpec {
  let cached: string | undefined;
  return {
    method: "GET",
    path: "/api/v1/openapi.json",
    summary: "This OpenAPI 3.1 document",
    tag: "system",
    access: "public",
    responses: { "200": { description: "The OpenAPI document", schema: { type: "object" } } },
    handler: (c) => {
      cached ??= JSON.stringify(openApiDocument(getRoutes(), version));
      return c.body(cached, 200, { "Content-Type": "application/json; charset=utf-8" });
    },
  };
}
