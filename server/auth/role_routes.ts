/**
 * `/api/v1/roles` and `/api/v1/permissions`. Built-in roles are read-only. Nobody can put a permission they
 * do not hold into a role, nor edit or delete a role that holds one.
 */
import { ALL_PERMISSIONS } from "../../shared/permissions.ts";
import { conflict, notFound } from "../http/errors.ts";
import type { JsonSchema } from "../http/json_schema.ts";
import { auditResource, body, type RouteSpec } from "../http/route.ts";
import { PAGE_QUERY, pageOf, pageRequest } from "./pagination.ts";
import { uuidParam } from "./params.ts";
import { assertHolds, identityTransaction } from "./rbac.ts";
import { createRole, deleteRole, getRole, listPermissions, listRoles, updateRole } from "./roles.ts";
import type { IdentityServices } from "./services.ts";

const PERMISSIONS_SCHEMA: JsonSchema = {
  type: "array",
  items: { type: "string", enum: ALL_PERMISSIONS },
  uniqueItems: true,
  maxItems: ALL_PERMISSIONS.length,
};

const ROLE_SCHEMA: JsonSchema = {
  type: "object",
  properties: {
    id: { type: "string", format: "uuid" },
    name: { type: "string" },
    description: { type: "string" },
    builtin: { type: "boolean" },
    permissions: { type: "array", items: { type: "string" } },
  },
};

const NAME_SCHEMA: JsonSchema = { type: "string", minLength: 1, maxLength: 100, pattern: "\\S" };
const DESCRIPTION_SCHEMA: JsonSchema = { type: "string", maxLength: 1000 };

/** The role routes. */
export function roleRoutes(s: IdentityServices): RouteSpec[] {
  const { db } = s.ctx;
  return [
    {
      method: "GET",
      path: "/api/v1/roles",
      summary: "List roles (built-in first) with their permissions",
      tag: "roles",
      access: "role:view",
      query: PAGE_QUERY,
      responses: { "200": { description: "A page of roles", schema: { type: "object" } } },
      async handler(c) {
        const page = pageRequest(c);
        const { items, total } = await listRoles(db, page);
        return c.json(pageOf(items, total, page));
      },
    },
    {
      method: "GET",
      path: "/api/v1/roles/:id",
      summary: "One role",
      tag: "roles",
      access: "role:view",
      responses: { "200": { description: "The role", schema: ROLE_SCHEMA } },
      async handler(c) {
        const id = uuidParam(c, "id");
        const role = await getRole(db, id);
        if (!role) throw notFound(`role ${id}`);
        return c.json(role);
      },
    },
    {
      method: "POST",
      path: "/api/v1/roles",
      summary: "Create a custom role",
      tag: "roles",
      access: "role:create",
      audit: { resourceType: "role" },
      body: {
        type: "object",
        required: ["name"],
        additionalProperties: false,
        properties: { name: NAME_SCHEMA, description: DESCRIPTION_SCHEMA, permissions: PERMISSIONS_SCHEMA },
      },
      responses: { "201": { description: "The new role", schema: ROLE_SCHEMA } },
      async handler(c) {
        const caller = c.get("user")!;
        const input = body<{ name: string; description?: string; permissions?: string[] }>(c);
        const name = input.name.trim();
        auditResource(c, { type: "role", name });
        assertHolds(caller, input.permissions ?? [], `create role "${name}"`);
        const role = await identityTransaction(db, async (tx) => {
          if ((await tx.query("SELECT 1 FROM roles WHERE name = $1", [name])).length > 0) {
            throw conflict(`a role named "${name}" already exists`);
          }
          return await createRole(tx, {
            name,
            description: input.description,
            permissions: input.permissions ?? [],
          });
        });
        auditResource(c, { type: "role", id: role.id, name: role.name });
        return c.json(role, 201);
      },
    },
    {
      method: "PUT",
      path: "/api/v1/roles/:id",
      summary: "Change a custom role's name, description or permissions (replaces the whole set)",
      tag: "roles",
      access: "role:edit",
      audit: { resourceType: "role" },
      body: {
        type: "object",
        additionalProperties: false,
        properties: { name: NAME_SCHEMA, description: DESCRIPTION_SCHEMA, permissions: PERMISSIONS_SCHEMA },
      },
      responses: { "200": { description: "The updated role", schema: ROLE_SCHEMA } },
      async handler(c) {
        const caller = c.get("user")!;
        const id = uuidParam(c, "id");
        const input = body<{ name?: string; description?: string; permissions?: string[] }>(c);
        const role = await identityTransaction(db, async (tx) => {
          const current = await getRole(tx, id);
          if (!current) throw notFound(`role ${id}`);
          auditResource(c, { type: "role", id, name: current.name });
          assertHolds(
            caller,
            [...current.permissions, ...(input.permissions ?? [])],
            `change role "${current.name}"`,
          );
          const name = input.name?.trim();
          if (
            name && name !== current.name &&
            (await tx.query("SELECT 1 FROM roles WHERE name = $1", [name])).length
          ) {
            throw conflict(`a role named "${name}" already exists`);
          }
          return await updateRole(tx, current, {
            name,
            description: input.description,
            permissions: input.permissions,
          });
        });
        auditResource(c, { type: "role", id, name: role.name });
        return c.json(role);
      },
    },
    {
      method: "DELETE",
      path: "/api/v1/roles/:id",
      summary: "Delete a custom role and its bindings",
      tag: "roles",
      access: "role:delete",
      audit: { resourceType: "role" },
      responses: { "204": { description: "Deleted" } },
      async handler(c) {
        const caller = c.get("user")!;
        const id = uuidParam(c, "id");
        await identityTransaction(db, async (tx) => {
          const role = await getRole(tx, id);
          if (!role) throw notFound(`role ${id}`);
          auditResource(c, { type: "role", id, name: role.name });
          assertHolds(caller, role.permissions, `delete role "${role.name}"`);
          await deleteRole(tx, role);
        });
        return c.body(null, 204);
      },
    },
    {
      method: "GET",
      path: "/api/v1/permissions",
      summary: "The permission catalogue (resource:action pairs)",
      tag: "roles",
      access: "role:view",
      query: PAGE_QUERY,
      responses: { "200": { description: "A page of permissions", schema: { type: "object" } } },
      async handler(c) {
        const page = pageRequest(c);
        const { items, total } = await listPermissions(db, page);
        return c.json(pageOf(items, total, page));
      },
    },
  ];
}
