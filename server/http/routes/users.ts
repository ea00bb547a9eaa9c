/**
 * `/api/v1/users`: local accounts, admin password reset and the roles bound to a user.
 *
 * Managing a user (edit, disable, delete, reset the password, change their roles) requires holding every
 * permission that user can reach; otherwise an account manager could take over a more powerful account.
 */
import type { Queryable } from "../../db/db.ts";
import { found } from "../../core/errors.ts";
import { assertNameFree } from "../../domain/records.ts";
import { badRequest, conflict } from "../errors.ts";
import { closedObject, type JsonSchema, objectSchema, UUID_SCHEMA } from "../json_schema.ts";
import { PAGE_QUERY, pageRequest, pageSchema } from "../pagination.ts";
import { auditResource, body, caller, queryBool, type RouteSpec, uuidParam } from "../route.ts";
import { auditChanges } from "../audit_changes.ts";
import { checkPasswordRules, MAX_PASSWORD_LENGTH } from "../../auth/password.ts";
import { effectivePermissions, identityTransaction, reachablePermissionsOfUser } from "../../auth/rbac.ts";
import {
  checkBindingInput,
  manageable,
  ROLE_BINDING_SCHEMA,
  roleBindingRoutes,
  type Subject,
} from "./role_bindings.ts";
import { createBinding, listBindings } from "../../auth/role_bindings.ts";
import type { IdentityServices } from "../../auth/services.ts";
import { checkStepUp, STEP_UP_OBJECT_PROPERTY, takeStepUpProof } from "../step_up.ts";
import { groupsOfUser } from "../../auth/user_groups.ts";
import {
  createUser,
  deleteUser,
  getUser,
  listUsers,
  setPassword,
  updateUser,
  type User,
  USERNAME_PATTERN,
} from "../../auth/users.ts";
import { DATE_TIME, OPTIONAL_NAME_PATTERN } from "./common.ts";
import { usersRoute as route } from "./tags.ts";

/** A user's own record (what a user group's member list shows). */
export const USER_SCHEMA: JsonSchema = objectSchema({
  id: UUID_SCHEMA,
  username: { type: "string" },
  email: { type: "string" },
  full_name: { type: "string" },
  source: { type: "string" },
  enabled: { type: "boolean" },
  created_at: DATE_TIME,
  updated_at: DATE_TIME,
});

/** A user as the user list shows them: with every role they hold, directly or through a user group. */
const LISTED_USER_SCHEMA: JsonSchema = objectSchema({
  ...USER_SCHEMA.properties,
  roles: {
    type: "array",
    items: objectSchema({
      id: UUID_SCHEMA,
      name: { type: "string" },
      scope_type: { type: "string" },
      user_group: { type: ["string", "null"], description: "The user group it comes through, if any" },
    }),
  },
});

/** A user with their groups, role bindings and effective permissions. */
const USER_DETAIL_SCHEMA: JsonSchema = objectSchema({
  ...USER_SCHEMA.properties,
  groups: { type: "array", items: objectSchema({ id: UUID_SCHEMA, name: { type: "string" } }) },
  role_bindings: { type: "array", items: ROLE_BINDING_SCHEMA },
  permissions: { type: "array", items: { type: "string" } },
});

const PROFILE_PROPERTIES: Record<string, JsonSchema> = {
  email: { type: "string", maxLength: 254, pattern: OPTIONAL_NAME_PATTERN },
  full_name: { type: "string", maxLength: 200, pattern: OPTIONAL_NAME_PATTERN },
  enabled: { type: "boolean" },
};

/** Users as holders of roles. */
const USER_SUBJECT: Subject<User> = {
  noun: "user",
  find: getUser,
  nameOf: (user) => user.username,
  reachable: reachablePermissionsOfUser,
  holder: (id) => ({ userId: id }),
};

function checkEmail(email: string | undefined): void {
  if (email && !/^[^\s@]+@[^\s@]+$/.test(email)) {
    throw badRequest(`email: "${email}" is not an e-mail address`, [{
      field: "email",
      message: "is not an e-mail address",
    }]);
  }
}

