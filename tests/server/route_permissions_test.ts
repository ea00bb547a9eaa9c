/**
 * Every REST route the server mounts, walked from one table (`buildRoutes`): anonymous → 401, a user holding
 * every permission except the route's → 403 plus an `access_denied` audit row, a user holding only that
 * permission gets past the gate. Public routes are an explicit allow-list, and every mutating route
 * declares its audit resource.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, TEST_ORIGIN, type TestClient, type TestResponse } from "../helpers/app.ts";
import { REMOTE_ADDR_HEADER } from "../../server/core/client_ip.ts";
import { buildRoutes, identityRoutes } from "../../server/http/routes/mod.ts";
import { ALL_PERMISSIONS, type Permission } from "../../shared/permissions.ts";
import type { RouteSpec } from "../../server/http/route.ts";

/** The only routes anyone may call without a session. Adding one is a decision, made here. */
const PUBLIC_ROUTES = new Set([
  "GET /api/v1/version",
  "GET /api/v1/openapi.json",
  "POST /api/v1/auth/login",
  "POST /api/v1/auth/login/second-factor",
  "POST /api/v1/auth/login/webauthn/options",
  "POST /api/v1/auth/login/webauthn",
  "POST /api/v1/auth/refresh",
  "POST /api/v1/auth/logout",
]);

/** Public or self-auditing mutating routes that record their own events instead of the route audit. */
const SELF_AUDITED = new Set([
  "POST /api/v1/auth/login",
  "POST /api/v1/auth/login/second-factor",
  "POST /api/v1/auth/login/webauthn",
  "POST /api/v1/auth/refresh",
  "POST /api/v1/auth/logout",
]);

/** Routes answering an endless stream: a logged-in call checks the status and hangs up instead of reading. */
const STREAMING_ROUTES = new Set(["GET /api/v1/events"]);

const key = (r: RouteSpec) => `${r.method} ${r.path}`;
const concretePath = (path: string) => path.replace(/:([A-Za-z_]+)/g, () => crypto.randomUUID());

async function call(client: TestClient, route: RouteSpec, path: string): Promise<TestResponse> {
  if (STREAMING_ROUTES.has(key(route)) && client.user.id) {
    const res = await fetchApp(
      new Request(`${TEST_ORIGIN}${path}`, {
        headers: {
          cookie: [...client.cookies].map(([n, c]) => `${n}=${c.value}`).join("; "),
          [REMOTE_ADDR_HEADER]: client.ip,
        },
      }),
    );
    const json = res.status === 200 ? undefined : await res.json();
    await res.body?.cancel();
    return { status: res.status, json, text: "", headers: res.headers };
  }
  return await client.raw(route.method, path, route.method === "GET" ? {} : { body: {} });
}

let fetchApp: (req: Request) => Promise<Response> = () => Promise.reject(new Error("no server"));

function isPermissionGate(res: TestResponse, permission: string): boolean {
  return res.status === 403 && res.json?.error?.code === "forbidden" &&
    String(res.json?.error?.message).includes(`permission ${permission} is required`);
}

dbTest("every route checks its permission on every request", async (db) => {
  const server = await createTestServer({ db, routes: (ctx, identity) => buildRoutes(ctx, identity) });
  fetchApp = server.fetch;
  try {
    const routes = buildRoutes(server.ctx, server.identity);
    assert.ok(routes.length > 20, `only ${routes.length} routes found`);
    const mounted = new Set(routes.map(key));
    for (const r of identityRoutes(server.ctx, server.identity)) {
      assert.ok(mounted.has(key(r)), `${key(r)} is not in buildRoutes`);
    }
    for (const k of STREAMING_ROUTES) assert.ok(mounted.has(k), `${k} is not in buildRoutes`);

    // Anonymous: a CSRF pair is present, so 401 comes from the missing session and nothing else.
    const anonymous = server.anonymous({ ip: "192.0.2.10" });
    anonymous.cookies.set("svc_csrf", { value: "c".repeat(43), path: "/" });
    const garbage = server.anonymous({ ip: "192.0.2.11" });
    garbage.cookies.set("svc_csrf", { value: "c".repeat(43), path: "/" });
    garbage.cookies.set("svc_session", { value: "not.a.jwt", path: "/" });

    const lacking = new Map<string, TestClient>();
    const holding = new Map<string, TestClient>();
    const clientFor = async (map: Map<string, TestClient>, perms: Permission[], k: string) => {
      if (!map.has(k)) map.set(k, await server.loginAs({ permissions: perms }));
      return map.get(k)!;
    };
    const anyUser = await server.loginAs({ permissions: [] });

    let denials = 0;
    let stepUps = 0;
    for (const route of routes) {
      const name = key(route);
      const path = concretePath(route.path);
      if (route.access === "public") {
        assert.ok(PUBLIC_ROUTES.has(name), `${name} is public but not on the allow-list`);
        continue;
      }
      if (route.method !== "GET" && !SELF_AUDITED.has(name)) {
        assert.ok(route.audit?.resourceType, `${name} mutates but declares no audit resource type`);
      }
      for (const client of [anonymous, garbage]) {
        const res = await call(client, route, path);
        assert.equal(res.status, 401, `${name} without a session answered ${res.status}: ${res.text}`);
        assert.equal(res.json?.error?.code, "unauthorized", name);
      }
      if (route.access === "authenticated") {
        const res = await call(anyUser, route, path);
        assert.notEqual(res.status, 401, `${name} refused a logged-in user`);
        // A route behind step-up re-authentication refuses an empty body: a failed attempt at the action (the
        // caller may do it), audited with the refusal's code, not as an access denial.
        if (res.status === 403 && res.json?.error?.code === "reauthentication_required") stepUps++;
        continue;
      }
      const permission = route.access;
      assert.ok(
        (ALL_PERMISSIONS as readonly string[]).includes(permission),
        `${name}: unknown permission ${permission}`,
      );
      const without = await clientFor(lacking, ALL_PERMISSIONS.filter((p) => p !== permission), permission);
      const denied = await call(without, route, path);
      assert.ok(
        isPermissionGate(denied, permission),
        `${name} without ${permission}: ${denied.status} ${denied.text}`,
      );
      denials++;
      const only = await clientFor(holding, [permission], permission);
      const allowed = await call(only, route, path);
      assert.ok(
        allowed.status !== 401 && !isPermissionGate(allowed, permission),
        `${name} with ${permission} still refused: ${allowed.status} ${allowed.text}`,
      );
      if (allowed.status === 403 && allowed.json?.error?.code === "reauthentication_required") stepUps++;
    }

    const rows = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM audit_logs WHERE action = 'access_denied' AND outcome = 'denied'",
    );
    assert.equal(rows[0].n, denials, "every 403 for a missing permission left an access_denied audit row");
    const failed = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM audit_logs
        WHERE outcome = 'failure' AND details->>'error' = 'reauthentication_required'
          AND action <> 'access_denied' AND details->>'required_permission' IS NULL`,
    );
    assert.ok(stepUps > 0, "some routes are behind step-up");
    assert.equal(failed[0].n, stepUps, "every step-up refusal left a failure row of its action");
  } finally {
    await server.close();
  }
});
