/**
 * Step-up re-authentication for every way of changing who holds which permissions, besides the role-binding
 * routes (auth_mfa_test.ts): creating a user with roles, changing or deleting a role someone holds, and
 * changing the members of (or deleting) a user group that carries roles. Changes that alter nobody's
 * permissions pass without it. Refusals leave nothing behind and are audited, with the proof masked.
 */
import assert from "node:assert/strict";
import type { Db } from "../../server/db/db.ts";
import { serverTest, type TestClient } from "../helpers/app.ts";

async function roleId(client: TestClient, name: string, permissions: string[]): Promise<string> {
  const res = await client.request("POST", "/api/v1/roles", { name, permissions });
  assert.equal(res.status, 201, res.text);
  return res.json.id;
}

/**
 * The audit rows of refused step-ups on `path`. The caller holds the route's permission, so a refusal is a
 * failed attempt at the action carrying the refusal's code, never an access denial.
 */
async function stepUpRefusals(db: Db, path: string) {
  const rows = await db.query<
    { action: string; outcome: string; details: { error?: string; status: number } }
  >(
    `SELECT action, outcome, details FROM audit_logs
      WHERE details->>'path' = $1 AND details->>'error' LIKE 'reauthentication_%'`,
    [path],
  );
  for (const row of rows) {
    assert.equal(row.outcome, "failure", JSON.stringify(row));
    assert.notEqual(row.action, "access_denied", JSON.stringify(row));
    assert.equal(row.details.status, 403);
  }
  return rows;
}

serverTest(
  "creating a user with roles needs step-up, in step_up (password is the new user's)",
  async (server, db) => {
    const chief = await server.loginAs({ username: "chief", superAdmin: true });
    const [{ id: auditor }] = await db.query<{ id: string }>("SELECT id FROM roles WHERE name = 'Auditor'");
    const wanted = { username: "newbie", password: "newbie-password-0123", role_ids: [auditor] };

    const bare = await chief.request("POST", "/api/v1/users", wanted);
    assert.equal(bare.status, 403, bare.text);
    assert.equal(bare.json.error.code, "reauthentication_required");
    // The caller's password as the new user's password is not a proof.
    const confused = await chief.request("POST", "/api/v1/users", { ...wanted, password: chief.password });
    assert.equal(confused.json?.error?.code, "reauthentication_required", confused.text);
    const wrong = await chief.request("POST", "/api/v1/users", {
      ...wanted,
      step_up: { password: "not-the-password" },
    });
    assert.equal(wrong.json?.error?.code, "reauthentication_failed", wrong.text);
    assert.equal((await db.query("SELECT 1 FROM users WHERE username = 'newbie'")).length, 0);

    const made = await chief.request("POST", "/api/v1/users", {
      ...wanted,
      step_up: { password: chief.password },
    });
    assert.equal(made.status, 201, made.text);
    assert.deepEqual(made.json.role_bindings.map((b: { role_name: string }) => b.role_name), ["Auditor"]);
    // The new user's password is theirs, not the proof.
    const login = await server.anonymous({ ip: "127.0.0.9" }).request("POST", "/api/v1/auth/login", {
      username: "newbie",
      password: "newbie-password-0123",
    });
    assert.equal(login.status, 200, login.text);

    // Without roles nothing changes hands: no step-up.
    const plain = await chief.request("POST", "/api/v1/users", {
      username: "plain",
      password: "plain-password-0123",
    });
    assert.equal(plain.status, 201, plain.text);

    const denied = await stepUpRefusals(db, "/api/v1/users");
    assert.equal(denied.length, 3, "each refusal is audited");
    const text = JSON.stringify(await db.query("SELECT details FROM audit_logs"));
    assert.ok(!text.includes(chief.password), "the proof is masked in every audit row");
  },
);

