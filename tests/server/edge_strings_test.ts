/**
 * Hostile strings stop at the edge: NUL and lone UTF-16 surrogates (which PostgreSQL cannot store) in any
 * query value, path value, JSON value or JSON key are a 400 naming the field for every route; control
 * characters never reach names that are shown or logged; prototype keys, deep nesting and oversized bodies
 * are clean 4xx answers that carry the security headers every response carries.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { toHttpError } from "../../server/http/errors.ts";
import { createTestServer, type TestClient, type TestServer } from "../helpers/app.ts";
import { startAgentServer } from "../helpers/agents.ts";
import { buildRoutes } from "../../server/http/routes/mod.ts";
import { MAX_JSON_BODY, type RouteSpec } from "../../server/http/route.ts";

async function withAdmin(
  db: Parameters<typeof createTestServer>[0]["db"],
  fn: (server: TestServer, admin: TestClient, routes: RouteSpec[]) => Promise<void>,
): Promise<void> {
  let routes: RouteSpec[] = [];
  const server = await createTestServer({
    db,
    logLevel: "warn",
    routes: (ctx, identity) => (routes = buildRoutes(ctx, identity)),
  });
  try {
    await fn(server, await server.loginAs({ superAdmin: true }), routes);
  } finally {
    await server.close();
  }
}

function concretePath(path: string, value: string = crypto.randomUUID()): string {
  return path.replace(/:([A-Za-z_]+)/g, () => value);
}

async function count(db: Parameters<typeof createTestServer>[0]["db"], table: string): Promise<number> {
  const [row] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
  return row.n;
}

dbTest("NUL in any query parameter of any route is a 400 naming it", async (db) => {
  await withAdmin(db, async (_server, admin, routes) => {
    let checked = 0;
    for (const route of routes) {
      for (const [name, schema] of Object.entries(route.query ?? {})) {
        if (schema.type !== "string") continue;
        const url = `${concretePath(route.path)}?${name}=a%00b`;
        const res = await admin.raw(route.method, url, route.body ? { body: {} } : {});
        assert.equal(res.status, 400, `${route.method} ${url}: ${res.status} ${res.text}`);
        assert.equal(res.json?.error?.fields?.[0]?.field, name, `${route.method} ${url}`);
        assert.match(res.json.error.message, /NUL/);
        checked++;
      }
    }
    // Search filters of the list routes, audit filters, … : the route table must have given us plenty.
    assert.ok(checked >= 10, `only ${checked} string query parameters found`);
    const anyRoute = await admin.raw("GET", "/api/v1/audit-logs?user=x%00&page=1");
    assert.equal(anyRoute.status, 400);
    const exported = await admin.raw("GET", "/api/v1/audit-logs/export?action=%00&format=csv");
    assert.equal(exported.status, 400, "a NUL filter must not start a truncated export");
    assert.equal(exported.json.error.fields[0].field, "action");
  });
});

dbTest("NUL in a path parameter is a 400 naming it", async (db) => {
  await withAdmin(db, async (_server, admin, routes) => {
    const withParams = routes.filter((r) => r.path.includes("/:") && r.method === "GET");
    assert.ok(withParams.length > 5);
    for (const route of withParams) {
      const res = await admin.raw("GET", concretePath(route.path, "a%00b"));
      assert.equal(res.status, 400, `${route.path}: ${res.status} ${res.text}`);
      assert.equal(res.json.error.code, "bad_request");
    }
  });
});

const UNSTORABLE: [string, string][] = [["NUL", "a\u0000b"], ["lone low surrogate", "\udc00"], [
  "lone high surrogate",
  "x\ud800y",
]];
const CONTROLS: [string, string][] = [
  ["ESC", "\u001b[31mred"],
  ["CR", "a\rb"],
  ["LF", "a\nforged log line"],
  ["BS", "adm\bin"],
  ["DEL", "a\u007fb"],
  ["C1 NEL", "a\u0085b"],
  ["C1 CSI", "a\u009b31m"],
];

dbTest(
  "names and descriptions that are shown or logged refuse control and unstorable characters",
  async (db) => {
    await withAdmin(db, async (_server, admin) => {
      const cases: {
        path: string;
        field: string;
        body: (v: string) => Record<string, unknown>;
        table: string;
      }[] = [
        { path: "/api/v1/roles", field: "name", body: (v) => ({ name: v }), table: "roles" },
        {
          path: "/api/v1/roles",
          field: "description",
          body: (v) => ({ name: "r", description: v }),
          table: "roles",
        },
        { path: "/api/v1/user-groups", field: "name", body: (v) => ({ name: v }), table: "user_groups" },
        {
          path: "/api/v1/user-groups",
          field: "description",
          body: (v) => ({ name: "g", description: v }),
          table: "user_groups",
        },
        {
          path: "/api/v1/users",
          field: "full_name",
          body: (v) => ({ username: "newuser", password: "correct-horse-battery-staple-9", full_name: v }),
          table: "users",
        },
      ];
      for (const c of cases) {
        const before = await count(db, c.table);
        // Descriptions are multi-line text (a text area in the console): LF is their one allowed control.
        const refused = c.field === "description" ? CONTROLS.filter(([l]) => l !== "LF") : CONTROLS;
        for (const [label, value] of [...refused, ...UNSTORABLE]) {
          const res = await admin.request("POST", c.path, c.body(value));
          assert.equal(res.status, 400, `${c.path} ${c.field} with ${label}: ${res.status} ${res.text}`);
          assert.equal(res.json.error.fields[0].field, c.field, `${c.path} ${label}`);
          assert.match(
            res.json.error.message,
            new RegExp(`^${c.field}: must not contain`),
            res.json.error.message,
          );
        }
        assert.equal(await count(db, c.table), before, `nothing was created through ${c.path}`);
      }
      // Plain names still work, and the refusals were audited.
      assert.equal(
        (await admin.request("POST", "/api/v1/roles", { name: "Auditors ✓", description: "ok" })).status,
        201,
      );
      const [failures] = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM audit_logs WHERE outcome = 'failure' AND details->>'status' = '400'",
      );
      assert.equal(failures.n, 5 * (CONTROLS.length + UNSTORABLE.length) - 2);
      const multiLine = await admin.request("POST", "/api/v1/user-groups", {
        name: "ml",
        description: "one\ntwo",
      });
      assert.equal(multiLine.status, 201, multiLine.text);
    });
  },
);

dbTest("login and JSON keys: unstorable strings are a 400, not a 500", async (db) => {
  await withAdmin(db, async (server, admin) => {
    const anon = server.anonymous();
    for (const [label, value] of UNSTORABLE) {
      const login = await anon.request("POST", "/api/v1/auth/login", {
        username: value,
        password: "whatever-123",
      });
      assert.equal(login.status, 400, `login with ${label}: ${login.status} ${login.text}`);
      assert.equal(login.json.error.fields[0].field, "username");
    }
    const key = await admin.raw("POST", "/api/v1/user-groups", {
      body: '{"name":"g","\\udc00":1}',
      contentType: "application/json",
    });
    assert.equal(key.status, 400, key.text);
    assert.match(key.json.error.message, /field name must not contain a lone UTF-16 surrogate/);
    const nested = await admin.raw("POST", "/api/v1/user-groups", {
      body: `{"name":"g","description":${"[".repeat(40)}"\\u0000"${"]".repeat(40)}}`,
      contentType: "application/json",
    });
    assert.equal(nested.status, 400, nested.text);
    assert.match(nested.json.error.message, /nests deeper than 32 levels/);
  });
});

dbTest("prototype keys are unknown fields wherever unknown fields are refused", async (db) => {
  await withAdmin(db, async (_server, admin) => {
    for (const key of ["constructor", "__proto__", "prototype", "toString", "hasOwnProperty"]) {
      const res = await admin.raw("POST", "/api/v1/user-groups", {
        body: `{"name":"g-${key}","${key}":{"polluted":true}}`,
        contentType: "application/json",
      });
      assert.equal(res.status, 400, `${key}: ${res.status} ${res.text}`);
      assert.equal(res.json.error.fields[0].field, key);
      assert.equal(res.json.error.fields[0].message, "is not a known field");
    }
    assert.equal(await count(db, "user_groups"), 0);
  });
});

const SECURITY_HEADERS = [
  "content-security-policy",
  "x-frame-options",
  "x-content-type-options",
  "strict-transport-security",
  "referrer-policy",
  "cache-control",
];

function assertSecured(headers: Headers, what: string): void {
  for (const name of SECURITY_HEADERS) assert.ok(headers.get(name), `${what} lacks ${name}`);
}

dbTest("error answers carry the security headers, in-process and from the web port itself", async (db) => {
  await withAdmin(db, async (_server, admin) => {
    const big = await admin.raw("POST", "/api/v1/user-groups", {
      body: `{"name":"${"x".repeat(MAX_JSON_BODY)}"}`,
      contentType: "application/json",
    });
    assert.equal(big.status, 413);
    assertSecured(big.headers, "in-process 413");
    for (const [method, path] of [["GET", "/api/v1/nope"], ["POST", "/api/v1/user-groups"]]) {
      const res = await admin.raw(method, path, { csrf: null });
      assert.ok(res.status >= 400, `${method} ${path}`);
      assertSecured(res.headers, `${method} ${path} ${res.status}`);
    }
  });
  const server = await startAgentServer(db);
  const client = Deno.createHttpClient({ caCerts: [server.ctx.ca.certPem] });
  try {
    const huge = await fetch(`https://localhost:${server.webPort}/api/v1/auth/login`, {
      client,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: new Uint8Array((8 << 20) + 1),
    });
    assert.equal(huge.status, 413);
    assert.equal((await huge.json()).error.code, "payload_too_large");
    assertSecured(huge.headers, "web-port 413");
  } finally {
    client.close();
    await server.stop();
  }
});

dbTest(
  "text PostgreSQL itself refuses maps to a 400, whatever route let it through",
  async (_db, _t, info) => {
    for (
      const [sql, params] of [["SELECT $1::text", ["a\u0000b"]], ["SELECT ($1::text)::jsonb", [
        '{"a":"\\u0000"}',
      ]]] as const
    ) {
      const err = await info.db.query(sql, [...params]).then(() => undefined, (e) => e);
      assert.ok(err, `${sql} must fail on PostgreSQL`);
      const mapped = toHttpError(err);
      assert.equal(mapped?.status, 400, `${sql}: ${err}`);
      assert.match(mapped!.message, /NUL character or invalid Unicode/);
    }
  },
  { drivers: ["postgres"] },
);
