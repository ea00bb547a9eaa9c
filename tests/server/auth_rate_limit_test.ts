/** Login brute-force protection, per client address and per account. */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer } from "../helpers/app.ts";
import { createLoginLimiter } from "../../server/auth/rate_limit.ts";

dbTest(
  "the 11th failed login in a minute gets 429 with Retry-After, even with the right password",
  async (db) => {
    const server = await createTestServer({ db });
    try {
      const victim = await server.loginAs({ permissions: [], username: "victim" });
      const attacker = server.anonymous({ ip: "198.51.100.7" });
      for (let i = 0; i < 10; i++) {
        const res = await attacker.request("POST", "/api/v1/auth/login", {
          username: "victim",
          password: `guess-${i}-xxxxxx`,
        });
        assert.equal(res.status, 401, `attempt ${i + 1}`);
      }
      const eleventh = await attacker.request("POST", "/api/v1/auth/login", {
        username: "victim",
        password: victim.password,
      });
      assert.equal(eleventh.status, 429);
      assert.equal(eleventh.json.error.code, "rate_limited");
      const retryAfter = Number(eleventh.headers.get("retry-after"));
      assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
      assert.equal(eleventh.headers.getSetCookie().length, 0, "no session while limited");

      // Per account: the same account from a fresh address is still limited …
      const elsewhere = server.anonymous({ ip: "192.0.2.44" });
      const sameAccount = await elsewhere.request("POST", "/api/v1/auth/login", {
        username: "victim",
        password: victim.password,
      });
      assert.equal(sameAccount.status, 429);
      // … and per address: another account from the attacking address too.
      await server.loginAs({ permissions: [], username: "bystander", password: "bystander-password" });
      const sameIp = await attacker.request("POST", "/api/v1/auth/login", {
        username: "bystander",
        password: "bystander-password",
      });
      assert.equal(sameIp.status, 429);
      // Others are not affected.
      const fine = await elsewhere.request("POST", "/api/v1/auth/login", {
        username: "bystander",
        password: "bystander-password",
      });
      assert.equal(fine.status, 200);
      // The victim's existing session is untouched.
      assert.equal((await victim.request("GET", "/api/v1/auth/me")).status, 200);
    } finally {
      await server.close();
    }
  },
);

dbTest("spreading guesses over many addresses still hits the per-account limit", async (db) => {
  const server = await createTestServer({ db });
  try {
    await server.loginAs({ permissions: [], username: "target" });
    for (let i = 0; i < 10; i++) {
      const res = await server.anonymous({ ip: `10.9.0.${i + 1}` }).request("POST", "/api/v1/auth/login", {
        username: "target",
        password: `guess-${i}-xxxxxx`,
      });
      assert.equal(res.status, 401);
    }
    const res = await server.anonymous({ ip: "10.9.0.99" }).request("POST", "/api/v1/auth/login", {
      username: "TARGET",
      password: "guess-x-xxxxxx",
    });
    assert.equal(res.status, 429, "case variations of the username count as the same account");
  } finally {
    await server.close();
  }
});

Deno.test("limiter: sliding window, Retry-After shrinks, reset clears an account", () => {
  let now = 1_000_000;
  const limiter = createLoginLimiter({ maxFailures: 3, windowMs: 60_000, now: () => now });
  const keys = ["ip:a", "user:x"];
  for (let i = 0; i < 3; i++) {
    assert.equal(limiter.retryAfter(keys), 0);
    limiter.fail(keys);
    now += 10_000;
  }
  // Failures at 0 s, 10 s, 20 s; now = 30 s → the first leaves the window at 60 s.
  assert.equal(limiter.retryAfter(keys), 30);
  now += 29_000;
  assert.equal(limiter.retryAfter(keys), 1);
  now += 1_000;
  assert.equal(limiter.retryAfter(keys), 0, "the oldest failure left the window");
  limiter.fail(keys);
  assert.equal(limiter.retryAfter(["user:x"]), 10);
  limiter.reset("user:x");
  assert.equal(limiter.retryAfter(["user:x"]), 0);
  assert.equal(limiter.retryAfter(["ip:a"]), 10, "the address stays limited");
});

Deno.test("limiter: memory stays bounded under a flood of addresses", () => {
  const limiter = createLoginLimiter({ maxKeys: 1000 });
  for (let i = 0; i < 20_000; i++) limiter.fail([`ip:${i}`]);
  // The newest keys are still tracked; the total is bounded (checked through behaviour: old keys forgotten).
  for (let i = 0; i < 9; i++) limiter.fail(["ip:19999"]);
  assert.ok(limiter.retryAfter(["ip:19999"]) > 0);
  assert.equal(limiter.retryAfter(["ip:0"]), 0);
});
