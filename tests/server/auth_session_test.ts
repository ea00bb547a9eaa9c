/** Sessions end to end through the real app: cookies, CSRF, expiry, refresh rotation, logout, bearer tokens. */
import assert from "node:assert/strict";
import { SignJWT } from "jose";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, serverTest, type TestClient } from "../helpers/app.ts";
import { REFRESH_REUSE_GRACE_SECONDS } from "../../server/auth/sessions.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function setCookieLines(headers: Headers): Map<string, string> {
  return new Map(headers.getSetCookie().map((line) => [line.slice(0, line.indexOf("=")), line]));
}

async function createGroup(client: TestClient, name: string) {
  return await client.request("POST", "/api/v1/user-groups", { name });
}

dbTest(
  "cookie flow: login, me, CSRF, expiry, refresh, retry, replayed refresh token kills the session",
  async (db) => {
    const server = await createTestServer({
      db,
      // A short access-token life keeps the expiry step quick, yet long enough for a loaded CI machine to finish
      // the steps before it.
      config: { security: { accessTokenTtlSeconds: 5, refreshTokenTtlSeconds: 3600 } },
    });
    try {
      const alice = await server.loginAs({
        permissions: ["user_group:create", "user_group:view"],
        username: "alice",
      });

      // Cookie attributes as the spec demands.
      const login = await alice.raw("POST", "/api/v1/auth/login", {
        body: { username: "alice", password: alice.password },
      });
      assert.equal(login.status, 200, login.text);
      const lines = setCookieLines(login.headers);
      const session = lines.get("svc_session")!;
      const refresh = lines.get("svc_refresh")!;
      const csrf = lines.get("svc_csrf")!;
      for (const line of [session, refresh, csrf]) {
        assert.match(line, /; Secure/);
        assert.match(line, /; SameSite=Strict/);
      }
      assert.match(session, /; HttpOnly/);
      assert.match(session, /Max-Age=3600/, "the session cookie lives as long as the refresh token");
      assert.match(session, /; Path=\/(;|$)/);
      assert.match(refresh, /; HttpOnly/);
      assert.match(refresh, /; Path=\/api\/v1\/auth\/refresh(;|$)/);
      assert.doesNotMatch(csrf, /HttpOnly/);
      assert.equal(login.json.user.username, "alice");

      const me = await alice.request("GET", "/api/v1/auth/me");
      assert.equal(me.status, 200);
      assert.deepEqual(me.json.permissions, ["user_group:create", "user_group:view"]);
      assert.equal(me.json.edition, "community");
      assert.deepEqual(me.json.features, { scoped_role_bindings: false, mfa: true, ldap: false });
      assert.deepEqual(Object.keys(me.json.user).sort(), ["email", "full_name", "id", "source", "username"]);

      // Mutating call: no header, wrong header, right header.
      const missing = await alice.raw("POST", "/api/v1/user-groups", { body: { name: "g1" }, csrf: null });
      assert.equal(missing.status, 403);
      assert.equal(missing.json.error.code, "csrf_missing");
      const wrong = await alice.raw("POST", "/api/v1/user-groups", {
        body: { name: "g1" },
        csrf: "x".repeat(43),
      });
      assert.equal(wrong.status, 403);
      assert.equal(wrong.json.error.code, "csrf_invalid");
      assert.equal(
        (await server.ctx.db.query("SELECT 1 FROM user_groups")).length,
        0,
        "rejected calls changed nothing",
      );
      const right = await createGroup(alice, "g1");
      assert.equal(right.status, 201, right.text);

      // After expiry: the cookie is still sent (it outlives the token so logout can find the session), the JWT
      // expiry refuses it, also when replayed as a bearer token.
      const expiredToken = alice.cookie("svc_session")!;
      await sleep(6100);
      assert.equal(
        alice.cookie("svc_session"),
        expiredToken,
        "the cookie outlives the token; the JWT exp is what fails",
      );
      const expired = await alice.request("GET", "/api/v1/auth/me");
      assert.equal(expired.status, 401);
      assert.equal(expired.json.error.code, "unauthorized");
      const expiredBearer = await alice.raw("GET", "/api/v1/auth/me", {
        cookies: false,
        headers: { authorization: `Bearer ${expiredToken}` },
      });
      assert.equal(expiredBearer.status, 401);

      // Refresh: new session, rotated refresh token, same CSRF token (in-flight requests keep working).
      const oldRefresh = alice.cookie("svc_refresh")!;
      const oldCsrf = alice.cookie("svc_csrf")!;
      const refreshed = await alice.refresh();
      assert.equal(refreshed.status, 200, refreshed.text);
      assert.notEqual(alice.cookie("svc_refresh"), oldRefresh, "the refresh token rotates");
      assert.notEqual(alice.cookie("svc_session"), expiredToken);
      assert.equal(alice.cookie("svc_csrf"), oldCsrf);
      const retry = await createGroup(alice, "g2");
      assert.equal(retry.status, 201, retry.text);

      // An attacker replays the old refresh token after the grace period two tabs get (aged here rather than
      // waited for): the whole family dies, including the fresh session.
      await server.ctx.db.query(
        "UPDATE refresh_tokens SET used_at = used_at - make_interval(secs => $1::int) WHERE used_at IS NOT NULL",
        [REFRESH_REUSE_GRACE_SECONDS + 1],
      );
      const attacker = server.anonymous({ ip: "203.0.113.9" });
      attacker.cookies.set("svc_refresh", { value: oldRefresh, path: "/api/v1/auth/refresh" });
      const replay = await attacker.refresh();
      assert.equal(replay.status, 401);
      const after = await alice.request("GET", "/api/v1/auth/me");
      assert.equal(after.status, 401, "the session that shared the family is revoked");
      const aliceRefresh = await alice.refresh();
      assert.equal(aliceRefresh.status, 401, "the newest refresh token of the family is revoked too");
      const reuseRows = await server.ctx.db.query<{ outcome: string; source_ip: string }>(
        "SELECT outcome, source_ip FROM audit_logs WHERE action = 'auth.refresh_reuse'",
      );
      assert.deepEqual(reuseRows, [{ outcome: "denied", source_ip: "203.0.113.9" }]);

      // A new login starts an independent session.
      const again = await alice.request("POST", "/api/v1/auth/login", {
        username: "alice",
        password: alice.password,
      });
      assert.equal(again.status, 200);
      assert.equal((await alice.request("GET", "/api/v1/auth/me")).status, 200);
    } finally {
      await server.close();
    }
  },
);

