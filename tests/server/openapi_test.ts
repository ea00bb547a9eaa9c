/**
 * The OpenAPI document describes exactly the mounted routes (a route missing from the document, or a
 * documented route that is not mounted, fails this test), and request bodies are validated against the
 * documented schemas: a violating body gets 400 naming the field.
 */
import assert from "node:assert/strict";
import type { RouteSpec } from "../../server/http/route.ts";
import { openApiDocument, openApiRoute } from "../../server/http/openapi.ts";
import { domainRoutes, identityRoutes } from "../../server/http/routes/mod.ts";
import { systemRoutes } from "../../server/http/routes/system.ts";
import { createTestServer } from "../helpers/app.ts";
import { dbTest } from "../helpers/db.ts";

const METHODS = ["get", "post", "put", "patch", "delete"];

dbTest("the OpenAPI document and the mounted routes describe the same API", async (db, t) => {
  let given: RouteSpec[] = [];
  let all: RouteSpec[] = [];
  const server = await createTestServer({
    db,
    routes: (ctx) => {
      given = [...systemRoutes(ctx), ...domainRoutes(ctx), openApiRoute(() => all, ctx.version)];
      return given;
    },
  });
  try {
    const keys = new Set(given.map((r) => `${r.method} ${r.path}`));
    all = [
      ...given,
      ...identityRoutes(server.ctx, server.identity).filter((r) => !keys.has(`${r.method} ${r.path}`)),
    ];
    const res = await server.anonymous().request("GET", "/api/v1/openapi.json");
    assert.equal(res.status, 200, "public, no session needed");
    const doc = res.json;

    await t.step("every mounted route is documented, and every documented operation is mounted", () => {
      const mounted = new Set(
        server.app.routes
          .filter((r) => r.path.startsWith("/api/v1/") && r.method !== "ALL")
          .map((r) => `${r.method} ${r.path.replace(/:([A-Za-z_]+)/g, "{$1}")}`),
      );
      const documented = new Set<string>();
      for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
        for (const method of Object.keys(ops)) {
          if (METHODS.includes(method)) documented.add(`${method.toUpperCase()} ${path}`);
        }
      }
      const undocumented = [...mounted].filter((k) => !documented.has(k));
      const unmounted = [...documented].filter((k) => !mounted.has(k));
      assert.deepEqual(undocumented, [], "mounted but not documented");
      assert.deepEqual(unmounted, [], "documented but not mounted");
      for (
        const key of [
          "GET /api/v1/policies/all",
          "PUT /api/v1/policies/all/{id}/state",
          "POST /api/v1/node-groups/{id}/tokens",
          "GET /api/v1/openapi.json",
          "GET /api/v1/events",
        ]
      ) {
        assert.ok(documented.has(key), key);
      }
    });

    await t.step("operations carry parameters, bodies, responses, errors and security", () => {
      assert.equal(doc.openapi, "3.1.0");
      assert.deepEqual(Object.keys(doc.components.securitySchemes).sort(), [
        "bearerAuth",
        "csrfToken",
        "sessionCookie",
      ]);
      const state = doc.paths["/api/v1/policies/all/{id}/state"].put;
      assert.deepEqual(state.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`), [
        "path:id",
      ]);
      assert.deepEqual(state.requestBody.content["application/json"].schema.properties.state.enum, [
        "draft",
        "released",
        "archived",
      ]);
      assert.equal(state["x-required-permission"], "policy:view");
      assert.match(
        state.summary,
        /policy:release.*policy:edit/,
        "the handler-checked permissions are documented",
      );
      assert.deepEqual(state.security, [{ sessionCookie: [], csrfToken: [] }, {
        bearerAuth: [],
        csrfToken: [],
      }]);
      assert.equal(
        state.responses["409"].content["application/json"].schema.$ref,
        "#/components/schemas/Error",
      );
      const list = doc.paths["/api/v1/nodes"].get;
      const query = list.parameters.map((p: { name: string }) => p.name);
      for (
        const name of [
          "page",
          "per_page",
          "sort",
          "order",
          "status",
          "group",
          "os",
          "agent_version",
          "search",
        ]
      ) {
        assert.ok(query.includes(name), name);
      }
      assert.deepEqual(list.security, [{ sessionCookie: [] }, { bearerAuth: [] }]);
      assert.deepEqual(doc.paths["/api/v1/openapi.json"].get.security, []);
      const importOp = doc.paths["/api/v1/policies/import"].post;
      assert.deepEqual(Object.keys(importOp.requestBody.content), ["application/yaml", "application/json"]);
      const operationIds = Object.values(doc.paths as Record<string, Record<string, { operationId: string }>>)
        .flatMap((ops) => Object.values(ops).map((o) => o.operationId));
      assert.equal(new Set(operationIds).size, operationIds.length, "operation ids are unique");
    });

    await t.step("a body that violates the documented schema gets 400 naming the field", async () => {
      const admin = await server.loginAs({ superAdmin: true });
      const id = crypto.randomUUID();
      const withBodies = given.filter((r) => r.body);
      assert.ok(withBodies.length >= 10);
      for (const route of withBodies) {
        const path = route.path.replace(/:[A-Za-z_]+/g, id);
        const unknown = await admin.request(route.method, path, { unexpected_field: 1 });
        assert.equal(unknown.status, 400, `${route.method} ${route.path}: ${unknown.text}`);
        const fields = unknown.json.error.fields.map((f: { field: string }) => f.field);
        assert.ok(fields.includes("unexpected_field"), `${route.method} ${route.path}: ${fields}`);
        for (const name of route.body!.required ?? []) {
          assert.ok(fields.includes(name), `${route.method} ${route.path} names missing ${name}`);
        }
      }
      const wrongType = await admin.request("POST", "/api/v1/policy-bindings", {
        policy_id: id,
        node_group_id: id,
        priority: "high",
      });
      assert.equal(wrongType.status, 400);
      assert.deepEqual(wrongType.json.error.fields, [{ field: "priority", message: "must be integer" }]);
    });

    await t.step("the document is a pure function of the route list", () => {
      assert.deepEqual(openApiDocument(all, server.ctx.version), doc);
    });
  } finally {
    await server.close();
  }
});
