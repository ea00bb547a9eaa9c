/** Roles, bindings, escalation guards and the last-Super-Admin rule, through the real routes. */
import assert from "node:assert/strict";
import { serverTest, type TestResponse, type TestServer } from "../helpers/app.ts";
import { ALL_PERMISSIONS, type Permission } from "../../shared/permissions.ts";
import { BUILTIN_ROLES, builtinRolePermissions } from "../../shared/builtin_roles.ts";

async function roleId(server: TestServer, name: string): Promise<string> {
  const [row] = await server.ctx.db.query<{ id: string }>("SELECT id FROM roles WHERE name = $1", [name]);
  return row.id;
}

async function snapshot(server: TestServer): Promise<string> {
  const tables = ["users", "roles", "role_permissions", "role_bindings", "user_groups", "user_group_members"];
  const parts: string[] = [];
  for (const t of tables) {
    const rows = await server.ctx.db.query(`SELECT * FROM ${t} ORDER BY 1, 2`);
    parts.push(JSON.stringify(rows.map((r) => ({ ...r, updated_at: undefined }))));
  }
  return parts.join("\n");
}

/** Asserts a refused call answered `status` and changed nothing in the identity tables. */
async function refused(
  server: TestServer,
  status: number,
  call: () => Promise<TestResponse>,
): Promise<TestResponse> {
  const before = await snapshot(server);
  const res = await call();
  assert.equal(res.status, status, res.text);
  assert.equal(await snapshot(server), before, "a refused change must leave no trace");
  return res;
}

serverTest(
  "catalogue and built-in roles are seeded at every start; built-ins cannot be changed",
  async (server, db) => {
    const perms = await db.query<{ id: string }>("SELECT id FROM permissions ORDER BY id");
    assert.deepEqual(perms.map((p) => p.id), [...ALL_PERMISSIONS]);
    const expected = builtinRolePermissions();
    for (const role of BUILTIN_ROLES) {
      const rows = await db.query<{ permission_id: string }>(
        `SELECT rp.permission_id FROM role_permissions rp JOIN roles r ON r.id = rp.role_id
          WHERE r.name = $1 AND r.builtin ORDER BY 1`,
        [role.name],
      );
      assert.deepEqual(rows.map((r) => r.permission_id), expected.get(role.name), role.name);
    }
    assert.deepEqual(expected.get("Super Admin"), [...ALL_PERMISSIONS]);
    const auditor = expected.get("Auditor")!;
    assert.ok(!auditor.includes("disk_encryption:reveal"));
    assert.ok(auditor.every((p) => p.endsWith(":view") || p === "audit_log:export"));
    assert.ok(!expected.get("Org Admin")!.includes("role:create"));

    // Drift (a permission lost by Super Admin, a stale permission row) is repaired by the next start.
    const superAdmin = await roleId(server, "Super Admin");
    await db.query("DELETE FROM role_permissions WHERE role_id = $1 AND permission_id = 'policy:release'", [
      superAdmin,
    ]);
    await db.query(
      "INSERT INTO permissions (id, resource, action) VALUES ('legacy:thing', 'legacy', 'thing')",
    );
    await server.identity.stop();
    await server.identity.start();
    const [{ has }] = await db.query<{ has: boolean }>(
      "SELECT EXISTS (SELECT 1 FROM role_permissions WHERE role_id = $1 AND permission_id = 'policy:release') AS has",
      [superAdmin],
    );
    assert.ok(has, "every catalogue permission is granted to Super Admin again");
    assert.equal((await db.query("SELECT 1 FROM permissions WHERE id = 'legacy:thing'")).length, 0);

    const sa = await server.loginAs({ superAdmin: true });
    for (const role of BUILTIN_ROLES) {
      const id = await roleId(server, role.name);
      const edit = await refused(
        server,
        409,
        () => sa.request("PUT", `/api/v1/roles/${id}`, { description: "mine now" }),
      );
      assert.match(edit.json.error.message, /built-in role/);
      await refused(server, 409, () => sa.request("DELETE", `/api/v1/roles/${id}`));
    }

    // Custom roles: create, read, edit, delete; the catalogue is listed; names are unique.
    const created = await sa.request("POST", "/api/v1/roles", {
      name: "Helpdesk",
      permissions: ["node:view", "user:view"],
    });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(created.json.permissions, ["node:view", "user:view"]);
    const dup = await sa.request("POST", "/api/v1/roles", { name: "Helpdesk" });
    assert.equal(dup.status, 409);
    const badPerm = await sa.request("POST", "/api/v1/roles", { name: "X", permissions: ["policy:fly"] });
    assert.equal(badPerm.status, 400);
    assert.match(badPerm.json.error.message, /permissions\[0\]/);
    const edited = await sa.request("PUT", `/api/v1/roles/${created.json.id}`, {
      permissions: ["node:view"],
    });
    assert.deepEqual(edited.json.permissions, ["node:view"]);
    const catalogue = await sa.request("GET", "/api/v1/permissions?per_page=200");
    assert.equal(catalogue.json.total, ALL_PERMISSIONS.length);
    assert.deepEqual(catalogue.json.items.map((p: { id: string }) => p.id), [...ALL_PERMISSIONS]);
    const list = await sa.request("GET", "/api/v1/roles?per_page=2&page=1");
    assert.equal(list.json.items.length, 2);
    assert.equal(list.json.total, BUILTIN_ROLES.length + 1, "the built-ins and Helpdesk");
    assert.equal((await sa.request("DELETE", `/api/v1/roles/${created.json.id}`)).status, 204);
  },
);

