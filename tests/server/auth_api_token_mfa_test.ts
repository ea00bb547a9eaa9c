/**
 * API tokens and the MFA policy: a token acts without a second factor, so a user whom the policy requires to
 * have one can create a token for themselves only with step-up (password and that factor) in the same
 * request; the token then works on its own. Users the policy does not cover create theirs as before.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, type TestClient } from "../helpers/app.ts";
import { base32Decode, hotp, totpStep } from "../../server/auth/totp.ts";

const JWT_SECRET = "test-jwt-secret-for-token-mfa-0123456789ab";

/** Enrols `client` in TOTP; returns the backup codes. */
async function enrol(client: TestClient): Promise<string[]> {
  const start = await client.request("POST", "/api/v1/auth/mfa/totp", { password: client.password });
  assert.equal(start.status, 200, start.text);
  const code = await hotp(base32Decode(start.json.secret), totpStep(Date.now()));
  const confirm = await client.request("POST", "/api/v1/auth/mfa/totp/confirm", { code });
  assert.equal(confirm.status, 200, confirm.text);
  return confirm.json.backup_codes;
}

dbTest(
  "a user the MFA policy covers creates API tokens only with step-up; the token then works",
  async (db) => {
    const server = await createTestServer({ db, config: { security: { jwtSecret: JWT_SECRET } } });
    try {
      const boss = await server.loginAs({ username: "boss", superAdmin: true });
      const tina = await server.loginAs({ username: "tina", permissions: ["node:view", "settings:view"] });
      const olga = await server.loginAs({ username: "olga", permissions: ["node:view"] });
      const policy = await boss.request("PUT", "/api/v1/settings/mfa", {
        mode: "permissions",
        permissions: ["settings:view"],
        password: boss.password,
      });
      assert.equal(policy.status, 200, policy.text);
      const codes = await enrol(tina);

      const wanted = { name: "nightly", expires_in_days: 30 };
      const bare = await tina.request("POST", "/api/v1/api-tokens", wanted);
      assert.equal(bare.status, 403, bare.text);
      assert.equal(bare.json.error.code, "reauthentication_required");
      const passwordOnly = await tina.request("POST", "/api/v1/api-tokens", {
        ...wanted,
        password: tina.password,
      });
      assert.equal(passwordOnly.json?.error?.code, "second_factor_required", passwordOnly.text);
      assert.equal((await db.query("SELECT 1 FROM api_tokens")).length, 0, "refused calls made no token");

      const made = await tina.request("POST", "/api/v1/api-tokens", {
        ...wanted,
        step_up: { password: tina.password, backup_code: codes[0] },
      });
      assert.equal(made.status, 201, made.text);
      // The token stays valid on its own: no second factor at each request.
      const me = await server.anonymous().raw("GET", "/api/v1/settings/mfa", {
        cookies: false,
        headers: { authorization: `Bearer ${made.json.token}` },
      });
      assert.equal(me.status, 200, me.text);

      // Not covered by the policy: the password alone is the step-up.
      const plain = await olga.request("POST", "/api/v1/api-tokens", { ...wanted, password: olga.password });
      assert.equal(plain.status, 201, plain.text);

      const text = JSON.stringify(await db.query("SELECT details FROM audit_logs"));
      assert.ok(
        !text.includes(codes[0]) && !text.includes(tina.password),
        "the proof is masked in the audit",
      );
    } finally {
      await server.close();
    }
  },
);
