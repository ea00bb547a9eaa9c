/**
 * `/api/v1/users`: local accounts, admin password reset and the roles bound to a user.
 *
 * Managing a user (edit, disable, delete, reset the password, change their roles) requires holding every
 * permission that user can reach; otherwise an account manager could take over a more powerful account.
 */
import { badRequest, conflict, notFound } from "../http/errors.ts";
import type { JsonSchema } from "../http/json_schema.ts";
import { auditResource, type AuthUser, body, type RouteContext, type RouteSpec } from "../http/route.ts";
import type { Queryable } from "../db/db.ts";
import { BINDING_BODY_SCHEMA, type BindingBody, checkBindingInput } from "./binding_input.ts";
import { PAGE_QUERY, pageOf, pageRequest } from "./pagination.ts";
import { uuidParam } from "./params.ts";
import { checkPasswordRules, MAX_PASSWORD_LENGTH } from "./password.ts";
import {
  assertHolds,
  effectivePermissions,
  identityTransaction,
  reachablePermissionsOfUser,
} from "./rbac.ts";
import { createBinding, deleteBinding, getBinding, listBindings } from "./role_bindings.ts";
import type { IdentityServices } from "./services.ts";
import { groupsOfUser } from "./user_groups.ts";
import {
  createUser,
  deleteUser,
  getUser,
  listUsers,
  setPassword,
  updateUser,
  type User,
  USERNAME_PATTERN,
} from "./users.ts";

const USER_SCHEMA: JsonSchema = {
  type: "object",
  properties: {
    id: { type: "string", format: "uuid" },
    username: { type: "string" },
    email: { type: "string" },
    full_name: { type: "string" },
    source: { type: "string" },
    enabled: { type: "boolean" },
    created_at: { type: "string" },
    updated_at: { type: "string" },
  },
};

const PROFILE_PROPERTIES: Record<string, JsonSchema> = {
  email: { type: "string", maxLength: 254 },
  full_name: { type: "string", maxLength: 200 },
  enabled: { type: "boolean" },
};

/** Loads the target user (404) and refuses (403) when they hold permissions the caller does not. */
async function manageableUser(q: Queryable, caller: AuthUser, id: string, verb: string): Promise<User> {
  const user = await getUser(q, id);
  if (!user) throw notFound(`user ${id}`);
  assertHolds(caller, await reachablePermissionsOfUser(q, id), `${verb} user "${user.username}"`);
  return user;
}

function checkEmail(email: string | undefined): void {
  if (email && !/^[^\s@]+@[^\s@]+$/.test(email)) {
    throw badRequest(`email: "${email}" is not an e-mail address`, [{
      field: "email",
      message: "is not an e-mail address",
    }]);
  }
}

