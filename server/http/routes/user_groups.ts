/**
 * `/api/v1/user-groups`: groups, their members and the roles bound to them. A group hands its roles to its
 * members, so changing who is in a group, or what it holds, requires holding everything the group carries.
 * When the group carries roles, adding or removing a member (or deleting the group while it has members)
 * changes what people may do: like binding roles, it needs step-up re-authentication.
 */
import type { Queryable } from "../../db/db.ts";
import { found } from "../../core/errors.ts";
import { assertNameFree } from "../../domain/records.ts";
import { badRequest, conflict, notFound } from "../errors.ts";
import { closedObject, type JsonSchema, objectSchema, UUID_SCHEMA } from "../json_schema.ts";
import { pageRoute } from "../pagination.ts";
import { auditResource, body, caller, created, type RouteSpec, uuidParam } from "../route.ts";
import { auditChanges } from "../audit_changes.ts";
import { identityTransaction, reachablePermissionsOfGroup } from "../../auth/rbac.ts";
import { manageable, ROLE_BINDING_SCHEMA, roleBindingRoutes, type Subject } from "./role_bindings.ts";
import { USER_SCHEMA } from "./users.ts";
import { listBindings } from "../../auth/role_bindings.ts";
import { DESCRIPTION_SCHEMA, NAME_SCHEMA } from "./roles.ts";
import type { IdentityServices } from "../../auth/services.ts";
import { STEP_UP_BODY, STEP_UP_PROPERTIES, STEP_UP_REFUSED } from "../step_up.ts";
import { DATE_TIME, identityChange } from "./common.ts";
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
} from "../../auth/user_groups.ts";
import { getUser } from "../../auth/users.ts";
import { userGroupsRoute as route } from "./tags.ts";

const GROUP_SCHEMA: JsonSchema = objectSchema({
  id: UUID_SCHEMA,
  name: { type: "string" },
  description: { type: "string" },
  member_count: { type: "integer" },
  created_at: DATE_TIME,
  updated_at: DATE_TIME,
});

/** User groups as holders of roles. */
const GROUP_SUBJECT: Subject<UserGroup> = {
  noun: "user group",
  find: getUserGroup,
  nameOf: (group) => group.name,
  reachable: reachablePermissionsOfGroup,
  holder: (id) => ({ userGroupId: id }),
};

/** True when the group holds any role: its membership decides permissions. */
async function carriesRoles(q: Queryable, groupId: string): Promise<boolean> {
  return (await listBindings(q, { userGroupId: groupId })).length > 0;
}

