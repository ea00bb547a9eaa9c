/**
 * Migration 0021 on a database that already has policies: the current content of every released or
 * archived policy becomes its one known version (who released it is not known), drafts get none, and the
 * history continues from there.
 */
import assert from "node:assert/strict";
import { migrate, openPglite, readMigrations } from "../../server/db/mod.ts";

Deno.test("migration 0021 records the released content of existing policies as their first known version", async () => {
  const db = await openPglite();
  try {
    const all = await readMigrations();
    const before = all.filter((m) => m.version < "0021");
    assert.ok(all.some((m) => m.version === "0021"), "the migration exists");
    await migrate(db, before);
    const insert = (name: string, state: string, version: number) =>
      db.query<{ id: string }>(
        `INSERT INTO policies (name, type, content, state, version, description)
         VALUES ($1, 'Firefox', '{"DisableTelemetry":true}', $2, $3, 'd') RETURNING id`,
        [name, state, version],
      );
    const [released] = await insert("released", "released", 4);
    const [archived] = await insert("archived", "archived", 2);
    await insert("draft", "draft", 1);
    await migrate(db, all);
    const rows = await db.query<{ policy_id: string; version: number; origin: string; released_by: string }>(
      "SELECT policy_id, version, origin, released_by FROM policy_versions ORDER BY version",
    );
    assert.deepEqual(
      rows.map((r) => [r.policy_id, r.version, r.origin, r.released_by]),
      [[archived.id, 2, "release", ""], [released.id, 4, "release", ""]],
    );
  } finally {
    await db.close();
  }
});
