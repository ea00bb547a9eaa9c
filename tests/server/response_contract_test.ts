/**
 * The response contract: every JSON answer the server gives matches the schema its route declares, so the
 * generated client's types (shared/api/svc_api.gen.ts, built from those schemas) are what callers get. A
 * field a schema lists as `required` that an answer leaves out, or a field of another type than declared,
 * fails here. The GET routes come from the route registry: a GET route this test neither calls nor lists in
 * {@link NOT_CALLED} (with the reason) fails it, so a new route cannot go unchecked. A second test holds every
 * object of every success schema to saying which fields are always sent (`required`), so the client's types
 * cannot quietly fall back to all-optional.
 */
import assert from "node:assert/strict";
import { buildRoutes } from "../../server/http/routes/mod.ts";
import type { RouteSpec } from "../../server/http/route.ts";
import { type JsonSchema, validateJson } from "../../server/http/json_schema.ts";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, type TestClient, type TestResponse } from "../helpers/app.ts";
import { CONTENT, report, seedNode } from "./domain_helpers.ts";
import { currentRoutes } from "../../server/tools/api_client_gen.ts";

/** GET routes this test does not call, and why. */
const NOT_CALLED: Record<string, string> = {
  "GET /api/v1/events": "a server-sent event stream, not a JSON answer",
  "GET /api/v1/audit-logs/export": "a CSV or JSON download streamed as a file",
  "GET /api/v1/policies/export": "a YAML bundle download",
  "GET /api/v1/openapi.json": "the OpenAPI document itself (openapi_test.ts checks it)",
};

/** The route `method` + `url` reaches, in the registry's order (the order the server mounts them in). */
function routeOf(routes: readonly RouteSpec[], method: string, url: string): RouteSpec {
  const path = url.split("?")[0];
  const route = routes.find((r) =>
    r.method === method && new RegExp(`^${r.path.replace(/:[A-Za-z_]+/g, "[^/]+")}$`).test(path)
  );
  assert.ok(route, `no route answers ${method} ${path}`);
  return route;
}

/** Calls the API and checks every 2xx JSON answer against the schema its route declares for that status. */
class ContractClient {
  readonly covered = new Set<string>();
  /** Answers that do not match their schema, each naming the route, the fields and the answer. */
  readonly problems: string[] = [];
  constructor(private client: TestClient, private routes: readonly RouteSpec[]) {}

  /** The answer's JSON (the test reads ids from it); a status other than `status` fails at once. */
  async call(
    method: string,
    url: string,
    body?: unknown,
    status = method === "POST" ? 201 : 200,
  ): Promise<TestResponse["json"]> {
    const res = await this.client.request(method, url, body);
    assert.equal(res.status, status, `${method} ${url}: expected ${status}, got ${res.status}: ${res.text}`);
    const route = routeOf(this.routes, method, url);
    const key = `${route.method} ${route.path}`;
    const declared = route.responses?.[String(status)];
    assert.ok(declared, `${key} answered ${status}, which its declaration does not list`);
    if (status !== 204 && (declared.contentType ?? "application/json") === "application/json") {
      assert.ok(declared.schema, `${key} answers JSON with ${status} but declares no schema for it`);
      const errors = validateJson(declared.schema, res.json);
      if (errors.length > 0) {
        this.problems.push(
          `${key} (${status}) does not match its declared schema:\n${
            errors.map((e) => `  ${e.field} ${e.message}`).join("\n")
          }\n  answer: ${JSON.stringify(res.json).slice(0, 800)}`,
        );
      }
    }
    this.covered.add(key);
    return res.json;
  }
}

