/** The initial Super Admin created on first start. */
import assert from "node:assert/strict";
import { join } from "node:path";
import { dbTest } from "../helpers/db.ts";
import { createTestServer } from "../helpers/app.ts";

/** Runs `fn` while capturing console.log (where the one-time password line goes). */
async function captureStdout<T>(fn: () => Promise<T>): Promise<{ result: T; lines: string[] }> {
  const lines: string[] = [];
  const original = console.log;
  console.log = (...args: unknown[]) => lines.push(args.map(String).join(" "));
  try {
    return { result: await fn(), lines };
  } finally {
    console.log = original;
  }
}

dbTest(
  "first start generates the admin password and stores it 0600; the operator is told it once, then reminded until it changes",
  async (db) => {
    const { result: server, lines } = await captureStdout(() =>
      createTestServer({ db, config: { security: { adminPassword: "" } } })
    );
    try {
      assert.deepEqual(lines, [], "nothing is printed in the middle of the start");
      const url = "https://svc.example:8443/";
      const notice = await server.identity.startupNotice(url);
      const marked = notice.filter((l) => l.startsWith("svc: initial admin login: admin / "));
      assert.equal(marked.length, 1, `notice: ${JSON.stringify(notice)}`);
      assert.ok(notice.some((l) => l.includes(url)), "the notice names the URL to open");
      const printed = marked[0].slice("svc: initial admin login: admin / ".length);
      assert.ok(printed.length >= 20);
      const file = join(server.ctx.config.server.dataDir, "initial_admin_password");
      assert.equal((await Deno.readTextFile(file)).trim(), printed);
      assert.equal((await Deno.stat(file)).mode! & 0o777, 0o600);
      assert.ok(!server.logs.some((l) => l.includes(printed)), "the password is not in the log");

      const admin = server.anonymous();
      const login = await admin.request("POST", "/api/v1/auth/login", {
        username: "admin",
        password: printed,
      });
      assert.equal(login.status, 200, login.text);
      assert.ok(login.json.permissions.includes("role:create"), "admin is Super Admin");

      // A restart on the same database creates nobody and reminds where the password is, without showing it.
      await server.identity.stop();
      const again = await captureStdout(() => server.identity.start());
      assert.deepEqual(again.lines, []);
      const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM users");
      assert.equal(n, 1);
      const reminder = await server.identity.startupNotice(url);
      assert.ok(reminder.some((l) => l.includes(file)), `reminder: ${JSON.stringify(reminder)}`);
      assert.ok(!reminder.some((l) => l.includes(printed)), "a restart never shows the password again");

      // Once the admin changed it, the reminder stops and the stale file goes.
      await db.query("UPDATE users SET password_hash = 'changed' WHERE username = 'admin'");
      await server.identity.stop();
      await server.identity.start();
      assert.deepEqual(await server.identity.startupNotice(url), []);
      await assert.rejects(Deno.stat(file), Deno.errors.NotFound);
    } finally {
      await server.close();
    }
  },
);

dbTest("SVC_ADMIN_PASSWORD is used when set, never printed, and must meet the password rules", async (db) => {
  const { result: server, lines } = await captureStdout(() =>
    createTestServer({ db, config: { security: { adminPassword: "operator-chosen-secret" } } })
  );
  try {
    assert.deepEqual(lines, []);
    await assert.rejects(Deno.stat(join(server.ctx.config.server.dataDir, "initial_admin_password")));
    const login = await server.anonymous().request("POST", "/api/v1/auth/login", {
      username: "admin",
      password: "operator-chosen-secret",
    });
    assert.equal(login.status, 200);
  } finally {
    await server.close();
  }
});

dbTest("a too short SVC_ADMIN_PASSWORD stops the start with a message naming it", async (db) => {
  await assert.rejects(
    createTestServer({ db, config: { security: { adminPassword: "short" } } }),
    /SVC_ADMIN_PASSWORD.*at least 12 characters/,
  );
  const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM users");
  assert.equal(n, 0);
});
