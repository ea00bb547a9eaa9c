/**
 * Who may do what: the permission catalogue in the database, effective permissions of a user, escalation
 * guards, and the identity transaction that keeps at least one enabled Super Admin.
 *
 * Effective permissions come from global role bindings only, held directly or through a user group:
 * node-group-scoped bindings are stored but grant nothing in the community edition. Escalation guards are
 * stricter and count bindings of every scope, so no latent grant can be set up either.
 */
import type { Db, Queryable } from "../db/db.ts";
import { ALL_PERMISSIONS, PERMISSION_CATALOGUE } from "../../shared/permissions.ts";
import { conflictError, forbiddenError } from "../core/errors.ts";
import { BUILTIN_ROLES, builtinRolePermissions, SUPER_ADMIN } from "../../shared/builtin_roles.ts";

/** The authenticated caller. */
export interface AuthUser {
  id: string;
  username: string;
  /** Effective global permissions (node-group-scoped grants give nothing in the community edition). */
  permissions: ReadonlySet<string>;
  /** How the request authenticated: a session (cookie, or its access token as bearer), or an API token. */
  via: "cookie" | "bearer" | "api_token";
}

/** Advisory lock serialising identity changes (so two "remove a Super Admin" changes cannot both pass). */
const IDENTITY_LOCK = 7368678;

/** SQL: roles that reach the user `userId` (an SQL expression: `$1`, `u.id`) through global bindings. */
function globalRolesOf(userId: string): string {
  return `
  SELECT rb.role_id FROM role_bindings rb
   WHERE rb.scope_type = 'global'
     AND (rb.user_id = ${userId}
          OR rb.user_group_id IN (SELECT m.user_group_id FROM user_group_members m WHERE m.user_id = ${userId}))`;
}

/**
 * SQL expression: the effective (global) permissions of the user `userId` (an SQL expression such as `u.id`),
 * sorted, as one array, for a query that loads a user with its permissions in one round trip.
 */
export function effectivePermissionsSql(userId: string): string {
  return `ARRAY(SELECT DISTINCT rp.permission_id FROM role_permissions rp
                 WHERE rp.role_id IN (${globalRolesOf(userId)}) ORDER BY 1)`;
}

/** Effective (global) permissions of an enabled or disabled user, sorted. */
export async function effectivePermissions(q: Queryable, userId: string): Promise<string[]> {
  const rows = await q.query<{ id: string }>(
    `SELECT DISTINCT rp.permission_id AS id FROM role_permissions rp
      WHERE rp.role_id IN (${globalRolesOf("$1")}) ORDER BY 1`,
    [userId],
  );
  return rows.map((r) => r.id);
}

/** Every permission a user could hold through any binding (any scope): what managing them requires. */
export async function reachablePermissionsOfUser(q: Queryable, userId: string): Promise<string[]> {
  const rows = await q.query<{ id: string }>(
    `SELECT DISTINCT rp.permission_id AS id FROM role_permissions rp
      WHERE rp.role_id IN (
        SELECT rb.role_id FROM role_bindings rb
         WHERE rb.user_id = $1
            OR rb.user_group_id IN (SELECT m.user_group_id FROM user_group_members m WHERE m.user_id = $1))
      ORDER BY 1`,
    [userId],
  );
  return rows.map((r) => r.id);
}

/** Every permission a user group hands to its members through any binding. */
export async function reachablePermissionsOfGroup(q: Queryable, groupId: string): Promise<string[]> {
  const rows = await q.query<{ id: string }>(
    `SELECT DISTINCT rp.permission_id AS id FROM role_permissions rp
      WHERE rp.role_id IN (SELECT role_id FROM role_bindings WHERE user_group_id = $1) ORDER BY 1`,
    [groupId],
  );
  return rows.map((r) => r.id);
}

/**
 * Refuses (403) when `wanted` contains a permission the caller does not hold. `what` completes the sentence
 * "you cannot … because …", e.g. `grant role "Auditor"`.
 */