dbTest("every JSON answer matches the response schema its route declares", async (db) => {
  const server = await createTestServer({ db, routes: (ctx, identity) => buildRoutes(ctx, identity) });
  try {
    const routes = buildRoutes(server.ctx, server.identity);
    const admin = await server.loginAs({ superAdmin: true, username: "contract-admin" });
    const api = new ContractClient(admin, routes);

    // Policies of a few types, one released with a second revision pending, one deprecated.
    const firefox = await api.call("POST", "/api/v1/policies/all", {
      name: "browser",
      type: "Firefox",
      content: CONTENT.Firefox,
      description: "telemetry off",
    });
    const polkit = await api.call("POST", "/api/v1/policies/all", {
      name: "mounts",
      type: "Polkit",
      content: CONTENT.Polkit,
    });
    const dconf = await api.call("POST", "/api/v1/policies/all", {
      name: "screensaver",
      type: "Dconf",
      content: CONTENT.Dconf,
    });
    await api.call("PUT", `/api/v1/policies/all/${firefox.id}/state`, { state: "released" });
    await api.call("PUT", `/api/v1/policies/all/${dconf.id}/state`, { state: "released" });
    await api.call("POST", `/api/v1/policies/all/${dconf.id}/deprecate`, {
      message: "use the new screensaver policy",
      replacement_policy_id: firefox.id,
    }, 200);
    await api.call("PUT", `/api/v1/policies/all/${firefox.id}/revision`, {
      content: JSON.stringify({ DisableTelemetry: true, DisablePocket: true }),
    });
    await api.call("PUT", `/api/v1/policies/all/${polkit.id}`, { description: "udisks mounts" });
    const copy = await api.call("POST", `/api/v1/policies/all/${polkit.id}/duplicate`, {
      name: "mounts copy",
    });

    // A node group bound to the released policy, with an enrolled node that reported compliance.
    const group = await api.call("POST", "/api/v1/node-groups", { name: "lab", description: "the lab" });
    await api.call("PUT", `/api/v1/node-groups/${group.id}`, { description: "the teaching lab" });
    const binding = await api.call("POST", "/api/v1/policy-bindings", {
      policy_id: firefox.id,
      node_group_id: group.id,
      priority: 10,
    });
    await api.call("PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled" });
    const node = await seedNode(db, {
      name: "ws-01",
      status: "online",
      os: "Debian",
      agentVersion: "1.2.0",
      desktops: ["GNOME"],
      fqdn: "ws-01.lab.example",
      serials: ["0a1b2c"],
      groups: [group.id],
    });
    const bare = await seedNode(db, { name: "ws-02" });
    await report(db, node, firefox.id, "compliant");
    await report(db, bare, dconf.id, "non_compliant", { message: "lock-delay differs" });
    await api.call("PUT", `/api/v1/nodes/${node}`, { notes: "second floor" });
    await api.call("POST", `/api/v1/node-groups/${group.id}/members`, { node_ids: [bare] }, 200);

    // People: a role, a user, a group holding the role, an API token, a saved view.
    const role = await api.call("POST", "/api/v1/roles", {
      name: "auditors",
      description: "read the audit log",
      permissions: ["audit_log:view"],
    });
    await api.call("PUT", `/api/v1/roles/${role.id}`, { description: "reads the audit log" });
    const user = await api.call("POST", "/api/v1/users", {
      username: "carol",
      email: "carol@example.org",
      full_name: "Carol",
      password: "a-long-password-for-carol",
    });
    await api.call("PUT", `/api/v1/users/${user.id}`, { full_name: "Carol C." });
    const team = await api.call("POST", "/api/v1/user-groups", { name: "auditing", description: "auditors" });
    await api.call("PUT", `/api/v1/user-groups/${team.id}`, { description: "the auditors" });
    await api.call("POST", `/api/v1/user-groups/${team.id}/members`, { user_id: user.id }, 204);
    await api.call("POST", `/api/v1/user-groups/${team.id}/role-bindings`, {
      role_id: role.id,
      step_up: { password: admin.password },
    });
    await api.call("POST", `/api/v1/users/${user.id}/role-bindings`, {
      role_id: role.id,
      scope_type: "node_group",
      scope_id: group.id,
      step_up: { password: admin.password },
    });
    await api.call("POST", "/api/v1/api-tokens", {
      name: "ci",
      expires_in_days: 30,
      step_up: { password: admin.password },
    });
    await api.call("POST", "/api/v1/saved-views", { list: "nodes", name: "debian", query: "os=Debian" });
    await api.call("POST", "/api/v1/service-accounts", { username: "ci-bot", full_name: "CI" });
    await api.call("PUT", "/api/v1/settings/mfa", {
      // "off": a policy that covers the admin would refuse the rest of this test until they enrol a factor.
      mode: "off",
      permissions: ["disk_encryption:reveal"],
      include_ldap: false,
      step_up: { password: admin.password },
    });
    await api.call("PUT", "/api/v1/settings/agent", {
      enabled: true,
      cooldown_seconds: 600,
      message: "Log out",
    });
    await api.call("POST", `/api/v1/node-groups/${group.id}/tokens`);
    const other = await api.call("POST", "/api/v1/node-groups", { name: "office" });
    await api.call("POST", "/api/v1/nodes/bulk/move", { node_ids: [bare], node_group_id: other.id }, 200);
    await api.call("POST", `/api/v1/policies/all/${firefox.id}/revision/release`, {}, 200);
    await api.call("POST", `/api/v1/policies/all/${firefox.id}/versions/1/restore`, {}, 200);
    await api.call("POST", "/api/v1/auth/mfa/totp", { step_up: { password: admin.password } }, 200);
    const revoked = await seedNode(db, { name: "ws-03", serials: ["0d0e0f"] });
    await api.call("POST", `/api/v1/nodes/${revoked}/revoke`, { reason: "stolen" }, 200);
    await api.call("POST", `/api/v1/nodes/${revoked}/re-enroll`);

    const calls: string[] = [
      "/api/v1/version",
      "/api/v1/agent-repo",
      "/api/v1/api-tokens",
      "/api/v1/audit-logs",
      "/api/v1/auth/me",
      "/api/v1/auth/mfa",
      "/api/v1/auth/webauthn/credentials",
      "/api/v1/catalogues/gsettings?q=screensaver",
      "/api/v1/catalogues/gsettings/org.gnome.desktop.screensaver",
      "/api/v1/catalogues/polkit",
      "/api/v1/certificates/expiring",
      "/api/v1/compliance",
      "/api/v1/compliance/failing-settings",
      "/api/v1/compliance/summary",
      "/api/v1/dashboard/summary",
      `/api/v1/disk-encryption/nodes/${node}`,
      "/api/v1/disk-encryption/volumes",
      "/api/v1/flatpak/apps",
      "/api/v1/flatpak/repos",
      "/api/v1/node-groups",
      `/api/v1/node-groups/${group.id}`,
      `/api/v1/node-groups/${group.id}/members`,
      "/api/v1/nodes",
      "/api/v1/nodes/filter-options",
      "/api/v1/nodes/matching?os=Debian",
      `/api/v1/nodes/${node}`,
      `/api/v1/nodes/${bare}`,
      `/api/v1/nodes/${node}/compliance`,
      "/api/v1/permissions",
      "/api/v1/policies/all",
      `/api/v1/policies/all/${firefox.id}`,
      `/api/v1/policies/all/${dconf.id}`,
      `/api/v1/policies/all/${copy.id}`,
      `/api/v1/policies/all/${firefox.id}/compliance`,
      `/api/v1/policies/all/${firefox.id}/revision`,
      `/api/v1/policies/all/${firefox.id}/rollout`,
      `/api/v1/policies/all/${firefox.id}/trends`,
      `/api/v1/policies/all/${firefox.id}/versions`,
      `/api/v1/policies/all/${firefox.id}/versions/1`,
      "/api/v1/policies/in-flight",
      "/api/v1/policies/rollout",
      "/api/v1/policy-bindings",
      `/api/v1/policy-bindings/${binding.id}`,
      "/api/v1/policy-types",
      "/api/v1/role-bindings",
      "/api/v1/roles",
      `/api/v1/roles/${role.id}`,
      "/api/v1/saved-views?list=nodes",
      `/api/v1/session-access/timeline?node_group_id=${group.id}&content=${
        encodeURIComponent(JSON.stringify({
          time_zone: "Europe/Berlin",
          rules: [{
            users: ["carol"],
            effect: "SESSION_ACCESS_EFFECT_ALLOW",
            windows: [{ start: "08:00", end: "20:00" }],
          }],
        }))
      }`,
      "/api/v1/settings/agent",
      "/api/v1/settings/mfa",
      "/api/v1/trends",
      "/api/v1/user-groups",
      `/api/v1/user-groups/${team.id}`,
      `/api/v1/user-groups/${team.id}/members`,
      `/api/v1/user-groups/${team.id}/role-bindings`,
      "/api/v1/users",
      `/api/v1/users/${user.id}`,
      `/api/v1/users/${user.id}/role-bindings`,
    ];
    const failures: string[] = [];
    for (const url of calls) {
      try {
        await api.call("GET", url);
      } catch (error) {
        failures.push((error as Error).message);
      }
    }
    assert.deepEqual(failures, [], failures.join("\n\n"));
    assert.deepEqual(api.problems, [], api.problems.join("\n\n"));

    const gets = routes.filter((r) => r.method === "GET").map((r) => `${r.method} ${r.path}`);
    const unchecked = gets.filter((key) => !api.covered.has(key) && !(key in NOT_CALLED));
    assert.deepEqual(unchecked, [], "GET routes neither called here nor listed in NOT_CALLED with a reason");
    const stale = Object.keys(NOT_CALLED).filter((key) => !gets.includes(key) || api.covered.has(key));
    assert.deepEqual(stale, [], "NOT_CALLED lists routes that do not exist or are called after all");
  } finally {
    await server.close();
  }
});

/** Object schemas (with their nested objects) that do not say which of their fields are always sent. */
function withoutRequired(schema: JsonSchema | undefined, path: string): string[] {
  if (!schema) return [];
  const own = schema.properties && !schema.required ? [path || "(answer)"] : [];
  return [
    ...own,
    ...Object.entries(schema.properties ?? {}).flatMap(([name, sub]) =>
      withoutRequired(sub, `${path}.${name}`)
    ),
    ...withoutRequired(schema.items, `${path}[]`),
    ...(typeof schema.additionalProperties === "object"
      ? withoutRequired(schema.additionalProperties, `${path}{}`)
      : []),
  ];
}

Deno.test("every object in a success answer's schema lists its required fields", () => {
  const missing = currentRoutes().flatMap((route) =>
    Object.entries(route.responses ?? {})
      .filter(([status]) => status.startsWith("2"))
      .flatMap(([status, r]) =>
        withoutRequired(r.schema, "").map((path) => `${route.method} ${route.path} (${status}) ${path}`)
      )
  );
  assert.deepEqual(missing, [], "declare `required` (objectSchema in server/http/json_schema.ts builds it)");
});
