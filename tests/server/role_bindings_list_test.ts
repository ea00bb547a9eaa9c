/**
 * `GET /api/v1/role-bindings` over HTTP on both drivers: every binding with its role, holder and scope;
 * filters, sorting and pages; and the visibility rule: `role:view` opens the list, user bindings appear only
 * with `user:view` and user-group bindings only with `user_group:view` (left out of the rows and the total,
 * also when a filter names them explicitly).
 */
import assert from "node:assert/strict";
import { roleBindingListRoutes } from "../../server/http/routes/role_bindings.ts";
import { createBinding } from "../../server/auth/role_bindings.ts";
import { createRole } from "../../server/auth/roles.ts";
import { createUserGroup } from "../../server/auth/user_groups.ts";
import { createUser } from "../../server/auth/users.ts";
import { builtinRoleId } from "../../server/auth/rbac.ts";
import type { TestClient } from "../helpers/app.ts";
import { createTestServer } from "../helpers/app.ts";
import { dbTest } from "../helpers/db.ts";
import { expectStatus } from "./domain_helpers.ts";

const LIST = "/api/v1/role-bindings";

interface Row {
  id: string;
  role_name: string;
  subject: { type: string; id: string; name: string };
  scope_type: string;
  scope_name: string | null;
  effective: boolean;
  created_at: string;
}

/** `role subject [scope]` of each row, for compact assertions. */
function labels(rows: Row[]): string[] {
  return rows.map((r) =>
    `${r.role_name} ${r.subject.type}:${r.subject.name}${r.scope_name ? ` @${r.scope_name}` : ""}`
  );
}

async function list(client: TestClient, query = ""): Promise<{ items: Row[]; total: number }> {
  return expectStatus(await client.request("GET", `${LIST}${query}`), 200);
}