/** The user routes. */
export function userRoutes(s: IdentityServices): RouteSpec[] {
  const { db } = s.ctx;
  const detail = async (id: string) => {
    const user = await getUser(db, id);
    if (!user) throw notFound(`user ${id}`);
    return {
      ...user,
      groups: await groupsOfUser(db, id),
      role_bindings: await listBindings(db, { userId: id }),
      permissions: await effectivePermissions(db, id),
    };
  };
  const audited = (c: RouteContext, user: { id: string; username: string }) =>
    auditResource(c, { type: "user", id: user.id, name: user.username });

  return [
    {
      method: "GET",
      path: "/api/v1/users",
      summary: "List users",
      tag: "users",
      access: "user:view",
      query: {
        search: { type: "string", maxLength: 200, description: "Part of the username, e-mail or full name" },
        enabled: { type: "boolean" },
        ...PAGE_QUERY,
      },
      responses: { "200": { description: "A page of users", schema: { type: "object" } } },
      async handler(c) {
        const page = pageRequest(c);
        const enabled = c.req.query("enabled");
        const { items, total } = await listUsers(db, {
          search: c.req.query("search") || undefined,
          enabled: enabled === undefined ? undefined : enabled === "true",
          page,
        });
        return c.json(pageOf(items, total, page));
      },
    },
    {
      method: "POST",
      path: "/api/v1/users",
      summary: "Create a local user, optionally with global roles",
      tag: "users",
      access: "user:create",
      audit: { resourceType: "user" },
      body: {
        type: "object",
        required: ["username", "password"],
        additionalProperties: false,
        properties: {
          username: { type: "string", pattern: USERNAME_PATTERN, description: "Letters, digits and . _ @ -" },
          password: { type: "string", minLength: 1, maxLength: MAX_PASSWORD_LENGTH },
          ...PROFILE_PROPERTIES,
          role_ids: {
            type: "array",
            items: { type: "string", format: "uuid" },
            maxItems: 100,
            uniqueItems: true,
          },
        },
      },
      responses: { "201": { description: "The new user", schema: USER_SCHEMA } },
      async handler(c) {
        const caller = c.get("user")!;
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
        auditResource(c, { type: "user", name: input.username });
        checkPasswordRules(input.password);
        checkEmail(input.email);
        const user = await identityTransaction(db, async (tx) => {
          const bindings = [];
          for (const roleId of input.role_ids ?? []) {
            bindings.push(await checkBindingInput(tx, caller, { role_id: roleId }));
          }
          const existing = await tx.query("SELECT 1 FROM users WHERE username = $1", [input.username]);
          if (existing.length > 0) throw conflict(`a user named "${input.username}" already exists`);
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
        audited(c, user);
        return c.json(await detail(user.id), 201);
      },
    },
    {
      method: "GET",
      path: "/api/v1/users/:id",
      summary: "One user with groups, role bindings and effective permissions",
      tag: "users",
      access: "user:view",
      responses: { "200": { description: "The user", schema: USER_SCHEMA } },
      async handler(c) {
        return c.json(await detail(uuidParam(c, "id")));
      },
    },
    {
      method: "PUT",
      path: "/api/v1/users/:id",
      summary: "Change e-mail, full name or the enabled flag (disabling ends the user's sessions)",
      tag: "users",
      access: "user:edit",
      audit: { resourceType: "user" },
      body: { type: "object", additionalProperties: false, properties: PROFILE_PROPERTIES },
      responses: { "200": { description: "The updated user", schema: USER_SCHEMA } },
      async handler(c) {
        const caller = c.get("user")!;
        const id = uuidParam(c, "id");
        const input = body<{ email?: string; full_name?: string; enabled?: boolean }>(c);
        checkEmail(input.email);
        if (input.enabled === false && id === caller.id) {
          throw conflict("you cannot disable your own account; ask another administrator");
        }
        const updated = await identityTransaction(db, async (tx) => {
          const target = await manageableUser(tx, caller, id, "change");
          audited(c, target);
          return await updateUser(tx, id, {
            email: input.email,
            fullName: input.full_name,
            enabled: input.enabled,
          });
        });
        audited(c, updated!);
        return c.json(await detail(id));
      },
    },
    {
      method: "DELETE",
      path: "/api/v1/users/:id",
      summary: "Delete a user (their sessions end at once)",
      tag: "users",
      access: "user:delete",
      audit: { resourceType: "user" },
      responses: { "204": { description: "Deleted" } },
      async handler(c) {
        const caller = c.get("user")!;
        const id = uuidParam(c, "id");
        if (id === caller.id) throw conflict("you cannot delete your own account; ask another administrator");
        await identityTransaction(db, async (tx) => {
          const target = await manageableUser(tx, caller, id, "delete");
          audited(c, target);
          await deleteUser(tx, id);
        });
        return c.body(null, 204);
      },
    },
    {
      method: "PUT",
      path: "/api/v1/users/:id/password",
      summary: "Set a new password for a user (administrator reset; their sessions end)",
      tag: "users",
      access: "user:edit",
      audit: { resourceType: "user", action: "user.password_reset" },
      body: {
        type: "object",
        required: ["new_password"],
        additionalProperties: false,
        properties: { new_password: { type: "string", minLength: 1, maxLength: MAX_PASSWORD_LENGTH } },
      },
      responses: { "204": { description: "Password set" } },
      async handler(c) {
        const caller = c.get("user")!;
        const id = uuidParam(c, "id");
        const input = body<{ new_password: string }>(c);
        checkPasswordRules(input.new_password, "new_password");
        await identityTransaction(db, async (tx) => {
          const target = await manageableUser(tx, caller, id, "reset the password of");
          audited(c, target);
          if (target.source !== "local") {
            throw conflict(
              `user "${target.username}" signs in through ${target.source}; change the password there`,
            );
          }
          await setPassword(tx, id, input.new_password);
        });
        return c.body(null, 204);
      },
    },
    {
      method: "GET",
      path: "/api/v1/users/:id/role-bindings",
      summary: "Roles bound to a user directly",
      tag: "users",
      access: "user:view",
      query: PAGE_QUERY,
      responses: { "200": { description: "A page of role bindings", schema: { type: "object" } } },
      async handler(c) {
        const id = uuidParam(c, "id");
        if (!(await getUser(db, id))) throw notFound(`user ${id}`);
        const page = pageRequest(c);
        const all = await listBindings(db, { userId: id });
        return c.json(pageOf(all.slice(page.offset, page.offset + page.perPage), all.length, page));
      },
    },
    {
      method: "POST",
      path: "/api/v1/users/:id/role-bindings",
      summary:
        "Bind a role to a user (global, or one node group: scoped bindings grant nothing in this edition)",
      tag: "users",
      access: "user:edit",
      audit: { resourceType: "role_binding" },
      body: BINDING_BODY_SCHEMA,
      responses: { "201": { description: "The binding", schema: { type: "object" } } },
      async handler(c) {
        const caller = c.get("user")!;
        const id = uuidParam(c, "id");
        const input = body<BindingBody>(c);
        const binding = await identityTransaction(db, async (tx) => {
          const target = await manageableUser(tx, caller, id, "change the roles of");
          const { role, scopeType, scopeId } = await checkBindingInput(tx, caller, input);
          auditResource(c, { type: "role_binding", name: `${role.name} → ${target.username}` });
          const existing = await tx.query(
            "SELECT 1 FROM role_bindings WHERE role_id = $1 AND user_id = $2 AND scope_type = $3 AND scope_id IS NOT DISTINCT FROM $4",
            [role.id, id, scopeType, scopeId],
          );
          if (existing.length > 0) {
            throw conflict(`user "${target.username}" already has role "${role.name}" in this scope`);
          }
          return await createBinding(tx, { subject: { userId: id }, roleId: role.id, scopeType, scopeId });
        });
        auditResource(c, { type: "role_binding", id: binding.id, name: `${binding.role_name} → ${id}` });
        return c.json(binding, 201);
      },
    },
    {
      method: "DELETE",
      path: "/api/v1/users/:id/role-bindings/:bindingId",
      summary: "Remove a role binding from a user",
      tag: "users",
      access: "user:edit",
      audit: { resourceType: "role_binding" },
      responses: { "204": { description: "Removed" } },
      async handler(c) {
        const caller = c.get("user")!;
        const id = uuidParam(c, "id");
        const bindingId = uuidParam(c, "bindingId");
        auditResource(c, { type: "role_binding", id: bindingId });
        await identityTransaction(db, async (tx) => {
          const target = await manageableUser(tx, caller, id, "change the roles of");
          const binding = await getBinding(tx, { userId: id }, bindingId);
          if (!binding) throw notFound(`role binding ${bindingId} of user "${target.username}"`);
          auditResource(c, {
            type: "role_binding",
            id: bindingId,
            name: `${binding.role_name} → ${target.username}`,
          });
          await deleteBinding(tx, { userId: id }, bindingId);
        });
        return c.body(null, 204);
      },
    },
  ];
}
