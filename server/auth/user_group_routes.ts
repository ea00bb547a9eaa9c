/**
 * `/api/v1/user-groups`: groups, their members and the roles bound to them. A group hands its roles to its
 * members, so changing who is in a group, or what it holds, requires holding everything the group carries.
 */
import { badRequest, conflict, notFound } from "../http/errors.ts";
import type { JsonSchema } from "../http/json_schema.ts";
import { auditResource, type AuthUser, body, type RouteSpec } from "../http/route.ts";
import type { Queryable } from "../db/db.ts";
import { BINDING_BODY_SCHEMA, type BindingBody, checkBindingInput } from "./binding_input.ts";
import { PAGE_QUERY, pageOf, pageRequest } from "./pagination.ts";
import { uuidParam } from "./params.ts";
import { assertHolds, identityTransaction, reachablePermissionsOfGroup } from "./rbac.ts";
import { createBinding, deleteBinding, getBinding, listBindings } from "./role_bindings.ts";
import type { IdentityServices } from "./services.ts";
import {
  addMember,
  createUserGroup,
  deleteUserGroup,
  getUserGroup,
  listMembers,
  listUserGroups,
  removeMember,
  updateUserGroup,
  type UserGroup,
} from "./user_groups.ts";
import { getUser } from "./users.ts";

const GROUP_SCHEMA: JsonSchema = {
  type: "object",
  properties: {
    id: { type: "string", format: "uuid" },
    name: { type: "string" },
    description: { type: "string" },
    member_count: { type: "integer" },
  },
};
const NAME_SCHEMA: JsonSchema = { type: "string", minLength: 1, maxLength: 100, pattern: "\\S" };
const DESCRIPTION_SCHEMA: JsonSchema = { type: "string", maxLength: 1000 };

async function manageableGroup(q: Queryable, caller: AuthUser, id: string, verb: string): Promise<UserGroup> {
  const group = await getUserGroup(q, id);
  if (!group) throw notFound(`user group ${id}`);
  assertHolds(caller, await reachablePermissionsOfGroup(q, id), `${verb} user group "${group.name}"`);
  return group;
}

