/**
 * An in-process svc-server HTTP app for route tests: a real `ServerContext` (temporary data directory, the
 * real internal CA, the given database), the real identity module (sessions, RBAC, audit) and `createApp`
 * with the given routes plus the identity and audit routes.
 *
 * ```ts
 * dbTest("editors can create policies", async (db) => {
 *   const server = await createTestServer({ db, routes: (ctx) => policyRoutes(ctx) });
 *   const editor = await server.loginAs({ permissions: ["policy:create", "policy:view"] });
 *   const res = await editor.request("POST", "/api/v1/policies/all", { name: "p", … });
 *   assert.equal(res.status, 201);
 *   await server.close();
 * });
 * ```
 *
 * Routes that need the context can be built from it: pass `routes: (ctx) => myRoutes(ctx)`, or every
 * route of the server with `routes: (ctx, identity) => buildRoutes(ctx, identity)`.
 */
import type { Hono } from "hono";
import { join } from "node:path";
import type { Db } from "../../server/db/db.ts";
import type { ServerContext } from "../../server/context.ts";
import { resolveConfig, type ServerConfig } from "../../server/config/config.ts";
import { createLogger, type LogLevel } from "../../server/core/log.ts";
import { type Ca, ensureInternalServerCert, loadOrCreateCa } from "../../server/pki/mod.ts";
import type { CaKeyType } from "../../server/config/ca_key_type.ts";
import { loadSharedTotpKey } from "../../server/pki/ca_store.ts";
import { openSecretStore } from "../../server/pki/secret_store.ts";
import { createApp } from "../../server/http/app.ts";
import type { AppEnv, RouteSpec } from "../../server/http/route.ts";
import { CSRF_COOKIE, CSRF_HEADER } from "../../server/http/csrf.ts";
import { createRouteHooks } from "../../server/http/auth_hooks.ts";
import { identityRoutes } from "../../server/http/routes/mod.ts";
import { createAuditRecorder, createIdentity, type Identity } from "../../server/auth/mod.ts";
import { REMOTE_ADDR_HEADER } from "../../server/core/client_ip.ts";
import { SUPER_ADMIN } from "../../shared/builtin_roles.ts";
import { builtinRoleId } from "../../server/auth/rbac.ts";
import { createUser } from "../../server/auth/users.ts";
import { createRole } from "../../server/auth/roles.ts";
import { createBinding } from "../../server/auth/role_bindings.ts";
import type { Permission } from "../../shared/permissions.ts";
import { VERSION } from "../../shared/version.ts";
import { dbTest } from "./db.ts";

/** Deep partial of the server configuration. */
export type ConfigOverrides = { [K in keyof ServerConfig]?: Partial<ServerConfig[K]> };

/** Options of {@link createTestServer}. */
export interface TestServerOptions {
  db: Db;
  /**
   * Extra routes, or a function building them from the context (and the identity, for `buildRoutes`).
   * Identity and audit routes are always mounted; duplicates of them in this list are mounted once.
   */
  routes?: RouteSpec[] | ((ctx: ServerContext, identity: Identity) => RouteSpec[]);
  /** Configuration overrides (on top of defaults, a temporary data dir and a known admin password). */
  config?: ConfigOverrides;
  /** Log level captured into `logs` (default debug). */
  logLevel?: LogLevel;
}

/** A response as tests see it. */
export interface TestResponse {
  status: number;
  /** Parsed JSON body, or undefined when the body is not JSON. */
  // deno-lint-ignore no-explicit-any
  json: any;
  text: string;
  headers: Headers;
}

/** Options of {@link TestClient.raw}. */
export interface RawRequestOptions {
  /** JSON-encoded unless a string, bytes, FormData or Blob. */
  body?: unknown;
  /** Content-Type for non-JSON bodies. */
  contentType?: string;
  /** CSRF header: omitted → the cookie value (as a browser script sends it); null → no header; a string → that. */
  csrf?: string | null;
  /** Send the cookie jar (default true). */
  cookies?: boolean;
  /** Extra headers (win over everything else). */
  headers?: Record<string, string>;
  /**
   * Parse a JSON answer into `json` (default true). The stall bench leaves a 1 MiB answer as text, so that
   * its own parsing, on the server's thread in process, is not counted as the server's.
   */
  parseJson?: boolean;
}

/** A logged-in (or anonymous) HTTP client with a cookie jar. */
export interface TestClient {
  /** The logged-in user (empty for an anonymous client). */
  user: { id: string; username: string };
  password: string;
  /** Address the requests come from (`x-svc-remote-addr`). */
  ip: string;
  /** The cookie jar: name → value and path. */
  cookies: Map<string, { value: string; path: string }>;
  /** A request with cookies and the CSRF header; `body` is sent as JSON. */
  request(method: string, path: string, body?: unknown): Promise<TestResponse>;
  /** A request with full control over CSRF, cookies, headers and body encoding. */
  raw(method: string, path: string, options?: RawRequestOptions): Promise<TestResponse>;
  /** `POST /api/v1/auth/refresh` with the jar (rotates the refresh cookie). */
  refresh(): Promise<TestResponse>;
  /** A cookie value from the jar. */
  cookie(name: string): string | undefined;
}

