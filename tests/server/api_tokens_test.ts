/**
 * API tokens for scripts: shown once and stored hashed, used as `Authorization: Bearer`, acting as their
 * user with that user's current permissions, audited as that user, expiring and revocable; service accounts
 * hold roles like users but cannot log in with a password; nobody mints a token stronger than themselves.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, type TestServer } from "../helpers/app.ts";
import { buildRoutes } from "../../server/http/routes/mod.ts";
import { sha256Hex } from "../../server/domain/node_groups.ts";

/** A request carrying only the API token (no cookies), satisfying the double-submit rule as a script does. */
async function withToken(server: TestServer, token: string, method: string, path: string, body?: unknown) {
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, origin: "https://svc.test" };
  if (method !== "GET") Object.assign(headers, { cookie: "svc_csrf=script", "x-csrf-token": "script" });
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await server.fetch(
    new Request(`https://svc.test${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  );
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch { /* not JSON */ }
  return { status: res.status, json, text };
}

dbTest(
  "an API token acts as its user, is shown once, stored hashed, audited as the user, and revocable",
  async (db) => {
    const server = await createTestServer({ db, routes: (ctx, identity) => buildRoutes(ctx, identity) });
    try {
      const alice = await server.loginAs({
        permissions: ["node_group:view", "node_group:create"],
        username: "alice",
      });
      const made = await alice.request("POST", "/api/v1/api-tokens", {
        name: "ci",
        expires_in_days: 30,
        password: alice.password,
      });
      assert.equal(made.status, 201, made.text);
      const token: string = made.json.token;
      assert.match(token, /^svcpat_[A-Za-z0-9_-]{43}$/);
      assert.equal(made.json.api_token.username, "alice");

      const [stored] = await db.query<{ token_hash: string; hint: string }>(
        "SELECT token_hash, hint FROM api_tokens",
      );
      assert.equal(stored.token_hash, await sha256Hex(token), "only the hash is stored");
      assert.ok(!JSON.stringify(await db.query("SELECT * FROM api_tokens")).includes(token.slice(12)));
      const listed = await alice.request("GET", "/api/v1/api-tokens");
      assert.ok(!listed.text.includes(token), "a list never shows the token again");

      const created = await withToken(server, token, "POST", "/api/v1/node-groups", { name: "from-script" });
      assert.equal(created.status, 201, created.text);
      const denied = await withToken(server, token, "POST", "/api/v1/policies/all", {
        name: "p",
        type: "Firefox",
        content: '{"DisableTelemetry":true}',
      });
      assert.equal(denied.status, 403, "the token has alice's permissions, not more");

      const [row] = await db.query<{ username: string; outcome: string }>(
        "SELECT username, outcome FROM audit_logs WHERE resource_name = 'from-script'",
      );
      assert.deepEqual(row, { username: "alice", outcome: "success" }, "audited as the token's user");

      // Narrowing the user narrows the token at once.
      await db.query("DELETE FROM role_bindings WHERE user_id = $1", [alice.user.id]);
      assert.equal((await withToken(server, token, "GET", "/api/v1/node-groups")).status, 403);

      const revoked = await alice.request("DELETE", `/api/v1/api-tokens/${made.json.api_token.id}`);
      assert.equal(revoked.status, 200, revoked.text);
      assert.equal((await withToken(server, token, "GET", "/api/v1/auth/me")).status, 401);
      assert.equal((await withToken(server, `${token}x`, "GET", "/api/v1/auth/me")).status, 401);
    } finally {
      await server.close();
    }
  },
);

dbTest("expired tokens and disabled users are refused; a token needs an expiry within a year", async (db) => {
  const server = await createTestServer({ db, routes: (ctx, identity) => buildRoutes(ctx, identity) });
  try {
    const bob = await server.loginAs({ permissions: ["node_group:view"], username: "bob" });
    const tooLong = await bob.request("POST", "/api/v1/api-tokens", {
      name: "forever",
      expires_in_days: 366,
    });
    assert.equal(tooLong.status, 400);
    const noExpiry = await bob.request("POST", "/api/v1/api-tokens", { name: "forever" });
    assert.equal(noExpiry.status, 400);
    const made = await bob.request("POST", "/api/v1/api-tokens", {
      name: "short",
      expires_in_days: 1,
      password: bob.password,
    });
    assert.equal((await withToken(server, made.json.token, "GET", "/api/v1/node-groups")).status, 200);
    await db.query("UPDATE api_tokens SET expires_at = now() - interval '1 second'");
    assert.equal((await withToken(server, made.json.token, "GET", "/api/v1/node-groups")).status, 401);
    await db.query("UPDATE api_tokens SET expires_at = now() + interval '1 day'");
    await db.query("UPDATE users SET enabled = false WHERE id = $1", [bob.user.id]);
    assert.equal((await withToken(server, made.json.token, "GET", "/api/v1/node-groups")).status, 401);
  } finally {
    await server.close();
  }
});

dbTest(
  "service accounts: roles like users, no password login, tokens only from someone at least as strong",
  async (db) => {
    const server = await createTestServer({ db, routes: (ctx, identity) => buildRoutes(ctx, identity) });
    try {
      const admin = await server.loginAs({ superAdmin: true, username: "root-admin" });
      const sa = await admin.request("POST", "/api/v1/service-accounts", { username: "deploy-bot" });
      assert.equal(sa.status, 201, sa.text);
      assert.equal(sa.json.source, "service");
      const [{ id: auditorRole }] = await db.query<{ id: string }>(
        "SELECT id FROM roles WHERE name = 'Auditor'",
      );
      const bound = await admin.request("POST", `/api/v1/users/${sa.json.id}/role-bindings`, {
        password: admin.password,
        role_id: auditorRole,
      });
      assert.ok(bound.status < 300, bound.text);

      const login = await server.anonymous().request("POST", "/api/v1/auth/login", {
        username: "deploy-bot",
        password: "",
      });
      assert.ok(
        login.status === 400 || login.status === 401,
        "a service account has no password to log in with",
      );

      // An account manager who lacks the auditor's permissions cannot mint a token acting as the bot.
      const manager = await server.loginAs({ permissions: ["user:view", "user:edit"], username: "manager" });
      const escalate = await manager.request("POST", "/api/v1/api-tokens", {
        name: "steal",
        expires_in_days: 7,
        user_id: sa.json.id,
        password: manager.password,
      });
      assert.equal(escalate.status, 403, escalate.text);
      assert.match(escalate.json.error.message, /you cannot create a token acting as deploy-bot/);

      const noStepUp = await admin.request("POST", "/api/v1/api-tokens", {
        name: "pipeline",
        expires_in_days: 90,
        user_id: sa.json.id,
      });
      assert.equal(noStepUp.status, 403, "a token for someone else needs step-up re-authentication");
      assert.equal(noStepUp.json.error.code, "reauthentication_required");
      const made = await admin.request("POST", "/api/v1/api-tokens", {
        name: "pipeline",
        expires_in_days: 90,
        user_id: sa.json.id,
        password: admin.password,
      });
      assert.equal(made.status, 201, made.text);
      const logs = await withToken(server, made.json.token, "GET", "/api/v1/audit-logs");
      assert.equal(logs.status, 200, "the bot reads the audit log as an Auditor");
    } finally {
      await server.close();
    }
  },
);

dbTest(
  "API tokens do not breed: a token cannot create tokens, and every token needs a person's step-up",
  async (db) => {
    const server = await createTestServer({ db, routes: (ctx, identity) => buildRoutes(ctx, identity) });
    try {
      const dora = await server.loginAs({ permissions: ["user:view", "user:edit"], username: "dora" });
      const wanted = { name: "parent", expires_in_days: 1 };
      const bare = await dora.request("POST", "/api/v1/api-tokens", wanted);
      assert.equal(bare.status, 403, "a session without step-up makes no token");
      assert.equal(bare.json.error.code, "reauthentication_required");
      const parent = await dora.request("POST", "/api/v1/api-tokens", { ...wanted, password: dora.password });
      assert.equal(parent.status, 201, parent.text);

      // The parent token, even with the user's password as step-up, cannot mint a longer-lived child.
      for (const attempt of [{}, { password: dora.password }]) {
        const child = await withToken(server, parent.json.token, "POST", "/api/v1/api-tokens", {
          name: "child",
          expires_in_days: 365,
          ...attempt,
        });
        assert.equal(child.status, 403, child.text);
        assert.equal(child.json.error.code, "api_token_cannot_create_tokens");
        assert.match(child.json.error.message, /create tokens from a signed-in session .* step-up/);
      }
      const forOthers = await withToken(server, parent.json.token, "POST", "/api/v1/api-tokens", {
        name: "child",
        expires_in_days: 1,
        user_id: dora.user.id,
        password: dora.password,
      });
      assert.equal(forOthers.status, 403, forOthers.text);
      const rows = await db.query<{ name: string }>("SELECT name FROM api_tokens ORDER BY name");
      assert.deepEqual(rows.map((r) => r.name), ["parent"], "no child token exists");

      // Revoking is unaffected: the token may still revoke itself.
      const revoked = await withToken(
        server,
        parent.json.token,
        "DELETE",
        `/api/v1/api-tokens/${parent.json.api_token.id}`,
      );
      assert.equal(revoked.status, 200, revoked.text);
      assert.equal((await withToken(server, parent.json.token, "GET", "/api/v1/auth/me")).status, 401);
    } finally {
      await server.close();
    }
  },
);