serverTest(
  "changing the permissions of a role someone holds, or deleting it, needs step-up",
  async (server, db) => {
    const chief = await server.loginAs({ username: "chief", superAdmin: true });
    const frank = await server.loginAs({ username: "frank", permissions: [] });
    const held = await roleId(chief, "Viewers", ["node:view"]);
    const unused = await roleId(chief, "Unused", ["node:view"]);
    const bind = await chief.request("POST", `/api/v1/users/${frank.user.id}/role-bindings`, {
      role_id: held,
      password: chief.password,
    });
    assert.equal(bind.status, 201, bind.text);

    const path = `/api/v1/roles/${held}`;
    const bare = await chief.request("PUT", path, { permissions: ["node:view", "policy:view"] });
    assert.equal(bare.json?.error?.code, "reauthentication_required", bare.text);
    const [{ permissions }] = await db.query<{ permissions: string[] }>(
      `SELECT array_agg(permission_id ORDER BY permission_id) AS permissions
         FROM role_permissions WHERE role_id = $1`,
      [held],
    );
    assert.deepEqual(permissions, ["node:view"], "the refused change changed nothing");
    // Renaming, or sending the same set, changes nobody's permissions.
    const renamed = await chief.request("PUT", path, { name: "Node viewers", permissions: ["node:view"] });
    assert.equal(renamed.status, 200, renamed.text);
    // Nobody holds this one.
    const free = await chief.request("PUT", `/api/v1/roles/${unused}`, { permissions: ["policy:view"] });
    assert.equal(free.status, 200, free.text);
    const changed = await chief.request("PUT", path, {
      permissions: ["node:view", "policy:view"],
      step_up: { password: chief.password },
    });
    assert.equal(changed.status, 200, changed.text);
    assert.deepEqual(changed.json.permissions.toSorted(), ["node:view", "policy:view"]);

    assert.equal(
      (await chief.request("DELETE", path)).json?.error?.code,
      "reauthentication_required",
    );
    assert.equal((await db.query("SELECT 1 FROM roles WHERE id = $1", [held])).length, 1);
    const removed = await chief.request("DELETE", path, { password: chief.password });
    assert.equal(removed.status, 204, removed.text);
    const unusedGone = await chief.request("DELETE", `/api/v1/roles/${unused}`);
    assert.equal(unusedGone.status, 204, unusedGone.text);

    assert.equal((await stepUpRefusals(db, path)).length, 2, "both refusals are audited");
  },
);

serverTest("changing the members of a user group that carries roles needs step-up", async (server, db) => {
  const chief = await server.loginAs({ username: "chief", superAdmin: true });
  const frank = await server.loginAs({ username: "frank", permissions: [] });
  const [{ id: auditor }] = await db.query<{ id: string }>("SELECT id FROM roles WHERE name = 'Auditor'");
  const group = async (name: string) => {
    const res = await chief.request("POST", "/api/v1/user-groups", { name });
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  };
  const plain = await group("Plain");
  const powerful = await group("Auditors");
  const bound = await chief.request("POST", `/api/v1/user-groups/${powerful}/role-bindings`, {
    role_id: auditor,
    step_up: { password: chief.password },
  });
  assert.equal(bound.status, 201, bound.text);

  // A group without roles: membership grants nothing.
  const joinPlain = await chief.request("POST", `/api/v1/user-groups/${plain}/members`, {
    user_id: frank.user.id,
  });
  assert.equal(joinPlain.status, 204, joinPlain.text);

  const members = `/api/v1/user-groups/${powerful}/members`;
  const bare = await chief.request("POST", members, { user_id: frank.user.id });
  assert.equal(bare.json?.error?.code, "reauthentication_required", bare.text);
  assert.ok(!(await frank.request("GET", "/api/v1/auth/me")).json.permissions.includes("audit_log:view"));
  const added = await chief.request("POST", members, {
    user_id: frank.user.id,
    step_up: { password: chief.password },
  });
  assert.equal(added.status, 204, added.text);
  assert.ok((await frank.request("GET", "/api/v1/auth/me")).json.permissions.includes("audit_log:view"));

  const member = `${members}/${frank.user.id}`;
  assert.equal((await chief.request("DELETE", member)).json?.error?.code, "reauthentication_required");
  assert.equal(
    (await chief.request("DELETE", `/api/v1/user-groups/${powerful}`)).json?.error?.code,
    "reauthentication_required",
    "deleting a group that hands out roles takes them from its members",
  );
  const left = await chief.request("DELETE", member, { password: chief.password });
  assert.equal(left.status, 204, left.text);
  // Empty now: deleting it takes nothing from anyone.
  const gone = await chief.request("DELETE", `/api/v1/user-groups/${powerful}`);
  assert.equal(gone.status, 204, gone.text);
  assert.equal((await stepUpRefusals(db, members)).length, 1);
});
