/**
 * The step-up re-authentication in front of a reveal, attacked: a stolen session cannot guess the password
 * (five failures per account or address, then 429 even with the right one), and the password is checked
 * against the caller's own account, never another user's.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer } from "../helpers/app.ts";
import { diskEncryptionRoutes } from "../../server/http/routes/disk_encryption.ts";

dbTest(
  "step-up: guessing is cut off after five failures; only the caller's own password counts",
  async (db) => {
    const server = await createTestServer({
      db,
      routes: (ctx) => diskEncryptionRoutes(ctx),
      logLevel: "warn",
    });
    try {
      const perms = ["disk_encryption:view", "disk_encryption:reveal"] as const;
      const thief = await server.loginAs({ permissions: [...perms], username: "stolen", ip: "10.0.0.9" });
      const other = await server.loginAs({ permissions: [...perms], username: "other", ip: "10.0.0.10" });
      const path = `/api/v1/disk-encryption/volumes/${crypto.randomUUID()}/reveal`;

      // Another user's password does not re-authenticate this session.
      const borrowed = await thief.request("POST", path, { reason: "borrowed", password: other.password });
      assert.equal(borrowed.status, 403);
      assert.equal(borrowed.json.error.code, "reauthentication_failed");
      for (let i = 0; i < 4; i++) {
        const res = await thief.request("POST", path, { reason: "guess", password: `guess-${i}` });
        assert.equal(res.status, 403);
      }
      const locked = await thief.request("POST", path, { reason: "finally", password: thief.password });
      assert.equal(locked.status, 429);
      assert.ok(Number(locked.headers.get("retry-after")) > 0);
      // The other account from its own address is not affected: past the check, this server has no KEK.
      const fine = await other.request("POST", path, { reason: "real need", password: other.password });
      assert.equal(fine.status, 503);
      assert.equal(fine.json.error.code, "kek_unavailable");
      assert.match(fine.json.error.message, /set disk_encryption\.kek_file/);
      const rows = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM audit_logs WHERE resource_type = 'luks_volume' AND username = 'stolen'",
      );
      assert.equal(rows[0].n, 6, "every attempt is audited");
    } finally {
      await server.close();
    }
  },
);