serverTest(
  "node-group-scoped bindings are stored but grant nothing; /auth/me says so",
  async (server, db) => {
    const sa = await server.loginAs({ superAdmin: true });
    const scoped = await server.loginAs({ permissions: [] });
    const [group] = await db.query<{ id: string }>(
      "INSERT INTO node_groups (name) VALUES ('lab') RETURNING id",
    );
    const orgAdmin = await roleId(server, "Org Admin");
    const bound = await sa.request("POST", `/api/v1/users/${scoped.user.id}/role-bindings`, {
      password: sa.password,
      role_id: orgAdmin,
      scope_type: "node_group",
      scope_id: group.id,
    });
    assert.equal(bound.status, 201, bound.text);
    assert.equal(bound.json.effective, false);
    assert.equal(bound.json.scope_name, "lab");

    const me = await scoped.request("GET", "/api/v1/auth/me");
    assert.deepEqual(me.json.permissions, []);
    assert.equal(me.json.features.scoped_role_bindings, false);
    assert.equal((await scoped.request("GET", "/api/v1/users")).status, 403);

    // Through a user group the same holds.
    const g = await sa.request("POST", "/api/v1/user-groups", { name: "lab-admins" });
    await sa.request("POST", `/api/v1/user-groups/${g.json.id}/members`, { user_id: scoped.user.id });
    const gb = await sa.request("POST", `/api/v1/user-groups/${g.json.id}/role-bindings`, {
      password: sa.password,
      role_id: orgAdmin,
      scope_type: "node_group",
      scope_id: group.id,
    });
    assert.equal(gb.status, 201, gb.text);
    assert.deepEqual((await scoped.request("GET", "/api/v1/auth/me")).json.permissions, []);

    // The same role bound globally to the group does grant (so the path above was really tested).
    const global = await sa.request("POST", `/api/v1/user-groups/${g.json.id}/role-bindings`, {
      password: sa.password,
      role_id: orgAdmin,
    });
    assert.equal(global.status, 201, global.text);
    assert.equal(
      (await scoped.request("GET", "/api/v1/users")).status,
      200,
      "group-granted permission works",
    );

    // Scope validation names the field.
    const missing = await sa.request("POST", `/api/v1/users/${scoped.user.id}/role-bindings`, {
      password: sa.password,
      role_id: orgAdmin,
      scope_type: "node_group",
    });
    assert.equal(missing.status, 400);
    assert.match(missing.json.error.message, /scope_id/);
  },
);

serverTest(
  "permissions are read on every request: revoking a role's permission takes effect at once",
  async (server) => {
    const sa = await server.loginAs({ superAdmin: true });
    const viewer = await server.loginAs({ permissions: ["user:view", "role:view"], username: "viewer" });
    assert.equal((await viewer.request("GET", "/api/v1/users")).status, 200);
    const role = await roleId(server, "test-role-viewer");
    assert.equal(
      (await sa.request("PUT", `/api/v1/roles/${role}`, {
        permissions: ["role:view"],
        password: sa.password,
      }))
        .status,
      200,
    );
    assert.equal((await viewer.request("GET", "/api/v1/users")).status, 403, "no re-login needed");
  },
);