/** The user group routes. */
export function userGroupRoutes(s: IdentityServices): RouteSpec[] {
  const { db } = s.ctx;
  const requireGroup = async (id: string) => found(await getUserGroup(db, id), `user group ${id}`);
  return [
    route(
      "GET /api/v1/user-groups",
      "user_group:view",
      pageRoute("List user groups", {
        items: "groups",
        item: GROUP_SCHEMA,
        list: (page) => listUserGroups(db, page),
      }),
    ),
    route("POST /api/v1/user-groups", "user_group:create", {
      summary: "Create a user group",
      audit: { resourceType: "user_group" },
      body: closedObject({ name: NAME_SCHEMA, description: DESCRIPTION_SCHEMA }, ["name"]),
      responses: { "201": { description: "The new group", schema: GROUP_SCHEMA } },
      async handler(c) {
        const input = body<{ name: string; description?: string }>(c);
        const name = input.name.trim();
        return await created(c, {
          name,
          create: () =>
            identityTransaction(db, async (tx) => {
              await assertNameFree(tx, { table: "user_groups", noun: "user group", name });
              return await createUserGroup(tx, { name, description: input.description });
            }),
        });
      },
    }),
    route("GET /api/v1/user-groups/:id", "user_group:view", {
      summary: "One user group with its role bindings",
      responses: {
        "200": {
          description: "The group",
          schema: objectSchema({
            ...GROUP_SCHEMA.properties,
            role_bindings: { type: "array", items: ROLE_BINDING_SCHEMA },
          }),
        },
      },
      async handler(c) {
        const group = await requireGroup(uuidParam(c, "id"));
        return c.json({ ...group, role_bindings: await listBindings(db, { userGroupId: group.id }) });
      },
    }),
    route("PUT /api/v1/user-groups/:id", "user_group:edit", {
      summary: "Rename a user group or change its description",
      audit: { resourceType: "user_group" },
      body: closedObject({ name: NAME_SCHEMA, description: DESCRIPTION_SCHEMA }),
      responses: { "200": { description: "The updated group", schema: GROUP_SCHEMA } },
      async handler(c) {
        const id = uuidParam(c, "id");
        const input = body<{ name?: string; description?: string }>(c);
        const { before, group } = await identityTransaction(db, async (tx) => {
          const current = found(await getUserGroup(tx, id), `user group ${id}`);
          auditResource(c, { id, name: current.name });
          const name = input.name?.trim();
          if (name) {
            await assertNameFree(tx, { table: "user_groups", noun: "user group", name, exceptId: id });
          }
          return {
            before: current,
            group: await updateUserGroup(tx, current, { name, description: input.description }),
          };
        });
        auditResource(c, { id, name: group.name });
        auditChanges(c, { before, after: group, fields: ["name", "description"] });
        return c.json(group);
      },
    }),
    route("DELETE /api/v1/user-groups/:id", "user_group:delete", {
      summary: "Delete a user group (members lose the roles it carried; step-up when there are any)",
      audit: { resourceType: "user_group" },
      body: STEP_UP_BODY,
      responses: {
        "204": { description: "Deleted" },
        "403": STEP_UP_REFUSED,
      },
      handler: identityChange(s, async (tx, id, c, stepUp) => {
        const group = await manageable(tx, GROUP_SUBJECT, { caller: caller(c), id, verb: "delete" });
        auditResource(c, { id, name: group.name });
        if (group.member_count > 0 && (await carriesRoles(tx, id))) await stepUp();
        await deleteUserGroup(tx, id);
      }),
    }),
    route(
      "GET /api/v1/user-groups/:id/members",
      "user_group:view",
      pageRoute("Members of a user group", {
        items: "users",
        item: USER_SCHEMA,
        list: async (page, c) => listMembers(db, (await requireGroup(uuidParam(c, "id"))).id, page),
      }),
    ),
    route("POST /api/v1/user-groups/:id/members", "user_group:edit", {
      summary: "Add a user to a group (they receive the group's roles; step-up when it has any)",
      audit: { resourceType: "user_group", action: "user_group.member_add" },
      body: closedObject({ user_id: UUID_SCHEMA, ...STEP_UP_PROPERTIES }, ["user_id"]),
      responses: {
        "204": { description: "Added" },
        "403": STEP_UP_REFUSED,
      },
      handler: identityChange(s, async (tx, id, c, stepUp) => {
        const { user_id: userId } = body<{ user_id: string }>(c);
        const group = await manageable(tx, GROUP_SUBJECT, { caller: caller(c), id, verb: "add members to" });
        auditResource(c, { id, name: group.name });
        const user = await getUser(tx, userId);
        if (!user) {
          throw badRequest(`user_id: no user with id ${userId}`, [{
            field: "user_id",
            message: "no user with this id",
          }]);
        }
        c.set("auditDetails", { member: user.username });
        if (await carriesRoles(tx, id)) await stepUp();
        if (!(await addMember(tx, id, userId))) {
          throw conflict(`"${user.username}" is already a member of "${group.name}"`);
        }
      }),
    }),
    route("DELETE /api/v1/user-groups/:id/members/:userId", "user_group:edit", {
      summary: "Remove a user from a group (step-up when the group has roles)",
      audit: { resourceType: "user_group", action: "user_group.member_remove" },
      body: STEP_UP_BODY,
      responses: {
        "204": { description: "Removed" },
        "403": STEP_UP_REFUSED,
      },
      handler: identityChange(s, async (tx, id, c, stepUp) => {
        const userId = uuidParam(c, "userId");
        const group = await manageable(tx, GROUP_SUBJECT, {
          caller: caller(c),
          id,
          verb: "remove members from",
        });
        auditResource(c, { id, name: group.name });
        c.set("auditDetails", { member_id: userId });
        if (await carriesRoles(tx, id)) await stepUp();
        if (!(await removeMember(tx, id, userId))) {
          throw notFound(`member ${userId} of user group "${group.name}"`);
        }
      }),
    }),
    ...roleBindingRoutes(s, {
      subject: GROUP_SUBJECT,
      path: "/api/v1/user-groups/:id",
      tag: "user-groups",
      view: "user_group:view",
      edit: "user_group:edit",
    }),
  ];
}