/** A role a listed user holds, directly or through one of their user groups (`user_group`). */
interface HeldRole {
  id: string;
  name: string;
  scope_type: string;
  user_group: string | null;
}

/** The roles each of `ids` holds, in one query (the users table shows them). */
async function rolesOfUsers(q: Queryable, ids: string[]): Promise<Map<string, HeldRole[]>> {
  const out = new Map<string, HeldRole[]>();
  if (ids.length === 0) return out;
  const rows = await q.query<HeldRole & { user_id: string }>(
    `SELECT h.user_id, r.id, r.name, rb.scope_type, g.name AS user_group
       FROM (SELECT id AS binding_id, user_id, NULL::uuid AS group_id FROM role_bindings
              WHERE user_id = ANY($1::uuid[])
             UNION ALL
             SELECT rb.id, m.user_id, m.user_group_id FROM role_bindings rb
               JOIN user_group_members m ON m.user_group_id = rb.user_group_id
              WHERE m.user_id = ANY($1::uuid[])) h
       JOIN role_bindings rb ON rb.id = h.binding_id
       JOIN roles r ON r.id = rb.role_id
       LEFT JOIN user_groups g ON g.id = h.group_id
      ORDER BY r.name, g.name NULLS FIRST`,
    [ids],
  );
  for (const { user_id, ...role } of rows) {
    const list = out.get(user_id) ?? [];
    list.push(role);
    out.set(user_id, list);
  }
  return out;
}