serverTest(
  "logout revokes the session server-side; other sessions of the user keep working",
  async (server) => {
    const a = await server.loginAs({ permissions: [], username: "bob" });
    const b = server.anonymous();
    assert.equal(
      (await b.request("POST", "/api/v1/auth/login", { username: "bob", password: a.password })).status,
      200,
    );
    const stolen = a.cookie("svc_session")!;
    const stolenRefresh = a.cookie("svc_refresh")!;

    const out = await a.request("POST", "/api/v1/auth/logout");
    assert.equal(out.status, 204);
    assert.equal(a.cookie("svc_session"), undefined, "cookies are cleared");
    assert.equal(a.cookie("svc_csrf"), undefined);

    const replay = await server.anonymous().raw("GET", "/api/v1/auth/me", {
      headers: { authorization: `Bearer ${stolen}` },
    });
    assert.equal(replay.status, 401, "a copied access token dies with the session");
    const thief = server.anonymous();
    thief.cookies.set("svc_refresh", { value: stolenRefresh, path: "/api/v1/auth/refresh" });
    assert.equal((await thief.refresh()).status, 401, "its refresh token too");

    assert.equal((await b.request("GET", "/api/v1/auth/me")).status, 200, "the other session is untouched");
    const rows = await server.ctx.db.query<{ username: string }>(
      "SELECT username FROM audit_logs WHERE action = 'auth.logout'",
    );
    assert.deepEqual(rows, [{ username: "bob" }]);

    // Logout itself is CSRF-protected (no forced logout from another site).
    const forced = await b.raw("POST", "/api/v1/auth/logout", { csrf: null });
    assert.equal(forced.status, 403);
    assert.equal((await b.request("GET", "/api/v1/auth/me")).status, 200);
  },
);