/** Options of {@link TestServer.loginAs}. */
export interface LoginAsOptions {
  /** Exactly these permissions through a fresh custom role (ignored with `superAdmin`). */
  permissions?: Permission[];
  /** Bind the built-in Super Admin role instead. */
  superAdmin?: boolean;
  username?: string;
  /** Default: a random 20-character password. */
  password?: string;
  /** Client address for the requests (default 127.0.0.1). */
  ip?: string;
}

/** The running test app. */
export interface TestServer {
  app: Hono<AppEnv>;
  ctx: ServerContext;
  identity: Identity;
  /** Password of the initial `admin` user. */
  adminPassword: string;
  /** Captured log lines. */
  logs: string[];
  /** Calls the app in-process. */
  fetch(req: Request): Promise<Response>;
  /** Creates a user with the given permissions and logs in through `POST /api/v1/auth/login`. */
  loginAs(options?: LoginAsOptions): Promise<TestClient>;
  /** A client without a session. */
  anonymous(options?: { ip?: string }): TestClient;
  /** Stops background jobs and removes the data directory (the database belongs to the caller). */
  close(): Promise<void>;
}

/** Origin used for in-process requests. */
export const TEST_ORIGIN = "https://svc.test";
/** Password of the initial admin in test servers. */
export const TEST_ADMIN_PASSWORD = "test-admin-password-0123";

const sharedPki = new Map<
  CaKeyType,
  Promise<{ ca: Ca; cert: { certPem: string; keyPem: string }; dir: string }>
>();

/**
 * One key-encryption key file per test process, so that test servers sharing a database open each other's
 * sealed secrets (the TOTP key) as replicas sharing `ca.key_encryption_key_file` do.
 */
let sharedKekFile: Promise<string> | undefined;
function kekFile(): Promise<string> {
  sharedKekFile ??= processTempDir("svc-test-kek-").then((dir) => join(dir, "secrets.kek"));
  return sharedKekFile;
}

/** A temporary directory removed when the test process ends. */
async function processTempDir(prefix: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix });
  globalThis.addEventListener("unload", () => {
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch {
      // already gone
    }
  });
  return dir;
}

/** One CA and server certificate per test process and CA curve (creating keys is the slow part). */
function pki(keyType: CaKeyType) {
  let shared = sharedPki.get(keyType);
  if (!shared) sharedPki.set(keyType, shared = createPki(keyType));
  return shared;
}

async function createPki(keyType: CaKeyType) {
  const dir = await processTempDir("svc-test-pki-");
  const ca = await loadOrCreateCa({ dataDir: dir, keyType });
  const cert = await ensureInternalServerCert(ca, { dataDir: dir, hostnames: [] });
  return { ca, cert: { certPem: cert.certPem, keyPem: cert.keyPem }, dir };
}

/** Builds the app; call `close()` when done. */
export async function createTestServer(options: TestServerOptions): Promise<TestServer> {
  const dataDir = await Deno.makeTempDir({ prefix: "svc-test-data-" });
  const base = resolveConfig({}, {}, {});
  const o = options.config ?? {};
  const config: ServerConfig = {
    server: { ...base.server, dataDir, ...o.server },
    database: { ...base.database, ...o.database },
    tls: { ...base.tls, ...o.tls },
    ca: { ...base.ca, ...o.ca },
    security: { ...base.security, adminPassword: TEST_ADMIN_PASSWORD, ...o.security },
    metrics: { ...base.metrics, ...o.metrics },
    audit: { ...base.audit, ...o.audit, syslog: { ...base.audit.syslog, ...o.audit?.syslog } },
    agentRepo: { ...base.agentRepo, ...o.agentRepo },
    log: { ...base.log, ...o.log },
    diskEncryption: { ...base.diskEncryption, ...o.diskEncryption },
    flatpak: { ...base.flatpak, ...o.flatpak },
    ldap: { ...base.ldap, ...o.ldap },
    acme: { ...base.acme, ...o.acme },
    kerberos: { ...base.kerberos, ...o.kerberos },
    events: { ...base.events, ...o.events },
    trends: { ...base.trends, ...o.trends },
  };
  const logs: string[] = [];
  const { ca, cert } = await pki(config.ca.keyType);
  const partial: Omit<ServerContext, "audit"> = {
    config,
    db: options.db,
    ca,
    webCert: cert,
    internalCert: cert,
    version: VERSION,
    log: createLogger(options.logLevel ?? "debug", (line) => logs.push(line)),
    replicaId: `test-${crypto.randomUUID()}`,
    totpKey: await loadSharedTotpKey(openSecretStore({ db: options.db, path: await kekFile() })),
  };
  const audit = createAuditRecorder(partial);
  const ctx: ServerContext = { ...partial, audit };
  const identity = createIdentity(ctx);
  try {
    await identity.start();
  } catch (err) {
    await identity.stop();
    await audit.close();
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    throw err;
  }
  const given = typeof options.routes === "function" ? options.routes(ctx, identity) : options.routes ?? [];
  const keys = new Set(given.map((r) => `${r.method} ${r.path}`));
  const routes = [
    ...given,
    ...identityRoutes(ctx, identity).filter((r) => !keys.has(`${r.method} ${r.path}`)),
  ];
  const app = createApp({ ctx, routes, hooks: createRouteHooks(identity.services) });
  const fetch = async (req: Request) => await app.fetch(req);

  const server: TestServer = {
    app,
    ctx,
    identity,
    adminPassword: config.security.adminPassword,
    logs,
    fetch,
    anonymous: (opts = {}) => makeClient(fetch, { id: "", username: "" }, "", opts.ip ?? "127.0.0.1"),
    async loginAs(opts = {}) {
      const username = opts.username ?? `user-${crypto.randomUUID().slice(0, 8)}`;
      const password = opts.password ?? `pw-${crypto.randomUUID().slice(0, 17)}`;
      const user = await ctx.db.transaction(async (tx) => {
        const created = await createUser(tx, { username, password });
        const roleId = opts.superAdmin
          ? await builtinRoleId(tx, SUPER_ADMIN)
          : (await createRole(tx, { name: `test-role-${username}`, permissions: opts.permissions ?? [] })).id;
        await createBinding(tx, { subject: { userId: created.id }, roleId, scopeType: "global" });
        return created;
      });
      const client = makeClient(fetch, { id: user.id, username }, password, opts.ip ?? "127.0.0.1");
      const res = await client.request("POST", "/api/v1/auth/login", { username, password });
      if (res.status !== 200) {
        throw new Error(`loginAs(${username}): login answered ${res.status} ${res.text}`);
      }
      return client;
    },
    async close() {
      await identity.stop();
      await audit.close();
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    },
  };
  return server;
}

