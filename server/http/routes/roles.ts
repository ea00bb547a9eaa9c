/**
 * `/api/v1/roles` and `/api/v1/permissions`. Built-in roles are read-only. Nobody can put a permission they
 * do not hold into a role, nor edit or delete a role that holds one. Changing the permissions of a role that
 * someone holds, or deleting it, changes what they may do: like binding roles, it needs step-up
 * re-authentication. (A new role, or one nobody holds, changes nobody's permissions; binding it needs
 * step-up then.)
 */
import { ALL_PERMISSIONS } from "../../../shared/permissions.ts";
import { found } from "../../core/errors.ts";
import { assertNameFree } from "../../domain/records.ts";
import { closedObject, type JsonSchema, objectSchema, UUID_SCHEMA } from "../json_schema.ts";
import { pageRoute } from "../pagination.ts";
import { auditResource, body, caller, created, type RouteSpec, uuidParam } from "../route.ts";
import { auditChanges } from "../audit_changes.ts";
import { assertHolds, identityTransaction } from "../../auth/rbac.ts";
import { roleIsBound } from "../../auth/role_bindings.ts";
import { createRole, deleteRole, getRole, listPermissions, listRoles, updateRole } from "../../auth/roles.ts";
import type { IdentityServices } from "../../auth/services.ts";
import {
  checkStepUp,
  STEP_UP_BODY,
  STEP_UP_PROPERTIES,
  STEP_UP_REFUSED,
  takeStepUpProof,
} from "../step_up.ts";
import { DATE_TIME, identityChange, TEXT_PATTERN, VISIBLE_NAME_PATTERN } from "./common.ts";
import { rolesRoute as route } from "./tags.ts";

const PERMISSIONS_SCHEMA: JsonSchema = {
  type: "array",
  items: { type: "string", enum: ALL_PERMISSIONS },
  uniqueItems: true,
  maxItems: ALL_PERMISSIONS.length,
};

const ROLE_SCHEMA: JsonSchema = objectSchema({
  id: UUID_SCHEMA,
  name: { type: "string" },
  description: { type: "string" },
  builtin: { type: "boolean" },
  permissions: { type: "array", items: { type: "string" } },
  created_at: DATE_TIME,
  updated_at: DATE_TIME,
});

const PERMISSION_SCHEMA: JsonSchema = objectSchema({
  id: { type: "string", description: "resource:action" },
  resource: { type: "string" },
  action: { type: "string" },
  description: { type: "string" },
});

/** Name of a role or user group: 1–100 characters, not all blank. */
export const NAME_SCHEMA: JsonSchema = {
  type: "string",
  minLength: 1,
  maxLength: 100,
  pattern: VISIBLE_NAME_PATTERN,
  description: "Shown and logged: at least one visible character, no control characters",
};
/**
 * Role and user-group descriptions are multi-line text (the console edits them in a text area), like node-group
 * and policy descriptions: line feeds and tabs are allowed, every other control character (CR, ESC, BS, DEL,
 * C1) is refused.
 */
export const DESCRIPTION_SCHEMA: JsonSchema = { type: "string", maxLength: 1000, pattern: TEXT_PATTERN };

function samePermissions(a: readonly string[], b: readonly string[]): boolean {
  const set = new Set(a);
  return set.size === new Set(b).size && b.every((p) => set.has(p));
}