serverTest("nobody can grant a permission they do not hold", async (server) => {
  const sa = await server.loginAs({ superAdmin: true, username: "root2" });
  const superAdminRole = await roleId(server, "Super Admin");
  const editorRole = await roleId(server, "Policy Editor");

  // Role manager without policy:delete.
  const roleManager = await server.loginAs({
    permissions: ["role:view", "role:create", "role:edit", "role:delete", "policy:view"],
  });
  const denied = await refused(
    server,
    403,
    () =>
      roleManager.request("POST", "/api/v1/roles", {
        name: "Sneaky",
        permissions: ["policy:view", "policy:delete"],
      }),
  );
  assert.match(denied.json.error.message, /policy:delete/);
  const ok = await roleManager.request("POST", "/api/v1/roles", {
    name: "Readers",
    permissions: ["policy:view"],
  });
  assert.equal(ok.status, 201, ok.text);
  await refused(
    server,
    403,
    () =>
      roleManager.request("PUT", `/api/v1/roles/${ok.json.id}`, {
        permissions: ["policy:view", "role:create", "user:edit"],
      }),
  );
  // A role holding something the manager lacks cannot be edited or deleted by them either.
  const strong = await sa.request("POST", "/api/v1/roles", {
    name: "Strong",
    permissions: ["settings:edit"],
  });
  await refused(
    server,
    403,
    () => roleManager.request("PUT", `/api/v1/roles/${strong.json.id}`, { name: "Weak" }),
  );
  await refused(server, 403, () => roleManager.request("DELETE", `/api/v1/roles/${strong.json.id}`));

  // Account manager: cannot create or promote anyone above themselves, nor take over a Super Admin.
  const accounts = await server.loginAs({
    permissions: [
      "user:view",
      "user:create",
      "user:edit",
      "user:delete",
      "policy:view",
      "policy:create",
      "policy:edit",
    ],
  });
  await refused(server, 403, () =>
    accounts.request("POST", "/api/v1/users", {
      username: "mallory",
      password: "mallory-password",
      role_ids: [superAdminRole],
    }));
  const target = await server.loginAs({ permissions: [] });
  await refused(
    server,
    403,
    () =>
      accounts.request("POST", `/api/v1/users/${target.user.id}/role-bindings`, {
        password: accounts.password,
        role_id: superAdminRole,
      }),
  );
  const takeover = await refused(
    server,
    403,
    () =>
      accounts.request("PUT", `/api/v1/users/${sa.user.id}/password`, {
        new_password: "i-own-you-now-123",
      }),
  );
  assert.match(takeover.json.error.message, /reset the password of user "root2"/);
  await refused(
    server,
    403,
    () => accounts.request("PUT", `/api/v1/users/${sa.user.id}`, { enabled: false }),
  );
  await refused(server, 403, () => accounts.request("DELETE", `/api/v1/users/${sa.user.id}`));
  // Policy Editor ⊆ their permissions (policy view/create/edit, binding view, node_group view)? No: they lack
  // binding:view and node_group:view, so even that is refused …
  await refused(
    server,
    403,
    () =>
      accounts.request("POST", `/api/v1/users/${target.user.id}/role-bindings`, {
        password: accounts.password,
        role_id: editorRole,
      }),
  );
  // … while a role within their own permissions is fine.
  const within = await sa.request("POST", "/api/v1/roles", {
    name: "Writers",
    permissions: ["policy:view", "policy:create"],
  });
  const granted = await accounts.request("POST", `/api/v1/users/${target.user.id}/role-bindings`, {
    password: accounts.password,
    role_id: within.json.id,
  });
  assert.equal(granted.status, 201, granted.text);
  const created = await accounts.request("POST", "/api/v1/users", {
    username: "trent",
    password: "trent-password-1",
    role_ids: [within.json.id],
    step_up: { password: accounts.password },
  });
  assert.equal(created.status, 201, created.text);
  assert.deepEqual(created.json.permissions, ["policy:create", "policy:view"]);

  // Group manager: cannot join a powerful group, nor make a group powerful.
  const groups = await server.loginAs({
    permissions: ["user_group:view", "user_group:create", "user_group:edit", "user_group:delete"],
  });
  const admins = await sa.request("POST", "/api/v1/user-groups", { name: "admins" });
  await sa.request("POST", `/api/v1/user-groups/${admins.json.id}/role-bindings`, {
    password: sa.password,
    role_id: superAdminRole,
  });
  await refused(
    server,
    403,
    () =>
      groups.request("POST", `/api/v1/user-groups/${admins.json.id}/members`, { user_id: groups.user.id }),
  );
  await refused(server, 403, () => groups.request("DELETE", `/api/v1/user-groups/${admins.json.id}`));
  const mine = await groups.request("POST", "/api/v1/user-groups", { name: "mine" });
  assert.equal(mine.status, 201);
  await refused(
    server,
    403,
    () =>
      groups.request("POST", `/api/v1/user-groups/${mine.json.id}/role-bindings`, {
        password: groups.password,
        role_id: superAdminRole,
      }),
  );
  const me = await groups.request("GET", "/api/v1/auth/me");
  assert.ok(!me.json.permissions.includes("role:create"));
});

