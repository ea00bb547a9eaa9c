/**
 * Password hashing never holds the event loop: argon2id costs 60–100 ms of a processor in one WASM call, and
 * on the server's thread every login (right or wrong password, known or unknown user) and every new password
 * held up all other requests and agent streams that long. Bounded by time as the large-content steps are
 * (tests/server/import_stall_test.ts): each step's worst stall on the loop thread's processor must stay
 * under half of what one argon2id check costs this same thread, measured just before; three attempts each.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, TEST_ADMIN_PASSWORD } from "../helpers/app.ts";
import { idleStall, leastStall, stallDuring } from "../helpers/stall.ts";
import { argon2idHash, argon2idVerify } from "../../server/auth/argon2.ts";
import { hashPassword, verifyPassword } from "../../server/auth/password.ts";
import { keepWorkerWarm } from "../../server/core/offloop.ts";

dbTest("logins and new passwords hash in a worker, never on the event loop", async (db) => {
  const server = await createTestServer({ db });
  const cool = keepWorkerWarm();
  try {
    const hash = await argon2idHash("a password of the test");
    // The yardstick: one argon2id check on this thread (best of three, warm).
    const costs: number[] = [];
    for (let i = 0; i < 3; i++) {
      costs.push((await stallDuring(() => argon2idVerify("a password of the test", hash))).stall.busyMs);
    }
    const checkMs = Math.min(...costs);
    const idle = await idleStall(500);
    const context = `bound ${(checkMs / 2).toFixed(0)} ms = half of one argon2id check on this thread (${
      checkMs.toFixed(0)
    } ms); idle loop: ${idle.busyMs.toFixed(0)} ms on CPU`;

    // The same answers through the worker as on the thread.
    assert.equal(await verifyPassword("a password of the test", hash), true);
    assert.equal(await verifyPassword("another password", hash), false);
    assert.equal(await verifyPassword("a password of the test", "$argon2id$garbage"), false);
    assert.match(await hashPassword("a password of the test"), /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);

    let address = 10;
    const login = (username: string, password: string, status: number) => async () => {
      const res = await server.anonymous({ ip: `127.0.0.${address++}` }).request(
        "POST",
        "/api/v1/auth/login",
        {
          username,
          password,
        },
      );
      assert.equal(res.status, status, res.text.slice(0, 200));
    };
    const admin = await server.loginAs({ superAdmin: true, username: "hasher" });
    let user = 0;
    const steps: [string, () => Promise<void>][] = [
      ["login with the right password", login("admin", TEST_ADMIN_PASSWORD, 200)],
      ["login with a wrong password", login("admin", "not the password at all", 401)],
      ["login of an unknown user (dummy check)", login("nobody-here", "not the password at all", 401)],
      ["a new user's password", async () => {
        const res = await admin.request("POST", "/api/v1/users", {
          username: `new-user-${user++}`,
          password: "a long enough password",
        });
        assert.equal(res.status, 201, res.text.slice(0, 200));
      }],
    ];
    for (const [what, step] of steps) {
      const { passed, stalls } = await leastStall({ step: () => step(), boundMs: checkMs / 2 });
      assert.ok(passed, `${what}: worst stalls ${stalls}; ${context}`);
    }
  } finally {
    cool();
    await server.close();
  }
});