/** The role routes. */
export function roleRoutes(s: IdentityServices): RouteSpec[] {
  const { db } = s.ctx;
  return [
    route(
      "GET /api/v1/roles",
      "role:view",
      pageRoute("List roles (built-in first) with their permissions", {
        items: "roles",
        item: ROLE_SCHEMA,
        list: (page) => listRoles(db, page),
      }),
    ),
    route("GET /api/v1/roles/:id", "role:view", {
      summary: "One role",
      responses: { "200": { description: "The role", schema: ROLE_SCHEMA } },
      async handler(c) {
        const id = uuidParam(c, "id");
        return c.json(found(await getRole(db, id), `role ${id}`));
      },
    }),
    route("POST /api/v1/roles", "role:create", {
      summary: "Create a custom role",
      audit: { resourceType: "role" },
      body: closedObject({
        name: NAME_SCHEMA,
        description: DESCRIPTION_SCHEMA,
        permissions: PERMISSIONS_SCHEMA,
      }, ["name"]),
      responses: { "201": { description: "The new role", schema: ROLE_SCHEMA } },
      async handler(c) {
        const input = body<{ name: string; description?: string; permissions?: string[] }>(c);
        const name = input.name.trim();
        return await created(c, {
          name,
          create: async () => {
            const permissions = input.permissions ?? [];
            assertHolds(caller(c), permissions, `create role "${name}"`);
            return await identityTransaction(db, async (tx) => {
              await assertNameFree(tx, { table: "roles", noun: "role", name });
              return await createRole(tx, { name, description: input.description, permissions });
            });
          },
        });
      },
    }),
    route("PUT /api/v1/roles/:id", "role:edit", {
      summary:
        "Change a custom role's name, description or permissions (replaces the whole set; changing the " +
        "permissions of a role someone holds needs step-up)",
      audit: { resourceType: "role" },
      body: closedObject({
        name: NAME_SCHEMA,
        description: DESCRIPTION_SCHEMA,
        permissions: PERMISSIONS_SCHEMA,
        ...STEP_UP_PROPERTIES,
      }),
      responses: {
        "200": { description: "The updated role", schema: ROLE_SCHEMA },
        "403": STEP_UP_REFUSED,
      },
      async handler(c) {
        const id = uuidParam(c, "id");
        const input = body<{ name?: string; description?: string; permissions?: string[] }>(c);
        const proof = takeStepUpProof(c);
        let before: object = {};
        const role = await identityTransaction(db, async (tx) => {
          const current = found(await getRole(tx, id), `role ${id}`);
          before = current;
          auditResource(c, { id, name: current.name });
          assertHolds(
            caller(c),
            [...current.permissions, ...(input.permissions ?? [])],
            `change role "${current.name}"`,
          );
          if (
            !current.builtin && input.permissions &&
            !samePermissions(current.permissions, input.permissions) &&
            (await roleIsBound(tx, id))
          ) {
            await checkStepUp(s.stepUp, tx, c, proof);
          }
          const name = input.name?.trim();
          if (name) await assertNameFree(tx, { table: "roles", noun: "role", name, exceptId: id });
          return await updateRole(tx, current, {
            name,
            description: input.description,
            permissions: input.permissions,
          });
        });
        auditResource(c, { id, name: role.name });
        auditChanges(c, { before, after: role, fields: ["name", "description", "permissions"] });
        return c.json(role);
      },
    }),
    route("DELETE /api/v1/roles/:id", "role:delete", {
      summary: "Delete a custom role and its bindings (step-up when someone holds it)",
      audit: { resourceType: "role" },
      body: STEP_UP_BODY,
      responses: {
        "204": { description: "Deleted" },
        "403": STEP_UP_REFUSED,
      },
      handler: identityChange(s, async (tx, id, c, stepUp) => {
        const role = found(await getRole(tx, id), `role ${id}`);
        auditResource(c, { id, name: role.name });
        assertHolds(caller(c), role.permissions, `delete role "${role.name}"`);
        // (Built-in roles are refused below, without asking for a proof.)
        if (!role.builtin && (await roleIsBound(tx, id))) await stepUp();
        await deleteRole(tx, role);
      }),
    }),
    route(
      "GET /api/v1/permissions",
      "role:view",
      pageRoute("The permission catalogue (resource:action pairs)", {
        items: "permissions",
        item: PERMISSION_SCHEMA,
        list: (page) => listPermissions(db, page),
      }),
    ),
  ];
}
