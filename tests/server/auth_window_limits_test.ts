/**
 * The database-backed window limits (server/auth/rate_limit.ts createWindowLimiter): failed step-ups and
 * wrong current passwords are counted in the database, so two replicas (two apps on one database here) share
 * them, also when the step-up was refused inside a rolled-back transaction; anonymous passkey challenges are
 * limited per client address (429 with Retry-After) without touching other addresses.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, type TestClient, type TestServer } from "../helpers/app.ts";
import { createWindowLimiter } from "../../server/auth/rate_limit.ts";
import { STEP_UP_LIMIT } from "../../server/auth/step_up.ts";
import { OWN_PASSWORD_LIMIT } from "../../server/auth/services.ts";
import { PASSKEY_CHALLENGE_LIMIT } from "../../server/http/routes/auth_kit.ts";

const JWT_SECRET = "test-jwt-secret-for-window-limits-0123456789";

/** Two replicas: two apps on the same database with the same secrets. */
async function replicas(db: Parameters<typeof createTestServer>[0]["db"]): Promise<[TestServer, TestServer]> {
  const config = { security: { jwtSecret: JWT_SECRET } };
  const a = await createTestServer({ db, config });
  try {
    return [a, await createTestServer({ db, config })];
  } catch (err) {
    await a.close();
    throw err;
  }
}

/** Logs `username` in on `server` (a second replica's client for the same account). */
async function loginOn(
  server: TestServer,
  username: string,
  password: string,
  ip: string,
): Promise<TestClient> {
  const client = server.anonymous({ ip });
  const res = await client.request("POST", "/api/v1/auth/login", { username, password });
  assert.equal(res.status, 200, res.text);
  return client;
}

function assertLimited(res: { status: number; text: string; headers: Headers }, what: string): number {
  assert.equal(res.status, 429, `${what}: ${res.status} ${res.text}`);
  const wait = Number(res.headers.get("retry-after"));
  assert.ok(Number.isInteger(wait) && wait >= 1, `${what}: Retry-After ${res.headers.get("retry-after")}`);
  return wait;
}

dbTest("failed step-ups are counted in the database: the other replica refuses too", async (db) => {
  const [a, b] = await replicas(db);
  try {
    const chief = await a.loginAs({ username: "chief", superAdmin: true, ip: "127.0.0.21" });
    const wrongStepUps = async (client: TestClient, count: number) => {
      for (let i = 0; i < count; i++) {
        const res = await client.request("POST", "/api/v1/auth/mfa/totp", {
          password: `wrong-${i}-xxxxxxxx`,
        });
        assert.equal(res.json?.error?.code, "reauthentication_failed", res.text);
      }
    };
    await wrongStepUps(chief, STEP_UP_LIMIT.perAccountAndAddress);
    // The right password on the other replica from the same address: that address is over its limit.
    const sameAddress = await loginOn(b, "chief", chief.password, "127.0.0.21");
    const wait = assertLimited(
      await sameAddress.request("POST", "/api/v1/auth/mfa/totp", { password: chief.password }),
      "step-up on replica B from the same address",
    );
    assert.ok(wait <= STEP_UP_LIMIT.windowSeconds, `Retry-After ${wait}`);
    // Failures from a second address on replica B use up the account's allowance: now every address waits.
    const elsewhere = await loginOn(b, "chief", chief.password, "127.0.0.23");
    await wrongStepUps(elsewhere, STEP_UP_LIMIT.perAccount - STEP_UP_LIMIT.perAccountAndAddress);
    const third = await loginOn(a, "chief", chief.password, "127.0.0.22");
    assertLimited(
      await third.request("POST", "/api/v1/auth/mfa/totp", { password: chief.password }),
      "step-up on replica A from a third address",
    );
  } finally {
    await b.close();
    await a.close();
  }
});

dbTest(
  "a user failing step-ups on purpose does not lock out an administrator behind the same address",
  async (db) => {
    const server = await createTestServer({ db, config: { security: { jwtSecret: JWT_SECRET } } });
    try {
      const office = "127.0.0.61";
      const mallory = await server.loginAs({ username: "mallory", permissions: [], ip: office });
      const chief = await server.loginAs({ username: "chief", superAdmin: true, ip: office });
      for (let i = 0; i <= STEP_UP_LIMIT.perAccountAndAddress; i++) {
        const res = await mallory.request("POST", "/api/v1/auth/mfa/totp", {
          password: `wrong-${i}-xxxxxxxx`,
        });
        assert.equal(
          res.json?.error?.code,
          i < STEP_UP_LIMIT.perAccountAndAddress ? "reauthentication_failed" : "too_many_attempts",
          `mallory's attempt ${i + 1}: ${res.text}`,
        );
      }
      const admin = await chief.request("POST", "/api/v1/auth/mfa/totp", { password: chief.password });
      assert.equal(admin.status, 200, `the administrator's own step-up from the office: ${admin.text}`);
      assertLimited(
        await mallory.request("POST", "/api/v1/auth/mfa/totp", { password: mallory.password }),
        "mallory is still limited, even with her right password",
      );
    } finally {
      await server.close();
    }
  },
);