dbTest("bearer tokens work for REST clients; forged, tampered and unsigned tokens do not", async (db) => {
  const server = await createTestServer({ db, config: { security: { jwtSecret: "k".repeat(40) } } });
  try {
    const c = await server.loginAs({ permissions: ["user_group:create", "user_group:view"] });
    const token = c.cookie("svc_session")!;
    const script = server.anonymous();
    const ok = await script.raw("GET", "/api/v1/user-groups", {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(ok.status, 200, ok.text);

    // A script mutating with a bearer token still performs double submit (cookie + header).
    const csrf = c.cookie("svc_csrf")!;
    script.cookies.set("svc_csrf", { value: csrf, path: "/" });
    const made = await script.raw("POST", "/api/v1/user-groups", {
      body: { name: "from-script" },
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(made.status, 201, made.text);

    const [h, p, sig] = token.split(".");
    const claims = JSON.parse(atob(p.replaceAll("-", "+").replaceAll("_", "/")));
    const other = await server.loginAs({ superAdmin: true });
    const b64 = (o: unknown) =>
      btoa(JSON.stringify(o)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
    const forgedClaims = b64({ ...claims, sub: other.user.id });
    const attempts = {
      tampered: `${h}.${forgedClaims}.${sig}`,
      unsigned: `${b64({ alg: "none", typ: "JWT" })}.${forgedClaims}.`,
      wrongKey: await new SignJWT({ ...claims, sub: other.user.id })
        .setProtectedHeader({ alg: "HS256" })
        .sign(new TextEncoder().encode("another-secret-that-is-long-enough!!")),
      garbage: "not-a-jwt",
    };
    for (const [name, forged] of Object.entries(attempts)) {
      const res = await server.anonymous().raw("GET", "/api/v1/auth/me", {
        headers: { authorization: `Bearer ${forged}` },
      });
      assert.equal(res.status, 401, name);
    }
  } finally {
    await server.close();
  }
});

serverTest(
  "a CSRF cookie planted by another site does not match the session (token binding)",
  async (server) => {
    const victim = await server.loginAs({ permissions: ["user_group:create"] });
    // A sibling sub-domain can set svc_csrf for the parent domain and send the matching header: plain double
    // submit would pass. The access token is bound to the real CSRF token, so the pair is refused.
    const planted = "A".repeat(43);
    victim.cookies.set("svc_csrf", { value: planted, path: "/" });
    const res = await victim.raw("POST", "/api/v1/user-groups", { body: { name: "evil" }, csrf: planted });
    assert.equal(res.status, 403);
    assert.equal(res.json.error.code, "csrf_invalid");
    assert.equal((await server.ctx.db.query("SELECT 1 FROM user_groups")).length, 0);

    // Refresh does not adopt the planted cookie: it re-issues the session's own token.
    assert.equal((await victim.refresh()).status, 200);
    assert.notEqual(victim.cookie("svc_csrf"), planted);
    const again = await victim.raw("POST", "/api/v1/user-groups", { body: { name: "evil" }, csrf: planted });
    assert.equal(again.status, 403);
    const own = await victim.request("POST", "/api/v1/user-groups", { name: "legit" });
    assert.equal(own.status, 201, "the session's own token passes");
  },
);

serverTest(
  "login and refresh refuse requests a browser marks as cross-site (login CSRF)",
  async (server) => {
    const user = await server.loginAs({ permissions: [], username: "frank" });
    const forged = await server.anonymous().raw("POST", "/api/v1/auth/login", {
      body: { username: "frank", password: user.password },
      headers: { "sec-fetch-site": "cross-site" },
    });
    assert.equal(forged.status, 403);
    assert.equal(forged.json.error.code, "cross_site");
    assert.equal(forged.headers.getSetCookie().length, 0);
    const crossRefresh = await user.raw("POST", "/api/v1/auth/refresh", {
      headers: { "sec-fetch-site": "cross-site" },
    });
    assert.equal(crossRefresh.status, 403);
    const sameOrigin = await server.anonymous().raw("POST", "/api/v1/auth/login", {
      body: { username: "frank", password: user.password },
      headers: { "sec-fetch-site": "same-origin" },
    });
    assert.equal(sameOrigin.status, 200);
  },
);

serverTest("disabling a user or changing a password revokes live tokens at once", async (server) => {
  const admin = await server.loginAs({ superAdmin: true });
  const carol = await server.loginAs({ permissions: ["user_group:view"], username: "carol" });
  const carol2 = server.anonymous();
  await carol2.request("POST", "/api/v1/auth/login", { username: "carol", password: carol.password });

  // Own password change: the caller keeps a fresh session, every other session ends immediately.
  const wrongCurrent = await carol.request("PUT", "/api/v1/auth/password", {
    current_password: "not-the-password",
    new_password: "a-brand-new-password",
  });
  assert.equal(wrongCurrent.status, 403);
  const tooShort = await carol.request("PUT", "/api/v1/auth/password", {
    current_password: carol.password,
    new_password: "short",
  });
  assert.equal(tooShort.status, 400);
  assert.match(tooShort.json.error.message, /new_password.*12/);
  const changed = await carol.request("PUT", "/api/v1/auth/password", {
    current_password: carol.password,
    new_password: "a-brand-new-password",
  });
  assert.equal(changed.status, 204, changed.text);
  assert.equal(
    (await carol.request("GET", "/api/v1/auth/me")).status,
    200,
    "the caller got a fresh session",
  );
  assert.equal((await carol2.request("GET", "/api/v1/auth/me")).status, 401, "the other session ended");
  assert.equal((await carol2.refresh()).status, 401);
  const oldPw = await server.anonymous().request("POST", "/api/v1/auth/login", {
    username: "carol",
    password: carol.password,
  });
  assert.equal(oldPw.status, 401);
  const [row] = await server.ctx.db.query<{ details: { body: Record<string, string> } }>(
    "SELECT details FROM audit_logs WHERE action = 'user.password_change' AND outcome = 'success'",
  );
  assert.deepEqual(row.details.body, { current_password: "[REDACTED]", new_password: "[REDACTED]" });

  // Disable: the live session dies on its next request; a correct password no longer logs in.
  const disabled = await admin.request("PUT", `/api/v1/users/${carol.user.id}`, { enabled: false });
  assert.equal(disabled.status, 200, disabled.text);
  assert.equal((await carol.request("GET", "/api/v1/auth/me")).status, 401);
  assert.equal((await carol.refresh()).status, 401);
  const login = await server.anonymous().request("POST", "/api/v1/auth/login", {
    username: "carol",
    password: "a-brand-new-password",
  });
  assert.equal(login.status, 401);
  assert.equal(login.json.error.message, "invalid username or password");

  // Admin reset: same effect on live tokens.
  await admin.request("PUT", `/api/v1/users/${carol.user.id}`, { enabled: true });
  const dave = await server.loginAs({ permissions: [], username: "dave" });
  const reset = await admin.request("PUT", `/api/v1/users/${dave.user.id}/password`, {
    new_password: "reset-by-the-admin",
  });
  assert.equal(reset.status, 204, reset.text);
  assert.equal((await dave.request("GET", "/api/v1/auth/me")).status, 401);
});

serverTest("login errors are the same for an unknown user and a wrong password", async (server) => {
  await server.loginAs({ permissions: [], username: "erin" });
  const anon = server.anonymous();
  const unknown = await anon.request("POST", "/api/v1/auth/login", {
    username: "nobody-here",
    password: "x".repeat(12),
  });
  const wrong = await anon.request("POST", "/api/v1/auth/login", {
    username: "erin",
    password: "x".repeat(12),
  });
  assert.equal(unknown.status, 401);
  assert.equal(wrong.status, 401);
  assert.deepEqual(unknown.json, wrong.json);
  assert.equal(unknown.headers.getSetCookie().length, 0);
  const rows = await server.ctx.db.query<{ outcome: string; username: string; reason: string }>(
    `SELECT outcome, username, details->>'reason' AS reason FROM audit_logs
        WHERE action = 'auth.login' AND outcome = 'failure' ORDER BY id`,
  );
  assert.deepEqual(rows, [
    { outcome: "failure", username: "nobody-here", reason: "unknown_user" },
    { outcome: "failure", username: "erin", reason: "wrong_password" },
  ]);
});

dbTest("without JWT_SECRET a warning is logged and sessions do not survive a restart", async (db) => {
  const first = await createTestServer({ db });
  const second = await createTestServer({ db });
  try {
    assert.ok(first.logs.some((l) => l.includes("WARN") && l.includes("JWT_SECRET is not set")));
    const c = await first.loginAs({ permissions: [] });
    const token = c.cookie("svc_session")!;
    const res = await second.anonymous().raw("GET", "/api/v1/auth/me", {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(res.status, 401, "a token from the previous boot's random key is refused");
    const same = await first.anonymous().raw("GET", "/api/v1/auth/me", {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(same.status, 200);
  } finally {
    await first.close();
    await second.close();
  }
});

dbTest("logout after the access token expired still ends the session server-side", async (db) => {
  const server = await createTestServer({ db, config: { security: { accessTokenTtlSeconds: 1 } } });
  try {
    const user = await server.loginAs({ permissions: [] });
    const refresh = user.cookie("svc_refresh")!;
    await sleep(1100);
    assert.equal((await user.request("GET", "/api/v1/auth/me")).status, 401);
    assert.equal((await user.request("POST", "/api/v1/auth/logout")).status, 204);
    const thief = server.anonymous();
    thief.cookies.set("svc_refresh", { value: refresh, path: "/api/v1/auth/refresh" });
    assert.equal((await thief.refresh()).status, 401, "the refresh token left behind is dead");
  } finally {
    await server.close();
  }
});