/** The user routes. */
export function userRoutes(s: IdentityServices): RouteSpec[] {
  const { db } = s.ctx;
  const detail = async (id: string) => ({
    ...found(await getUser(db, id), `user ${id}`),
    groups: await groupsOfUser(db, id),
    role_bindings: await listBindings(db, { userId: id }),
    permissions: await effectivePermissions(db, id),
  });

  return [
    route("GET /api/v1/users", "user:view", {
      summary: "List users",
      query: {
        search: { type: "string", maxLength: 200, description: "Part of the username, e-mail or full name" },
        enabled: { type: "boolean" },
        ...PAGE_QUERY,
      },
      responses: { "200": { description: "A page of users", schema: pageSchema(LISTED_USER_SCHEMA) } },
      async handler(c) {
        const page = await listUsers(db, {
          search: c.req.query("search") || undefined,
          enabled: queryBool(c, "enabled"),
          page: pageRequest(c),
        });
        const roles = await rolesOfUsers(db, page.items.map((u) => u.id));
        return c.json({ ...page, items: page.items.map((u) => ({ ...u, roles: roles.get(u.id) ?? [] })) });
      },
    }),
    route("POST /api/v1/users", "user:create", {
      summary: "Create a local user, optionally with global roles",
      audit: { resourceType: "user" },
      body: closedObject({
        username: { type: "string", pattern: USERNAME_PATTERN, description: "Letters, digits and . _ @ -" },
        password: { type: "string", minLength: 1, maxLength: MAX_PASSWORD_LENGTH },
        ...PROFILE_PROPERTIES,
        role_ids: {
          type: "array",
          items: UUID_SCHEMA,
          maxItems: 100,
          uniqueItems: true,
          description: "Global roles for the new user (needs step-up: step_up)",
        },
        // Not the top-level proof fields: `password` here is the new user's.
        ...STEP_UP_OBJECT_PROPERTY,
      }, ["username", "password"]),
      responses: {
        "201": { description: "The new user", schema: USER_DETAIL_SCHEMA },
        "403": {
          description: "Missing permission, escalation, or step-up re-authentication (with role_ids)",
        },
      },
      async handler(c) {
        const input = body<
          {
            username: string;
            password: string;
            email?: string;
            full_name?: string;
            enabled?: boolean;
            role_ids?: string[];
          }
        >(c);
        const proof = takeStepUpProof(c, { objectOnly: true });
        auditResource(c, { name: input.username });
        checkPasswordRules(input.password);
        checkEmail(input.email);
        const user = await identityTransaction(db, async (tx) => {
          const bindings = [];
          for (const roleId of input.role_ids ?? []) {
            bindings.push(await checkBindingInput(tx, caller(c), { role_id: roleId }));
          }
          // Handing out roles is binding them: the same fresh re-authentication as the role-binding routes.
          if (bindings.length > 0) await checkStepUp(s.stepUp, tx, c, proof);
          await assertNameFree(tx, {
            table: "users",
            column: "username",
            noun: "user",
            name: input.username,
          });
          const created = await createUser(tx, {
            username: input.username,
            password: input.password,
            email: input.email,
            fullName: input.full_name,
            enabled: input.enabled,
          });
          for (const b of bindings) {
            await createBinding(tx, {
              subject: { userId: created.id },
              roleId: b.role.id,
              scopeType: "global",
            });
          }
          return created;
        });
        auditResource(c, { id: user.id, name: user.username });
        return c.json(await detail(user.id), 201);
      },
    }),
    route("GET /api/v1/users/:id", "user:view", {
      summary: "One user with groups, role bindings and effective permissions",
      responses: { "200": { description: "The user", schema: USER_DETAIL_SCHEMA } },
      async handler(c) {
        return c.json(await detail(uuidParam(c, "id")));
      },
    }),
    route("PUT /api/v1/users/:id", "user:edit", {
      summary: "Change e-mail, full name or the enabled flag (disabling ends the user's sessions)",
      audit: { resourceType: "user" },
      body: closedObject(PROFILE_PROPERTIES),
      responses: { "200": { description: "The updated user", schema: USER_SCHEMA } },
      async handler(c) {
        const id = uuidParam(c, "id");
        const input = body<{ email?: string; full_name?: string; enabled?: boolean }>(c);
        checkEmail(input.email);
        if (input.enabled === false && id === caller(c).id) {
          throw conflict("you cannot disable your own account; ask another administrator");
        }
        const before = await identityTransaction(db, async (tx) => {
          const target = await manageable(tx, USER_SUBJECT, { caller: caller(c), id, verb: "change" });
          auditResource(c, { id, name: target.username });
          const before = await detail(id);
          await updateUser(tx, id, { email: input.email, fullName: input.full_name, enabled: input.enabled });
          return before;
        });
        const after = await detail(id);
        auditChanges(c, { before, after, fields: ["email", "full_name", "enabled"] });
        return c.json(after);
      },
    }),
    route("DELETE /api/v1/users/:id", "user:delete", {
      summary: "Delete a user (their sessions end at once)",
      audit: { resourceType: "user" },
      responses: { "204": { description: "Deleted" } },
      async handler(c) {
        const id = uuidParam(c, "id");
        if (id === caller(c).id) {
          throw conflict("you cannot delete your own account; ask another administrator");
        }
        await identityTransaction(db, async (tx) => {
          const target = await manageable(tx, USER_SUBJECT, { caller: caller(c), id, verb: "delete" });
          auditResource(c, { id, name: target.username });
          await deleteUser(tx, id);
        });
        return c.body(null, 204);
      },
    }),
    route("PUT /api/v1/users/:id/password", "user:edit", {
      summary: "Set a new password for a user (administrator reset; their sessions end)",
      audit: { resourceType: "user", action: "user.password_reset" },
      body: closedObject({ new_password: { type: "string", minLength: 1, maxLength: MAX_PASSWORD_LENGTH } }, [
        "new_password",
      ]),
      responses: { "204": { description: "Password set" } },
      async handler(c) {
        const id = uuidParam(c, "id");
        const input = body<{ new_password: string }>(c);
        checkPasswordRules(input.new_password, "new_password");
        await identityTransaction(db, async (tx) => {
          const target = await manageable(tx, USER_SUBJECT, {
            caller: caller(c),
            id,
            verb: "reset the password of",
          });
          auditResource(c, { id, name: target.username });
          if (target.source !== "local") {
            throw conflict(
              `user "${target.username}" signs in through ${target.source}; change the password there`,
            );
          }
          await setPassword(tx, id, input.new_password);
        });
        return c.body(null, 204);
      },
    }),
    ...roleBindingRoutes(s, {
      subject: USER_SUBJECT,
      path: "/api/v1/users/:id",
      tag: "users",
      view: "user:view",
      edit: "user:edit",
    }),
  ];
}
