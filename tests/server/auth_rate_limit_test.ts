/**
 * Login brute-force protection that attackers cannot turn against users: limits per source address and per
 * (account, address) with progressive delays, a per-account limit that never refuses a clean address, all
 * counted in the database (replicas share them). Addresses are on 127.0.0.0/8. The window limiter that
 * guards step-up, password changes and passkey challenges is tested in auth_window_limits_test.ts.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, serverTest, type TestResponse, type TestServer } from "../helpers/app.ts";
import { createLoginThrottle, LOGIN_THROTTLE } from "../../server/auth/rate_limit.ts";
import { migrate, openPglite } from "../../server/db/mod.ts";

const LOGIN = "/api/v1/auth/login";

/** Logs in as `username` from `ip` (a fresh anonymous client on 127.0.0.0/8). */
function attempt(server: TestServer, ip: string, username: string, password: string): Promise<TestResponse> {
  return server.anonymous({ ip }).request("POST", LOGIN, { username, password });
}

function assertThrottled(res: TestResponse, what: string): number {
  assert.equal(res.status, 429, `${what}: ${res.status} ${res.text}`);
  assert.equal(res.json.error.code, "rate_limited");
  const retryAfter = Number(res.headers.get("retry-after"));
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `${what}: Retry-After ${retryAfter}`);
  assert.equal(res.headers.getSetCookie().length, 0, `${what}: no session while throttled`);
  return retryAfter;
}

serverTest(
  "an attacker hammering one account from 127.0.0.2 never locks out its owner on 127.0.0.3",
  async (server) => {
    const victim = await server.loginAs({ permissions: [], username: "victim" });
    const free = LOGIN_THROTTLE.accountAddress.free;
    for (let i = 0; i < free; i++) {
      const res = await attempt(server, "127.0.0.2", "victim", `guess-${i}-xxxxxx`);
      assert.equal(res.status, 401, `guess ${i + 1}: ${res.text}`);
    }
    // Beyond the allowance the attacker's address waits, even with the right password (guessing cannot go on).
    const retryAfter = assertThrottled(
      await attempt(server, "127.0.0.2", "victim", "guess-x-xxxxxx"),
      "guess",
    );
    assert.ok(retryAfter <= LOGIN_THROTTLE.accountAddress.baseSeconds, `Retry-After ${retryAfter}`);
    assertThrottled(
      await attempt(server, "127.0.0.2", "VICTIM", victim.password),
      "right password, same address",
    );
    // The owner, from an address with no failures, logs in at once, as often as they like.
    for (let i = 0; i < 3; i++) {
      const owner = await attempt(server, "127.0.0.3", "victim", victim.password);
      assert.equal(owner.status, 200, `owner login ${i + 1}: ${owner.text}`);
    }
    // The victim's existing session is untouched.
    assert.equal((await victim.request("GET", "/api/v1/auth/me")).status, 200);
  },
);

serverTest(
  "per address: one address guessing many accounts is slowed down for every account",
  async (server) => {
    const bystander = await server.loginAs({ permissions: [], username: "bystander" });
    for (let i = 0; i < LOGIN_THROTTLE.address.free; i++) {
      const res = await attempt(server, "127.0.0.5", `nobody-${i}`, "guess-xxxxxxxx");
      assert.equal(res.status, 401, `spray ${i + 1}: ${res.text}`);
    }
    assertThrottled(await attempt(server, "127.0.0.5", "bystander", bystander.password), "sprayer's address");
    const elsewhere = await attempt(server, "127.0.0.6", "bystander", bystander.password);
    assert.equal(elsewhere.status, 200, elsewhere.text);
  },
);