dbTest(
  "the role-binding list shows every binding the caller may see, filtered and paginated",
  async (db, t) => {
    const server = await createTestServer({ db, routes: (ctx) => roleBindingListRoutes(ctx) });
    try {
      // Fixtures: two users, two user groups, a custom role, a scoped binding. Test logins add their own
      // users and bindings (role `test-role-<username>`), so assertions filter them out by role name.
      const f = await db.transaction(async (tx) => {
        const alice = await createUser(tx, { username: "alice", password: "alice-password-123" });
        const bob = await createUser(tx, { username: "bob", password: "bob-password-1234" });
        const ops = await createUserGroup(tx, { name: "ops" });
        const readers = await createUserGroup(tx, { name: "readers" });
        const deployer = await createRole(tx, { name: "Deployer", permissions: ["binding:edit"] });
        const auditor = await builtinRoleId(tx, "Auditor");
        const [lab] = await tx.query<{ id: string }>(
          "INSERT INTO node_groups (name) VALUES ('lab') RETURNING id",
        );
        const bindings = [
          { subject: { userId: alice.id }, roleId: deployer.id, scopeType: "global" as const },
          {
            subject: { userId: alice.id },
            roleId: auditor,
            scopeType: "node_group" as const,
            scopeId: lab.id,
          },
          { subject: { userId: bob.id }, roleId: auditor, scopeType: "global" as const },
          { subject: { userGroupId: ops.id }, roleId: deployer.id, scopeType: "global" as const },
          { subject: { userGroupId: readers.id }, roleId: auditor, scopeType: "global" as const },
        ];
        for (const b of bindings) await createBinding(tx, b);
        return { alice, bob, ops, readers, deployer, auditor, lab };
      });
      const fixtures = (rows: Row[]) => rows.filter((r) => !r.role_name.startsWith("test-role-"));

      const everything = await server.loginAs({ permissions: ["role:view", "user:view", "user_group:view"] });
      const usersOnly = await server.loginAs({ permissions: ["role:view", "user:view"] });
      const groupsOnly = await server.loginAs({ permissions: ["role:view", "user_group:view"] });
      const rolesOnly = await server.loginAs({ permissions: ["role:view"] });
      const noRoles = await server.loginAs({ permissions: ["user:view", "user_group:view"] });

      await t.step("rows carry the role, the holder and the scope", async () => {
        const page = await list(everything, "?per_page=200&sort=subject");
        assert.deepEqual(labels(fixtures(page.items)), [
          "Super Admin user:admin",
          "Auditor user:alice @lab",
          "Deployer user:alice",
          "Auditor user:bob",
          "Deployer user_group:ops",
          "Auditor user_group:readers",
        ]);
        // admin + 5 logins (one binding each) + 5 fixtures.
        assert.equal(page.total, 11);
        const scoped = page.items.find((r) => r.scope_name === "lab")!;
        assert.equal(scoped.scope_type, "node_group");
        assert.equal(scoped.effective, false, "node-group scopes grant nothing in this edition");
        assert.deepEqual(scoped.subject, { type: "user", id: f.alice.id, name: "alice" });
        const group = page.items.find((r) => r.subject.name === "ops")!;
        assert.deepEqual(group.subject, { type: "user_group", id: f.ops.id, name: "ops" });
        assert.equal(group.effective, true);
        assert.ok(!Number.isNaN(Date.parse(group.created_at)));
      });

      await t.step("without user:view no user binding is listed, nor counted", async () => {
        const page = await list(groupsOnly, "?per_page=200");
        assert.deepEqual(labels(page.items), ["Auditor user_group:readers", "Deployer user_group:ops"]);
        assert.equal(page.total, 2);
        const named = await list(groupsOnly, `?user_id=${f.alice.id}`);
        assert.deepEqual(
          named,
          { items: [], total: 0, page: 1, per_page: 50 },
          "naming the user reveals nothing",
        );
        const searched = await list(groupsOnly, "?search=alice");
        assert.equal(searched.total, 0);
      });

      await t.step("without user_group:view no user-group binding is listed, nor counted", async () => {
        const page = await list(usersOnly, "?per_page=200");
        assert.ok(page.items.every((r) => r.subject.type === "user"), JSON.stringify(labels(page.items)));
        assert.equal(page.total, 9);
        assert.equal((await list(usersOnly, "?subject_type=user_group")).total, 0);
        assert.equal((await list(usersOnly, `?user_group_id=${f.ops.id}`)).total, 0);
      });

      await t.step("role:view alone lists nothing; without role:view the list is refused", async () => {
        assert.deepEqual(await list(rolesOnly), { items: [], total: 0, page: 1, per_page: 50 });
        const refused = await noRoles.request("GET", LIST);
        assert.equal(refused.status, 403);
        assert.match(refused.json.error.message, /role:view/);
      });

      await t.step("filters: role, holder, kind, scope and search", async () => {
        assert.deepEqual(labels((await list(everything, `?role_id=${f.deployer.id}&sort=subject`)).items), [
          "Deployer user:alice",
          "Deployer user_group:ops",
        ]);
        assert.deepEqual(labels((await list(everything, `?user_id=${f.alice.id}`)).items), [
          "Auditor user:alice @lab",
          "Deployer user:alice",
        ]);
        assert.deepEqual(labels((await list(everything, `?user_group_id=${f.readers.id}`)).items), [
          "Auditor user_group:readers",
        ]);
        assert.deepEqual(labels((await list(everything, "?subject_type=user_group&sort=subject")).items), [
          "Deployer user_group:ops",
          "Auditor user_group:readers",
        ]);
        assert.deepEqual(labels((await list(everything, "?scope_type=node_group")).items), [
          "Auditor user:alice @lab",
        ]);
        assert.deepEqual(labels((await list(everything, `?scope_id=${f.lab.id}`)).items), [
          "Auditor user:alice @lab",
        ]);
        // Case-insensitive, on the role or the holder's name; LIKE wildcards are taken literally.
        assert.deepEqual(labels((await list(everything, "?search=DEPLOY&sort=subject")).items), [
          "Deployer user:alice",
          "Deployer user_group:ops",
        ]);
        assert.deepEqual(labels((await list(everything, "?search=read")).items), [
          "Auditor user_group:readers",
        ]);
        assert.equal((await list(everything, "?search=%25")).total, 0);
      });

      await t.step("sorting and pages are stable and cover every row once", async () => {
        const all = await list(everything, "?per_page=200&sort=role&order=desc");
        assert.equal(all.items[all.items.length - 1].role_name, "Auditor");
        const seen: string[] = [];
        for (let page = 1; page <= 4; page++) {
          const part = await list(everything, `?per_page=3&page=${page}&sort=role&order=desc`);
          assert.equal(part.total, 11);
          seen.push(...part.items.map((r) => r.id));
        }
        assert.deepEqual(seen, all.items.map((r) => r.id));
      });

      await t.step("bad parameters are refused naming the field", async () => {
        for (
          const [query, field] of [
            ["?sort=password_hash", "sort"],
            ["?user_id=alice", "user_id"],
            ["?subject_type=robot", "subject_type"],
            ["?per_page=500", "per_page"],
            ["?role=x", "role"],
          ]
        ) {
          const res = await everything.request("GET", `${LIST}${query}`);
          assert.equal(res.status, 400, query);
          assert.equal(res.json.error.fields[0].field, field, query);
        }
      });
    } finally {
      await server.close();
    }
  },
);