serverTest(
  "the last enabled Super Admin cannot be deleted, disabled or lose the role by any path",
  async (server, db) => {
    const sa = await server.loginAs({ superAdmin: true, username: "boss" });
    const superAdminRole = await roleId(server, "Super Admin");
    // Remove the initial admin: now boss is the only Super Admin.
    const [{ id: adminId }] = await db.query<{ id: string }>(
      "SELECT id FROM users WHERE username = 'admin'",
    );
    assert.equal((await sa.request("DELETE", `/api/v1/users/${adminId}`)).status, 204);

    // An actor holding every permission through a custom role passes the escalation guard, so what stops
    // them below is the last-Super-Admin rule alone.
    const full = await server.loginAs({ permissions: [...ALL_PERMISSIONS] as Permission[] });
    // A disabled Super Admin does not count.
    const dormant = await server.loginAs({ superAdmin: true, username: "dormant" });
    assert.equal(
      (await full.request("PUT", `/api/v1/users/${dormant.user.id}`, { enabled: false })).status,
      200,
    );

    const del = await refused(server, 409, () => full.request("DELETE", `/api/v1/users/${sa.user.id}`));
    assert.match(del.json.error.message, /no enabled Super Admin/);
    await refused(
      server,
      409,
      () => full.request("PUT", `/api/v1/users/${sa.user.id}`, { enabled: false }),
    );
    const [binding] = await db.query<{ id: string }>(
      "SELECT id FROM role_bindings WHERE user_id = $1 AND role_id = $2",
      [sa.user.id, superAdminRole],
    );
    await refused(
      server,
      409,
      () =>
        full.request("DELETE", `/api/v1/users/${sa.user.id}/role-bindings/${binding.id}`, {
          password: full.password,
        }),
    );

    // Holding the role through a group: leaving the group or deleting it is refused too.
    const g = await full.request("POST", "/api/v1/user-groups", { name: "root-group" });
    await sa.request("POST", `/api/v1/user-groups/${g.json.id}/role-bindings`, {
      password: sa.password,
      role_id: superAdminRole,
    });
    await sa.request("POST", `/api/v1/user-groups/${g.json.id}/members`, {
      user_id: sa.user.id,
      password: sa.password,
    });
    assert.equal(
      (await full.request("DELETE", `/api/v1/users/${sa.user.id}/role-bindings/${binding.id}`, {
        password: full.password,
      })).status,
      204,
      "the direct binding may go while the group still carries the role",
    );
    await refused(
      server,
      409,
      () =>
        full.request("DELETE", `/api/v1/user-groups/${g.json.id}/members/${sa.user.id}`, {
          password: full.password,
        }),
    );
    await refused(
      server,
      409,
      () => full.request("DELETE", `/api/v1/user-groups/${g.json.id}`, { password: full.password }),
    );
    const [gb] = await db.query<{ id: string }>("SELECT id FROM role_bindings WHERE user_group_id = $1", [
      g.json.id,
    ]);
    await refused(
      server,
      409,
      () =>
        full.request("DELETE", `/api/v1/user-groups/${g.json.id}/role-bindings/${gb.id}`, {
          password: full.password,
        }),
    );

    // Nobody deletes or disables their own account.
    await refused(server, 409, () => sa.request("DELETE", `/api/v1/users/${sa.user.id}`));
    await refused(server, 409, () => sa.request("PUT", `/api/v1/users/${sa.user.id}`, { enabled: false }));

    // With a second enabled Super Admin the same changes are allowed.
    assert.equal(
      (await full.request("PUT", `/api/v1/users/${dormant.user.id}`, { enabled: true })).status,
      200,
    );
    assert.equal(
      (await full.request("DELETE", `/api/v1/user-groups/${g.json.id}`, { password: full.password }))
        .status,
      204,
    );
    assert.equal((await full.request("DELETE", `/api/v1/users/${sa.user.id}`)).status, 204);
  },
);