/**
 * A {@link dbTest} with an in-process server over its fresh database, closed when the test ends:
 * `serverTest("users can log in", async (server, db) => { … })`.
 */
export function serverTest(
  name: string,
  fn: (server: TestServer, db: Db, t: Deno.TestContext) => Promise<void>,
  options?: Parameters<typeof dbTest>[2],
): void {
  dbTest(name, async (db, t) => {
    const server = await createTestServer({ db });
    try {
      await fn(server, db, t);
    } finally {
      await server.close();
    }
  }, options);
}

function makeClient(
  fetch: (req: Request) => Promise<Response>,
  user: { id: string; username: string },
  password: string,
  ip: string,
): TestClient {
  const cookies = new Map<string, { value: string; path: string }>();

  const raw = async (
    method: string,
    path: string,
    options: RawRequestOptions = {},
  ): Promise<TestResponse> => {
    const headers = new Headers({ [REMOTE_ADDR_HEADER]: ip });
    if (options.cookies !== false) {
      const pairs = [...cookies].filter(([, c]) => path.startsWith(c.path)).map(([n, c]) =>
        `${n}=${c.value}`
      );
      if (pairs.length > 0) headers.set("cookie", pairs.join("; "));
    }
    const csrf = options.csrf === undefined ? cookies.get(CSRF_COOKIE)?.value : options.csrf;
    if (csrf !== null && csrf !== undefined) headers.set(CSRF_HEADER, csrf);
    let body: BodyInit | undefined;
    if (options.body !== undefined) {
      const b = options.body;
      if (typeof b === "string" || b instanceof Uint8Array || b instanceof FormData || b instanceof Blob) {
        body = b as BodyInit;
        if (options.contentType) headers.set("content-type", options.contentType);
      } else {
        body = JSON.stringify(b);
        headers.set("content-type", "application/json");
      }
    }
    for (const [k, v] of Object.entries(options.headers ?? {})) headers.set(k, v);
    const res = await fetch(new Request(`${TEST_ORIGIN}${path}`, { method, headers, body }));
    for (const line of res.headers.getSetCookie()) storeCookie(cookies, line);
    const text = await res.text();
    let json: unknown;
    if (options.parseJson !== false && (res.headers.get("content-type") ?? "").includes("json")) {
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
    }
    return { status: res.status, json, text, headers: res.headers };
  };

  return {
    user,
    password,
    ip,
    cookies,
    raw,
    request: (method, path, body) => raw(method, path, { body }),
    refresh: () => raw("POST", "/api/v1/auth/refresh"),
    cookie: (name) => cookies.get(name)?.value,
  };
}

/** Applies one Set-Cookie line to the jar (Max-Age=0 or a past Expires deletes). */
function storeCookie(jar: Map<string, { value: string; path: string }>, line: string): void {
  const [pair, ...attrs] = line.split(";").map((s) => s.trim());
  const eq = pair.indexOf("=");
  const name = pair.slice(0, eq);
  const value = pair.slice(eq + 1);
  let path = "/";
  let expired = false;
  for (const attr of attrs) {
    const [k, v = ""] = attr.split("=");
    const key = k.toLowerCase();
    if (key === "path") path = v;
    if (key === "max-age" && Number(v) <= 0) expired = true;
    if (key === "expires" && Date.parse(v) <= Date.now()) expired = true;
  }
  if (expired) jar.delete(name);
  else jar.set(name, { value: decodeURIComponent(value), path });
}