export function assertHolds(caller: AuthUser, wanted: Iterable<string>, what: string): void {
  const missing = [...new Set(wanted)].filter((p) => !caller.permissions.has(p)).sort();
  if (missing.length > 0) {
    throw forbiddenError(
      `you cannot ${what}: it involves ${missing.length === 1 ? "permission" : "permissions"} ` +
        `${missing.join(", ")} that you do not hold`,
    );
  }
}

/** Number of enabled users holding the built-in Super Admin role globally. */
export async function countEnabledSuperAdmins(q: Queryable): Promise<number> {
  const rows = await q.query<{ n: number }>(
    `SELECT count(DISTINCT u.id)::int AS n
       FROM users u
       JOIN role_bindings rb ON rb.scope_type = 'global'
        AND (rb.user_id = u.id
             OR rb.user_group_id IN (SELECT m.user_group_id FROM user_group_members m WHERE m.user_id = u.id))
       JOIN roles r ON r.id = rb.role_id AND r.builtin AND r.name = $1
      WHERE u.enabled`,
    [SUPER_ADMIN],
  );
  return rows[0]?.n ?? 0;
}

/**
 * Runs an identity change (users, roles, groups, members, bindings) in one transaction under the identity
 * lock, and rolls it back with 409 when it would leave no enabled Super Admin where there was one. Checking
 * the outcome instead of each kind of change covers every path: deleting, disabling, unbinding the role,
 * leaving a group that carries it, deleting that group.
 */
export async function identityTransaction<T>(db: Db, fn: (tx: Queryable) => Promise<T>): Promise<T> {
  return await db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock($1)", [IDENTITY_LOCK]);
    const before = await countEnabledSuperAdmins(tx);
    const result = await fn(tx);
    if (before > 0 && (await countEnabledSuperAdmins(tx)) === 0) {
      throw conflictError(
        `this change would leave no enabled ${SUPER_ADMIN}: give the ${SUPER_ADMIN} role to another enabled ` +
          "user first",
      );
    }
    return result;
  });
}

/**
 * Brings the database catalogue in line with `shared/permissions.ts` and resets the built-in roles'
 * permission sets (run at every start, under the identity lock so replicas starting together agree).
 */
export async function seedCatalogue(db: Db): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock($1)", [IDENTITY_LOCK]);
    const pairs = Object.entries(PERMISSION_CATALOGUE).flatMap(([resource, actions]) =>
      actions.map((action) => ({ id: `${resource}:${action}`, resource, action }))
    );
    await tx.query(
      `INSERT INTO permissions (id, resource, action)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
       ON CONFLICT (id) DO NOTHING`,
      [pairs.map((p) => p.id), pairs.map((p) => p.resource), pairs.map((p) => p.action)],
    );
    await tx.query("DELETE FROM permissions WHERE NOT (id = ANY($1::text[]))", [[...ALL_PERMISSIONS]]);
    const sets = builtinRolePermissions();
    for (const role of BUILTIN_ROLES) {
      const [row] = await tx.query<{ id: string }>(
        `INSERT INTO roles (name, description, builtin) VALUES ($1, $2, true)
         ON CONFLICT (name) DO UPDATE SET description = EXCLUDED.description, builtin = true
         RETURNING id`,
        [role.name, role.description],
      );
      const perms = sets.get(role.name) ?? [];
      await tx.query(
        "DELETE FROM role_permissions WHERE role_id = $1 AND NOT (permission_id = ANY($2::text[]))",
        [
          row.id,
          perms,
        ],
      );
      await tx.query(
        `INSERT INTO role_permissions (role_id, permission_id) SELECT $1, unnest($2::text[])
         ON CONFLICT DO NOTHING`,
        [row.id, perms],
      );
    }
  });
}

/** Id of a built-in role by name (after seeding). */
export async function builtinRoleId(q: Queryable, name: string): Promise<string> {
  const rows = await q.query<{ id: string }>("SELECT id FROM roles WHERE name = $1 AND builtin", [name]);
  if (!rows[0]) throw new Error(`built-in role ${name} is missing: the catalogue was not seeded`);
  return rows[0].id;
}