serverTest(
  "an account under attack from many addresses still opens for its owner from a clean address",
  async (server) => {
    const owner = await server.loginAs({ permissions: [], username: "target" });
    // Guesses spread over addresses, each staying below its own allowance, until the account is under attack.
    const perAddress = LOGIN_THROTTLE.accountAddress.free - 1;
    for (let n = 0; n < LOGIN_THROTTLE.accountUnderAttack; n++) {
      const ip = `127.0.1.${Math.floor(n / perAddress) + 1}`;
      const res = await attempt(server, ip, "target", `guess-${n}-xxxxxx`);
      assert.equal(res.status, 401, `guess ${n + 1} from ${ip}: ${res.text}`);
    }
    // Every attacking address is below its own allowance, but the account is under attack: addresses with
    // failures for it wait, whatever password they send.
    assertThrottled(await attempt(server, "127.0.1.1", "target", owner.password), "attacking address");
    // A clean address is never refused: the owner logs in …
    assert.equal((await attempt(server, "127.0.0.3", "target", owner.password)).status, 200);
    // … and a new attacking address gets one guess, then waits like the others.
    assert.equal((await attempt(server, "127.0.0.4", "target", "guess-new-xxxxx")).status, 401);
    assertThrottled(
      await attempt(server, "127.0.0.4", "target", owner.password),
      "new attacker after a guess",
    );
  },
);

serverTest("concurrent guesses cannot slip past the allowance together", async (server) => {
  await server.loginAs({ permissions: [], username: "racer" });
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) => attempt(server, "127.0.0.7", "racer", `guess-${i}-xxxxxx`)),
  );
  const statuses = results.map((r) => r.status).sort();
  assert.equal(
    statuses.filter((s) => s === 401).length,
    LOGIN_THROTTLE.accountAddress.free,
    String(statuses),
  );
  assert.equal(statuses.filter((s) => s === 429).length, 20 - LOGIN_THROTTLE.accountAddress.free);
});

dbTest("replicas share the counts: failures through one server throttle the other", async (db) => {
  const a = await createTestServer({ db });
  const b = await createTestServer({ db });
  try {
    const user = await a.loginAs({ permissions: [], username: "shared" });
    for (let i = 0; i < LOGIN_THROTTLE.accountAddress.free; i++) {
      assert.equal((await attempt(a, "127.0.0.8", "shared", `guess-${i}-xxxxxx`)).status, 401);
    }
    assertThrottled(await attempt(b, "127.0.0.8", "shared", user.password), "the other replica");
    assert.equal((await attempt(b, "127.0.0.9", "shared", user.password)).status, 200);
  } finally {
    await a.close();
    await b.close();
  }
});

Deno.test("throttle: progressive delays, expiry after the window, a right password gives its attempt back", async () => {
  const db = await openPglite();
  await migrate(db);
  try {
    let now = new Date("2030-01-01T00:00:00Z");
    const throttle = createLoginThrottle(db, {
      address: { free: 100, baseSeconds: 10, capSeconds: 60 },
      accountAddress: { free: 2, baseSeconds: 10, capSeconds: 60 },
      accountUnderAttack: 1000,
      windowSeconds: 600,
      now: () => now,
    });
    const tryOnce = async (ok: boolean) => {
      const v = await throttle.attempt("Alice", "127.0.0.2");
      if (v.allowed) await v.settle(ok);
      return v.allowed ? 0 : v.retryAfterSeconds;
    };
    const advance = (s: number) => now = new Date(now.getTime() + s * 1000);
    assert.equal(await tryOnce(false), 0);
    assert.equal(await tryOnce(false), 0);
    assert.equal(await tryOnce(false), 10, "third attempt waits 10 s");
    advance(10);
    assert.equal(await tryOnce(false), 0, "allowed after the wait");
    assert.equal(await tryOnce(false), 20, "then the wait doubles");
    advance(20);
    assert.equal(await tryOnce(false), 0);
    assert.equal(await tryOnce(false), 40);
    advance(40);
    assert.equal(await tryOnce(false), 0);
    assert.equal(await tryOnce(false), 60, "capped");
    advance(601);
    assert.equal(await tryOnce(false), 0, "the window passed: counts start afresh");
    assert.equal(await tryOnce(true), 0);
    assert.equal(await tryOnce(false), 0, "a right password reset the pair");
    assert.equal(await tryOnce(false), 0);
    assert.equal(await tryOnce(false), 10);
    const rows = await db.query<{ key: string }>("SELECT key FROM login_throttle");
    assert.ok(rows.every((r) => /^[0-9a-f]{64}$/.test(r.key)), "only digests are stored");
  } finally {
    await db.close();
  }
});
