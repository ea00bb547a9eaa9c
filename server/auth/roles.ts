/** Roles and the permission catalogue. Built-in roles are read-only here; SQL only, no HTTP. */
import { type Queryable, queryOne } from "../db/db.ts";
import { conflictError } from "../core/errors.ts";
import { type Page, type PageRequest, selectPage } from "../db/pagination.ts";

/** A role with its permissions. */
export interface Role {
  id: string;
  name: string;
  description: string;
  builtin: boolean;
  permissions: string[];
  created_at: Date;
  updated_at: Date;
}

/** One catalogue entry. */
export interface PermissionRecord {
  id: string;
  resource: string;
  action: string;
  description: string;
}

const ROLE_COLUMNS = `r.id, r.name, r.description, r.builtin, r.created_at, r.updated_at,
  COALESCE(ARRAY(SELECT rp.permission_id FROM role_permissions rp WHERE rp.role_id = r.id ORDER BY 1), '{}')
    AS permissions`;

/** Lists roles: built-ins first, then by name. */
export async function listRoles(q: Queryable, page: PageRequest): Promise<Page<Role>> {
  return await selectPage<Role>(q, {
    columns: ROLE_COLUMNS,
    from: "roles r",
    orderBy: "ORDER BY r.builtin DESC, r.name",
    page,
  });
}

/** One role, or undefined. */
export async function getRole(q: Queryable, id: string): Promise<Role | undefined> {
  return await queryOne<Role>(q, `SELECT ${ROLE_COLUMNS} FROM roles r WHERE r.id = $1`, [id]);
}

/** Creates a custom role with the given permissions (ids already validated against the catalogue). */
export async function createRole(
  q: Queryable,
  input: { name: string; description?: string; permissions: string[] },
): Promise<Role> {
  const [row] = await q.query<{ id: string }>(
    "INSERT INTO roles (name, description) VALUES ($1, $2) RETURNING id",
    [input.name, input.description ?? ""],
  );
  await setRolePermissions(q, row.id, input.permissions);
  return (await getRole(q, row.id))!;
}

/** Updates a custom role; refuses built-ins (409). */
export async function updateRole(
  q: Queryable,
  role: Role,
  changes: { name?: string; description?: string; permissions?: string[] },
): Promise<Role> {
  assertCustom(role, "changed");
  await q.query("UPDATE roles SET name = $2, description = $3, updated_at = now() WHERE id = $1", [
    role.id,
    changes.name ?? role.name,
    changes.description ?? role.description,
  ]);
  if (changes.permissions) await setRolePermissions(q, role.id, changes.permissions);
  return (await getRole(q, role.id))!;
}

/** Deletes a custom role (its bindings go with it); refuses built-ins (409). */
export async function deleteRole(q: Queryable, role: Role): Promise<void> {
  assertCustom(role, "deleted");
  await q.query("DELETE FROM roles WHERE id = $1", [role.id]);
}

async function setRolePermissions(q: Queryable, roleId: string, permissions: string[]): Promise<void> {
  await q.query("DELETE FROM role_permissions WHERE role_id = $1", [roleId]);
  await q.query("INSERT INTO role_permissions (role_id, permission_id) SELECT $1, unnest($2::text[])", [
    roleId,
    [...new Set(permissions)],
  ]);
}

function assertCustom(role: Role, verb: string): void {
  if (role.builtin) {
    throw conflictError(`built-in role "${role.name}" cannot be ${verb}; create a custom role instead`);
  }
}

/** The permission catalogue, sorted by id. */
export async function listPermissions(q: Queryable, page: PageRequest): Promise<Page<PermissionRecord>> {
  return await selectPage<PermissionRecord>(q, {
    columns: "id, resource, action, description",
    from: "permissions",
    orderBy: "ORDER BY id",
    page,
  });
}