/** The user group routes. */
export function userGroupRoutes(s: IdentityServices): RouteSpec[] {
  const { db } = s.ctx;
  const requireGroup = async (id: string) => {
    const group = await getUserGroup(db, id);
    if (!group) throw notFound(`user group ${id}`);
    return group;
  };
  return [
    {
      method: "GET",
      path: "/api/v1/user-groups",
      summary: "List user groups",
      tag: "user-groups",
      access: "user_group:view",
      query: PAGE_QUERY,
      responses: { "200": { description: "A page of groups", schema: { type: "object" } } },
      async handler(c) {
        const page = pageRequest(c);
        const { items, total } = await listUserGroups(db, page);
        return c.json(pageOf(items, total, page));
      },
    },
    {
      method: "POST",
      path: "/api/v1/user-groups",
      summary: "Create a user group",
      tag: "user-groups",
      access: "user_group:create",
      audit: { resourceType: "user_group" },
      body: {
        type: "object",
        required: ["name"],
        additionalProperties: false,
        properties: { name: NAME_SCHEMA, description: DESCRIPTION_SCHEMA },
      },
      responses: { "201": { description: "The new group", schema: GROUP_SCHEMA } },
      async handler(c) {
        const input = body<{ name: string; description?: string }>(c);
        const name = input.name.trim();
        auditResource(c, { type: "user_group", name });
        const group = await identityTransaction(db, async (tx) => {
          if ((await tx.query("SELECT 1 FROM user_groups WHERE name = $1", [name])).length > 0) {
            throw conflict(`a user group named "${name}" already exists`);
          }
          return await createUserGroup(tx, { name, description: input.description });
        });
        auditResource(c, { type: "user_group", id: group.id, name: group.name });
        return c.json(group, 201);
      },
    },
    {
      method: "GET",
      path: "/api/v1/user-groups/:id",
      summary: "One user group with its role bindings",
      tag: "user-groups",
      access: "user_group:view",
      responses: { "200": { description: "The group", schema: GROUP_SCHEMA } },
      async handler(c) {
        const group = await requireGroup(uuidParam(c, "id"));
        return c.json({ ...group, role_bindings: await listBindings(db, { userGroupId: group.id }) });
      },
    },
    {
      method: "PUT",
      path: "/api/v1/user-groups/:id",
      summary: "Rename a user group or change its description",
      tag: "user-groups",
      access: "user_group:edit",
      audit: { resourceType: "user_group" },
      body: {
        type: "object",
        additionalProperties: false,
        properties: { name: NAME_SCHEMA, description: DESCRIPTION_SCHEMA },
      },
      responses: { "200": { description: "The updated group", schema: GROUP_SCHEMA } },
      async handler(c) {
        const id = uuidParam(c, "id");
        const input = body<{ name?: string; description?: string }>(c);
        const group = await identityTransaction(db, async (tx) => {
          const current = await getUserGroup(tx, id);
          if (!current) throw notFound(`user group ${id}`);
          auditResource(c, { type: "user_group", id, name: current.name });
          const name = input.name?.trim();
          if (
            name && name !== current.name &&
            (await tx.query("SELECT 1 FROM user_groups WHERE name = $1", [name])).length
          ) {
            throw conflict(`a user group named "${name}" already exists`);
          }
          return await updateUserGroup(tx, current, { name, description: input.description });
        });
        auditResource(c, { type: "user_group", id, name: group.name });
        return c.json(group);
      },
    },
    {
      method: "DELETE",
      path: "/api/v1/user-groups/:id",
      summary: "Delete a user group (members lose the roles it carried)",
      tag: "user-groups",
      access: "user_group:delete",
      audit: { resourceType: "user_group" },
      responses: { "204": { description: "Deleted" } },
      async handler(c) {
        const caller = c.get("user")!;
        const id = uuidParam(c, "id");
        await identityTransaction(db, async (tx) => {
          const group = await manageableGroup(tx, caller, id, "delete");
          auditResource(c, { type: "user_group", id, name: group.name });
          await deleteUserGroup(tx, id);
        });
        return c.body(null, 204);
      },
    },
    {
      method: "GET",
      path: "/api/v1/user-groups/:id/members",
      summary: "Members of a user group",
      tag: "user-groups",
      access: "user_group:view",
      query: PAGE_QUERY,
      responses: { "200": { description: "A page of users", schema: { type: "object" } } },
      async handler(c) {
        const group = await requireGroup(uuidParam(c, "id"));
        const page = pageRequest(c);
        const { items, total } = await listMembers(db, group.id, page);
        return c.json(pageOf(items, total, page));
      },
    },
    {
      method: "POST",
      path: "/api/v1/user-groups/:id/members",
      summary: "Add a user to a group (they receive the group's roles)",
      tag: "user-groups",
      access: "user_group:edit",
      audit: { resourceType: "user_group", action: "user_group.member_add" },
      body: {
        type: "object",
        required: ["user_id"],
        additionalProperties: false,
        properties: { user_id: { type: "string", format: "uuid" } },
      },
      responses: { "204": { description: "Added" } },
      async handler(c) {
        const caller = c.get("user")!;
        const id = uuidParam(c, "id");
        const { user_id: userId } = body<{ user_id: string }>(c);
        await identityTransaction(db, async (tx) => {
          const group = await manageableGroup(tx, caller, id, "add members to");
          auditResource(c, { type: "user_group", id, name: group.name });
          const user = await getUser(tx, userId);
          if (!user) {
            throw badRequest(`user_id: no user with id ${userId}`, [{
              field: "user_id",
              message: "no user with this id",
            }]);
          }
          c.set("auditDetails", { member: user.username });
          if (!(await addMember(tx, id, userId))) {
            throw conflict(`"${user.username}" is already a member of "${group.name}"`);
          }
        });
        return c.body(null, 204);
      },
    },
    {
      method: "DELETE",
      path: "/api/v1/user-groups/:id/members/:userId",
      summary: "Remove a user from a group",
      tag: "user-groups",
      access: "user_group:edit",
      audit: { resourceType: "user_group", action: "user_group.member_remove" },
      responses: { "204": { description: "Removed" } },
      async handler(c) {
        const caller = c.get("user")!;
        const id = uuidParam(c, "id");
        const userId = uuidParam(c, "userId");
        await identityTransaction(db, async (tx) => {
          const group = await manageableGroup(tx, caller, id, "remove members from");
          auditResource(c, { type: "user_group", id, name: group.name });
          c.set("auditDetails", { member_id: userId });
          if (!(await removeMember(tx, id, userId))) {
            throw notFound(`member ${userId} of user group "${group.name}"`);
          }
        });
        return c.body(null, 204);
      },
    },
    {
      method: "GET",
      path: "/api/v1/user-groups/:id/role-bindings",
      summary: "Roles bound to a user group",
      tag: "user-groups",
      access: "user_group:view",
      query: PAGE_QUERY,
      responses: { "200": { description: "A page of role bindings", schema: { type: "object" } } },
      async handler(c) {
        const group = await requireGroup(uuidParam(c, "id"));
        const page = pageRequest(c);
        const all = await listBindings(db, { userGroupId: group.id });
        return c.json(pageOf(all.slice(page.offset, page.offset + page.perPage), all.length, page));
      },
    },
    {
      method: "POST",
      path: "/api/v1/user-groups/:id/role-bindings",
      summary:
        "Bind a role to a user group (global, or one node group: scoped bindings grant nothing in this edition)",
      tag: "user-groups",
      access: "user_group:edit",
      audit: { resourceType: "role_binding" },
      body: BINDING_BODY_SCHEMA,
      responses: { "201": { description: "The binding", schema: { type: "object" } } },
      async handler(c) {
        const caller = c.get("user")!;
        const id = uuidParam(c, "id");
        const input = body<BindingBody>(c);
        const binding = await identityTransaction(db, async (tx) => {
          const group = await manageableGroup(tx, caller, id, "change the roles of");
          const { role, scopeType, scopeId } = await checkBindingInput(tx, caller, input);
          auditResource(c, { type: "role_binding", name: `${role.name} → ${group.name}` });
          const existing = await tx.query(
            `SELECT 1 FROM role_bindings WHERE role_id = $1 AND user_group_id = $2 AND scope_type = $3
               AND scope_id IS NOT DISTINCT FROM $4`,
            [role.id, id, scopeType, scopeId],
          );
          if (existing.length > 0) {
            throw conflict(`user group "${group.name}" already has role "${role.name}" in this scope`);
          }
          return await createBinding(tx, {
            subject: { userGroupId: id },
            roleId: role.id,
            scopeType,
            scopeId,
          });
        });
        auditResource(c, { type: "role_binding", id: binding.id, name: binding.role_name });
        return c.json(binding, 201);
      },
    },
    {
      method: "DELETE",
      path: "/api/v1/user-groups/:id/role-bindings/:bindingId",
      summary: "Remove a role binding from a user group",
      tag: "user-groups",
      access: "user_group:edit",
      audit: { resourceType: "role_binding" },
      responses: { "204": { description: "Removed" } },
      async handler(c) {
        const caller = c.get("user")!;
        const id = uuidParam(c, "id");
        const bindingId = uuidParam(c, "bindingId");
        auditResource(c, { type: "role_binding", id: bindingId });
        await identityTransaction(db, async (tx) => {
          const group = await manageableGroup(tx, caller, id, "change the roles of");
          const binding = await getBinding(tx, { userGroupId: id }, bindingId);
          if (!binding) throw notFound(`role binding ${bindingId} of user group "${group.name}"`);
          auditResource(c, {
            type: "role_binding",
            id: bindingId,
            name: `${binding.role_name} → ${group.name}`,
          });
          await deleteBinding(tx, { userGroupId: id }, bindingId);
        });
        return c.body(null, 204);
      },
    },
  ];
}