serverTest("concurrent removals cannot both pass the last-Super-Admin rule", async (server, db) => {
  const a = await server.loginAs({ superAdmin: true, username: "sa-a" });
  const b = await server.loginAs({ superAdmin: true, username: "sa-b" });
  const [{ id: adminId }] = await db.query<{ id: string }>("SELECT id FROM users WHERE username = 'admin'");
  await a.request("DELETE", `/api/v1/users/${adminId}`);
  // Each deletes the other at the same moment; exactly one may win.
  const results = await Promise.all([
    a.request("DELETE", `/api/v1/users/${b.user.id}`),
    b.request("DELETE", `/api/v1/users/${a.user.id}`),
  ]);
  const statuses = results.map((r) => r.status).sort();
  assert.ok(
    JSON.stringify(statuses) === "[204,401]" || JSON.stringify(statuses) === "[204,409]",
    `statuses ${statuses}`,
  );
  const [{ n }] = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM users WHERE username LIKE 'sa-%'",
  );
  assert.equal(n, 1);
});

serverTest(
  "users: validation names the field, list searches and pages, detail shows roles and groups",
  async (server) => {
    const sa = await server.loginAs({ superAdmin: true, username: "zed" });
    const short = await sa.request("POST", "/api/v1/users", { username: "amy", password: "short" });
    assert.equal(short.status, 400);
    assert.equal(short.json.error.fields[0].field, "password");
    const badName = await sa.request("POST", "/api/v1/users", {
      username: "../amy",
      password: "long-enough-pass",
    });
    assert.equal(badName.status, 400);
    assert.equal(badName.json.error.fields[0].field, "username");
    const badMail = await sa.request("POST", "/api/v1/users", {
      username: "amy",
      password: "long-enough-pass",
      email: "nope",
    });
    assert.equal(badMail.status, 400);
    assert.match(badMail.json.error.message, /email/);
    for (const name of ["amy", "ann", "bea"]) {
      const r = await sa.request("POST", "/api/v1/users", {
        username: name,
        password: "long-enough-pass",
        email: `${name}@example.org`,
        full_name: name.toUpperCase(),
      });
      assert.equal(r.status, 201, r.text);
      assert.equal(r.json.password_hash, undefined, "never the hash");
    }
    const dup = await sa.request("POST", "/api/v1/users", {
      username: "amy",
      password: "long-enough-pass",
    });
    assert.equal(dup.status, 409);
    const page = await sa.request("GET", "/api/v1/users?search=a&per_page=2&page=1");
    assert.equal(page.status, 200);
    assert.deepEqual(page.json.items.map((u: { username: string }) => u.username), ["admin", "amy"]);
    assert.equal(page.json.total, 4, "admin, amy, ann, bea (bea@example.org)");
    assert.equal(page.json.per_page, 2);
    const tooBig = await sa.request("GET", "/api/v1/users?per_page=500");
    assert.equal(tooBig.status, 400);
    const pct = await sa.request("GET", "/api/v1/users?search=%25");
    assert.equal(pct.json.total, 0, "LIKE wildcards in the search are literal");

    const amy = (await sa.request("GET", "/api/v1/users?search=amy")).json.items[0];
    const g = await sa.request("POST", "/api/v1/user-groups", { name: "team" });
    assert.equal(
      (await sa.request("POST", `/api/v1/user-groups/${g.json.id}/members`, { user_id: amy.id })).status,
      204,
    );
    const members = await sa.request("GET", `/api/v1/user-groups/${g.json.id}/members`);
    assert.deepEqual(members.json.items.map((u: { username: string }) => u.username), ["amy"]);
    const detail = await sa.request("GET", `/api/v1/users/${amy.id}`);
    assert.deepEqual(detail.json.groups, [{ id: g.json.id, name: "team" }]);
    assert.deepEqual(detail.json.role_bindings, []);
    assert.equal((await sa.request("GET", "/api/v1/users/not-a-uuid")).status, 400);
    assert.equal((await sa.request("GET", `/api/v1/users/${crypto.randomUUID()}`)).status, 404);
    assert.equal((await sa.request("DELETE", `/api/v1/users/${amy.id}`)).status, 204);
    assert.equal((await sa.request("GET", `/api/v1/user-groups/${g.json.id}`)).json.member_count, 0);
  },
);
