/**
 * Generates the typed TypeScript client of the REST API (`shared/api/svc_api.gen.ts`) from the OpenAPI
 * document the server serves, so scripts and the project's own end-to-end tests call routes by their
 * declared method and path with typed path parameters, query, body and response. The document comes from
 * the same route declarations the server mounts (handlers are never called), so the client cannot drift:
 * `deno task api:client` regenerates it and `tests/server/api_client_test.ts` fails when it is stale.
 */
import { buildRoutes } from "../http/routes/mod.ts";
import { createIdentity } from "../auth/mod.ts";
import { resolveConfig } from "../config/config.ts";
import type { ServerContext } from "../context.ts";
import { createLogger } from "../core/log.ts";
import { openApiDocument } from "../http/openapi.ts";
import type { RouteSpec } from "../http/route.ts";
import { VERSION } from "../../shared/version.ts";

/** Where the generated client lives. */
export const API_CLIENT_PATH = new URL("../../shared/api/svc_api.gen.ts", import.meta.url);

interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  enum?: readonly unknown[];
  $ref?: string;
  description?: string;
  format?: string;
}

interface Operation {
  operationId: string;
  summary: string;
  parameters: { name: string; in: "path" | "query"; required: boolean; schema: Schema }[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { content?: Record<string, { schema: Schema }> }>;
}

/**
 * The route declarations of this build: route factories only keep the context for their handlers, which are
 * never run here, so a context without a database is enough.
 */
export function currentRoutes(): RouteSpec[] {
  const config = resolveConfig({}, {}, { "security.jwt_secret": "x".repeat(32) });
  const ctx = {
    config,
    log: createLogger("error"),
    version: VERSION,
    audit: { record: () => Promise.resolve() },
  } as unknown as ServerContext;
  return buildRoutes(ctx, createIdentity(ctx));
}

/** The OpenAPI document of this build, from the route declarations alone. */
export function currentApiDocument(): Record<string, unknown> {
  return openApiDocument(currentRoutes(), VERSION);
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function propName(name: string): string {
  return IDENT.test(name) ? name : JSON.stringify(name);
}

/** The TypeScript type of a JSON schema. */
export function tsType(schema: Schema | undefined, indent = ""): string {
  if (!schema) return "unknown";
  if (schema.$ref === "#/components/schemas/Error") return "ApiErrorBody";
  if (schema.$ref) return "unknown";
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ") || "never";
  const types = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
  if (types.length === 0) return schema.properties ? objectType(schema, indent) : "unknown";
  const parts = types.map((t) => {
    switch (t) {
      case "string":
        return "string";
      case "integer":
      case "number":
        return "number";
      case "boolean":
        return "boolean";
      case "null":
        return "null";
      case "array":
        return `Array<${tsType(schema.items, indent)}>`;
      case "object":
        return objectType(schema, indent);
      default:
        return "unknown";
    }
  });
  return parts.join(" | ");
}

function objectType(schema: Schema, indent: string): string {
  const props = Object.entries(schema.properties ?? {});
  const extra = schema.additionalProperties;
  const rest = extra && typeof extra === "object" ? `Record<string, ${tsType(extra, indent)}>` : undefined;
  if (props.length === 0) return rest ?? "Record<string, unknown>";
  const required = new Set(schema.required ?? []);
  const inner = `${indent}  `;
  const lines = props.map(([name, s]) =>
    `${inner}${propName(name)}${required.has(name) ? "" : "?"}: ${tsType(s, inner)};`
  );
  const body = `{\n${lines.join("\n")}\n${indent}}`;
  return rest ? `${body} & ${rest}` : body;
}

function paramsType(op: Operation, where: "path" | "query", indent: string): string {
  const params = op.parameters.filter((p) => p.in === where);
  if (params.length === 0) return "Record<string, never>";
  const inner = `${indent}  `;
  const lines = params.map((p) =>
    `${inner}${propName(p.name)}${p.required ? "" : "?"}: ${
      where === "path" ? "string" : tsType(p.schema, inner)
    };`
  );
  return `{\n${lines.join("\n")}\n${indent}}`;
}

function responseType(op: Operation, indent: string): string {
  const ok = Object.entries(op.responses).filter(([status]) => status.startsWith("2"));
  if (ok.length === 0) return "unknown";
  const types = ok.map(([status, r]) => {
    if (status === "204") return "undefined";
    const json = r.content?.["application/json"];
    if (json) return tsType(json.schema, indent);
    return r.content ? "string" : "unknown";
  });
  return [...new Set(types)].join(" | ");
}

function bodyType(op: Operation, indent: string): string {
  const content = op.requestBody?.content;
  if (!content) return "undefined";
  if (content["application/json"]) return tsType(content["application/json"].schema, indent);
  return "string";
}

/** Renders the client module for an OpenAPI document. */
export function renderApiClient(doc: Record<string, unknown>): string {
  const paths = doc.paths as Record<string, Record<string, Operation>>;
  const ops: string[] = [];
  for (const [path, methods] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const key = `${method.toUpperCase()} ${path}`;
      const i = "    ";
      ops.push(
        [
          `  /** ${op.summary.replace(/\*\//g, "* /")} */`,
          `  ${JSON.stringify(key)}: {`,
          `    path: ${paramsType(op, "path", i)};`,
          `    query: ${paramsType(op, "query", i)};`,
          `    body: ${bodyType(op, i)};`,
          `    response: ${responseType(op, i)};`,
          `  };`,
        ].join("\n"),
      );
    }
  }
  return `// Generated by \`deno task api:client\` from the OpenAPI document of svc-server ${
    (doc.info as { version: string }).version
  }.
// Do not edit: change the route declarations and regenerate.
// deno-lint-ignore-file

/** The error body of every non-2xx answer. */
export interface ApiErrorBody {
  error: { code: string; message: string; fields?: Array<{ field: string; message: string }> };
}

/** Every operation: path parameters, query, body and the 2xx response, keyed by "METHOD /path". */
export interface Operations {
${ops.join("\n")}
}

/** An operation key such as "GET /api/v1/policies/all". */
export type OperationKey = keyof Operations;

type Args<K extends OperationKey> =
  & (Operations[K]["path"] extends Record<string, never> ? { path?: undefined } : { path: Operations[K]["path"] })
  & { query?: Operations[K]["query"] }
  & (Operations[K]["body"] extends undefined ? { body?: undefined } : { body: Operations[K]["body"] });

/** A non-2xx answer, with the server's code, message and field problems. */
export class SvcApiError extends Error {
  constructor(readonly status: number, readonly body: ApiErrorBody | undefined, text: string) {
    super(body?.error?.message ?? \`HTTP \${status}: \${text.slice(0, 200)}\`);
    this.name = "SvcApiError";
  }
  /** The machine-readable code, e.g. validation_failed. */
  get code(): string | undefined {
    return this.body?.error?.code;
  }
}

/** How the client reaches the server. */
export interface SvcClientOptions {
  /** e.g. https://svc.example.org:8443 */
  baseUrl: string;
  /** An API token (svcpat_…) or a session token; sent as Authorization: Bearer. */
  token?: string;
  /** The fetch to use (e.g. one bound to a Deno.HttpClient that trusts the server's CA). */
  fetch?: typeof fetch;
}

/** A typed client: \`call("POST /api/v1/node-groups", { body: { name: "lab" } })\`. */
export class SvcClient {
  #options: SvcClientOptions;
  constructor(options: SvcClientOptions) {
    this.#options = options;
  }

  /** Uses \`token\` for later calls (e.g. after logging in). */
  withToken(token: string): SvcClient {
    return new SvcClient({ ...this.#options, token });
  }

  /**
   * Logs in with a password and returns a client that uses the session as its bearer token (outside a
   * browser, where the Set-Cookie header is readable). Scripts that run unattended use an API token instead.
   */
  async login(username: string, password: string): Promise<SvcClient> {
    const res = await (this.#options.fetch ?? fetch)(new URL("/api/v1/auth/login", this.#options.baseUrl), {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ username, password }),
    });
    const text = await res.text();
    if (!res.ok) {
      let parsed: ApiErrorBody | undefined;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      throw new SvcApiError(res.status, parsed, text);
    }
    const cookies = (res.headers as Headers & { getSetCookie(): string[] }).getSetCookie();
    const session = cookies.map((c) => /^svc_session=([^;]+)/.exec(c)?.[1]).find(Boolean);
    if (!session) throw new Error("login answered without a svc_session cookie");
    return this.withToken(session);
  }

  /** Calls one operation; resolves to its 2xx body, throws {@link SvcApiError} otherwise. */
  async call<K extends OperationKey>(operation: K, args?: Args<K>): Promise<Operations[K]["response"]> {
    const [method, template] = (operation as string).split(" ");
    const a = (args ?? {}) as { path?: Record<string, string>; query?: Record<string, unknown>; body?: unknown };
    const path = template.replace(/\\{([A-Za-z_]+)\\}/g, (_, name: string) => {
      const value = a.path?.[name];
      if (value === undefined) throw new Error(\`\${operation}: path parameter \${name} is missing\`);
      return encodeURIComponent(value);
    });
    const url = new URL(path, this.#options.baseUrl);
    for (const [k, v] of Object.entries(a.query ?? {})) if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.#options.token) headers.authorization = \`Bearer \${this.#options.token}\`;
    if (method !== "GET") {
      // The double-submit rule protects cookie sessions; a token client satisfies it with one random value.
      const csrf = crypto.randomUUID();
      headers.cookie = \`svc_csrf=\${csrf}\`;
      headers["x-csrf-token"] = csrf;
    }
    let body: string | undefined;
    if (a.body !== undefined) {
      body = typeof a.body === "string" ? a.body : JSON.stringify(a.body);
      headers["content-type"] = typeof a.body === "string" ? "application/yaml" : "application/json";
    }
    const res = await (this.#options.fetch ?? fetch)(url, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!res.ok) throw new SvcApiError(res.status, parsed as ApiErrorBody | undefined, text);
    return (parsed ?? (text || undefined)) as Operations[K]["response"];
  }
}
`;
}

if (import.meta.main) {
  const text = renderApiClient(currentApiDocument());
  await Deno.mkdir(new URL(".", API_CLIENT_PATH), { recursive: true });
  if (Deno.args.includes("--check")) {
    const current = await Deno.readTextFile(API_CLIENT_PATH).catch(() => "");
    if (current !== text) {
      console.error("shared/api/svc_api.gen.ts is stale: run deno task api:client");
      Deno.exit(1);
    }
  } else {
    await Deno.writeTextFile(API_CLIENT_PATH, text);
    console.log(`wrote ${API_CLIENT_PATH.pathname}`);
  }
}
