/**
 * The generated, typed REST client (shared/api/svc_api.gen.ts) driving a real svc-server process over TLS:
 * log in, create a node group and an enrollment token, author, release and bind a policy, mint an API token
 * and use it, and see a refusal as a typed error. A route whose declaration changes breaks this test at type
 * check, so the client cannot rot.
 */
import assert from "node:assert/strict";
import { SvcApiError, SvcClient } from "../../shared/api/svc_api.gen.ts";
import { startServerProcess } from "../helpers/process.ts";

Deno.test({
  name: "the typed client drives a real server: groups, tokens, policies, bindings, API tokens, errors",
  sanitizeResources: false,
  async fn() {
    const server = await startServerProcess();
    const http = Deno.createHttpClient({
      caCerts: [await Deno.readTextFile(`${server.dataDir}/pki/ca/ca.crt`)],
    });
    const boundFetch: typeof fetch = (input, init) => fetch(input, { ...init, client: http });
    try {
      const anonymous = new SvcClient({ baseUrl: `https://localhost:${server.webPort}`, fetch: boundFetch });
      const version = await anonymous.call("GET /api/v1/version");
      assert.ok(version, "public route answers");
      const adminPassword = await server.adminPassword();
      const admin = await anonymous.login("admin", adminPassword);

      const group = await admin.call("POST /api/v1/node-groups", { body: { name: "typed-client-lab" } });
      assert.equal(group.name, "typed-client-lab");
      const token = await admin.call("POST /api/v1/node-groups/{id}/tokens", { path: { id: group.id! } });
      assert.match(token.token, /^[A-Za-z0-9_-]{20,}$/);

      const policy = await admin.call("POST /api/v1/policies/all", {
        body: { name: "Typed telemetry off", type: "Firefox", content: '{"DisableTelemetry": true}' },
      });
      const released = await admin.call("PUT /api/v1/policies/all/{id}/state", {
        path: { id: policy.id },
        body: { state: "released" },
      });
      assert.equal(released.state, "released");
      const binding = await admin.call("POST /api/v1/policy-bindings", {
        body: { policy_id: policy.id, node_group_id: group.id!, priority: 10 },
      });
      const enabled = await admin.call("PUT /api/v1/policy-bindings/{id}", {
        path: { id: binding.id! },
        body: { state: "enabled" },
      });
      assert.equal(enabled.state, "enabled");

      const made = await admin.call("POST /api/v1/api-tokens", {
        body: { name: "typed", expires_in_days: 1, step_up: { password: adminPassword } },
      });
      const script = anonymous.withToken(made.token!);
      const groups = await script.call("GET /api/v1/node-groups", { query: { search: "typed-client" } });
      assert.deepEqual(groups.items.map((g) => g.name), ["typed-client-lab"]);

      const refused = await admin.call("POST /api/v1/policies/all", {
        body: { name: "Broken", type: "Firefox", content: '{"DisableTelemetry": "yes"}' },
      }).then(() => undefined, (err) => err);
      assert.ok(refused instanceof SvcApiError, String(refused));
      assert.ok(refused.status === 400 || refused.status === 422, `status ${refused.status}`);
      assert.match(refused.message, /disable_telemetry.*expected boolean/);
    } finally {
      http.close();
      await server.stop();
    }
  },
});