dbTest(
  "step-ups refused in an audited request (role bindings) are counted after its rollback",
  async (db) => {
    const [a, b] = await replicas(db);
    try {
      const chief = await a.loginAs({ username: "chief", superAdmin: true, ip: "127.0.0.31" });
      const frank = await a.loginAs({ username: "frank", permissions: [] });
      const [{ id: auditor }] = await db.query<{ id: string }>("SELECT id FROM roles WHERE name = 'Auditor'");
      const path = `/api/v1/users/${frank.user.id}/role-bindings`;
      for (let i = 0; i < STEP_UP_LIMIT.perAccountAndAddress; i++) {
        const res = await chief.request("POST", path, { role_id: auditor, password: `wrong-${i}-xxxxxxxx` });
        assert.equal(res.json?.error?.code, "reauthentication_failed", res.text);
      }
      const onB = await loginOn(b, "chief", chief.password, "127.0.0.31");
      assertLimited(
        await onB.request("POST", path, { role_id: auditor, step_up: { password: chief.password } }),
        "binding on replica B",
      );
      const bound = await db.query("SELECT 1 FROM role_bindings WHERE user_id = $1 AND role_id = $2", [
        frank.user.id,
        auditor,
      ]);
      assert.equal(bound.length, 0);
    } finally {
      await b.close();
      await a.close();
    }
  },
);

dbTest("wrong current passwords are counted in the database: the other replica refuses too", async (db) => {
  const [a, b] = await replicas(db);
  try {
    const erin = await a.loginAs({ username: "erin", permissions: [], ip: "127.0.0.41" });
    for (let i = 0; i < OWN_PASSWORD_LIMIT.max; i++) {
      const res = await erin.request("PUT", "/api/v1/auth/password", {
        current_password: `wrong-${i}-xxxxxxxx`,
        new_password: "a-new-password-0123456",
      });
      assert.equal(res.json?.error?.code, "wrong_password", res.text);
    }
    const onB = await loginOn(b, "erin", erin.password, "127.0.0.42");
    assertLimited(
      await onB.request("PUT", "/api/v1/auth/password", {
        current_password: erin.password,
        new_password: "a-new-password-0123456",
      }),
      "password change on replica B",
    );
  } finally {
    await b.close();
    await a.close();
  }
});

dbTest("anonymous passkey challenges are limited per address, on every replica", async (db) => {
  const [a, b] = await replicas(db);
  try {
    const options = (server: TestServer, ip: string) =>
      server.anonymous({ ip }).request("POST", "/api/v1/auth/login/webauthn/options", {});
    const pendingRows = async () =>
      (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM pending_logins"))[0].n;
    const before = await pendingRows();
    for (let i = 0; i < PASSKEY_CHALLENGE_LIMIT.max; i++) {
      const res = await options(i % 2 ? a : b, "127.0.0.51");
      assert.equal(res.status, 200, `challenge ${i + 1}: ${res.text}`);
    }
    const wait = assertLimited(await options(a, "127.0.0.51"), "one more on replica A");
    assert.ok(wait <= PASSKEY_CHALLENGE_LIMIT.windowSeconds, `Retry-After ${wait}`);
    assertLimited(await options(b, "127.0.0.51"), "one more on replica B");
    assert.equal(
      await pendingRows(),
      before + PASSKEY_CHALLENGE_LIMIT.max,
      "refused calls store no challenge",
    );
    // Another address is not affected.
    const other = await options(b, "127.0.0.52");
    assert.equal(other.status, 200, other.text);
    assert.ok(other.json.token && other.json.options?.challenge);
  } finally {
    await b.close();
    await a.close();
  }
});

dbTest("window limiter: a fixed window per key, refused uses not counted, reset clears a key", async (db) => {
  let now = new Date("2026-01-01T00:00:00Z");
  const limiter = createWindowLimiter(db, { max: 3, windowSeconds: 60, now: () => now });
  const keys = ["ip:a", "user:x"];
  const later = (seconds: number) => now = new Date(now.getTime() + seconds * 1000);
  for (let i = 0; i < 3; i++) {
    assert.equal(await limiter.retryAfter(db, keys), 0);
    await limiter.fail(db, keys);
    later(10);
  }
  // The window started at 0 s and ends at 60 s; now = 30 s.
  assert.equal(await limiter.retryAfter(db, keys), 30);
  later(29);
  assert.equal(await limiter.retryAfter(db, keys), 1);
  later(1);
  assert.equal(await limiter.retryAfter(db, keys), 0, "the window ended");
  await limiter.fail(db, keys);
  assert.equal(await limiter.retryAfter(db, keys), 0, "a new window with one failure");
  await limiter.fail(db, keys);
  await limiter.fail(db, keys);
  assert.equal(await limiter.retryAfter(db, ["user:x"]), 60);
  await limiter.reset(db, "user:x");
  assert.equal(await limiter.retryAfter(db, ["user:x"]), 0);
  assert.equal(await limiter.retryAfter(db, ["ip:a"]), 60, "the address stays limited");

  for (let i = 0; i < 3; i++) assert.equal(await limiter.take(db, "take:k"), 0, `use ${i + 1}`);
  later(20);
  assert.equal(await limiter.take(db, "take:k"), 40);
  assert.equal(await limiter.take(db, "take:k"), 40, "a refused use does not extend the window");
  later(40);
  assert.equal(await limiter.take(db, "take:k"), 0, "the next window");
  const concurrent = await Promise.all(Array.from({ length: 6 }, () => limiter.take(db, "take:c")));
  assert.equal(concurrent.filter((w) => w === 0).length, 3, "concurrent uses cannot pass the limit together");
  const rows = await db.query<{ key: string }>("SELECT key FROM login_throttle");
  assert.ok(rows.every((r) => /^[0-9a-f]{64}$/.test(r.key)), "only digests are stored");
});
