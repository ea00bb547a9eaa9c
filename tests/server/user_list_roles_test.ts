/**
 * The user list says which roles each user holds (the Settings → Users table shows them): bindings of the
 * user itself and those reaching it through its user groups (named), global and scoped, in one query per page.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer } from "../helpers/app.ts";
import { buildRoutes } from "../../server/http/routes/mod.ts";

dbTest("GET /api/v1/users lists each user's roles, direct and through user groups", async (db) => {
  const server = await createTestServer({ db, routes: (ctx, identity) => buildRoutes(ctx, identity) });
  try {
    const viewer = await server.loginAs({ permissions: ["user:view"], username: "viewer" });
    const [readers] = await db.query<{ id: string }>(
      "INSERT INTO roles (name) VALUES ('Readers') RETURNING id",
    );
    const [desk] = await db.query<{ id: string }>(
      "INSERT INTO user_groups (name) VALUES ('Help desk') RETURNING id",
    );
    const [bob] = await db.query<{ id: string }>(
      "INSERT INTO users (username, password_hash) VALUES ('bob', '') RETURNING id",
    );
    await db.query("INSERT INTO user_group_members (user_group_id, user_id) VALUES ($1, $2)", [
      desk.id,
      bob.id,
    ]);
    await db.query("INSERT INTO role_bindings (role_id, user_group_id) VALUES ($1, $2)", [
      readers.id,
      desk.id,
    ]);
    await db.query("INSERT INTO role_bindings (role_id, user_id) VALUES ($1, $2)", [readers.id, bob.id]);

    const res = await viewer.request("GET", "/api/v1/users?per_page=100");
    assert.equal(res.status, 200, res.text);
    const byName = new Map(res.json.items.map((u: { username: string }) => [u.username, u]));
    assert.deepEqual((byName.get("bob") as { roles: unknown }).roles, [
      { id: readers.id, name: "Readers", scope_type: "global", user_group: null },
      { id: readers.id, name: "Readers", scope_type: "global", user_group: "Help desk" },
    ]);
    const admin = byName.get("admin") as { roles: Array<{ name: string; user_group: string | null }> };
    assert.ok(
      admin.roles.some((r) => r.name === "Super Admin" && r.user_group === null),
      JSON.stringify(admin),
    );
    const own = byName.get("viewer") as { roles: unknown[] };
    assert.equal(own.roles.length, 1, "the viewer holds the one role it was given");
  } finally {
    await server.close();
  }
});
