/**
 * Role bindings: a role given to a user or a user group, globally or scoped to one node group. Scoped
 * bindings are kept (an upgrade could honour them) but grant nothing in the community edition, and every
 * binding says so in `effective`. SQL only, no HTTP.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { likePattern, type ListOptions, orderBy, type Page, Params, selectPage } from "../db/pagination.ts";

/** Who receives the role. */
export type BindingSubject = { userId: string } | { userGroupId: string };

/** A role binding as the API shows it. */
export interface RoleBinding {
  id: string;
  role_id: string;
  role_name: string;
  user_id: string | null;
  user_group_id: string | null;
  scope_type: "global" | "node_group";
  scope_id: string | null;
  scope_name: string | null;
  /** False for node-group-scoped bindings: the community edition grants nothing through them. */
  effective: boolean;
  created_at: Date;
}

const SELECT_BINDING = `
  SELECT rb.id, rb.role_id, r.name AS role_name, rb.user_id, rb.user_group_id, rb.scope_type, rb.scope_id,
         ng.name AS scope_name, rb.scope_type = 'global' AS effective, rb.created_at
    FROM role_bindings rb
    JOIN roles r ON r.id = rb.role_id
    LEFT JOIN node_groups ng ON ng.id = rb.scope_id`;

function subjectColumn(subject: BindingSubject): ["user_id" | "user_group_id", string] {
  return "userId" in subject ? ["user_id", subject.userId] : ["user_group_id", subject.userGroupId];
}

/** True when anyone (a user or a user group) holds `roleId`. */
export async function roleIsBound(q: Queryable, roleId: string): Promise<boolean> {
  return (await q.query("SELECT 1 FROM role_bindings WHERE role_id = $1 LIMIT 1", [roleId])).length > 0;
}

/** Bindings of one subject, by role name. */

export async function listBindings(q: Queryable, subject: BindingSubject): Promise<RoleBinding[]> {
  const [column, id] = subjectColumn(subject);
  return await q.query<RoleBinding>(
    `${SELECT_BINDING} WHERE rb.${column} = $1 ORDER BY r.name, rb.scope_type`,
    [id],
  );
}

/** One binding of a subject, or undefined. */
export async function getBinding(
  q: Queryable,
  subject: BindingSubject,
  bindingId: string,
): Promise<RoleBinding | undefined> {
  const [column, id] = subjectColumn(subject);
  return await queryOne<RoleBinding>(q, `${SELECT_BINDING} WHERE rb.id = $1 AND rb.${column} = $2`, [
    bindingId,
    id,
  ]);
}

/** The role and scope of a binding for one subject. */
export interface BindingInput {
  subject: BindingSubject;
  roleId: string;
  scopeType: "global" | "node_group";
  scopeId?: string | null;
}

/** True when the subject already holds the role in this scope. */
export async function hasBinding(q: Queryable, input: BindingInput): Promise<boolean> {
  const [column, id] = subjectColumn(input.subject);
  const rows = await q.query(
    `SELECT 1 FROM role_bindings WHERE role_id = $1 AND ${column} = $2 AND scope_type = $3
        AND scope_id IS NOT DISTINCT FROM $4`,
    [input.roleId, id, input.scopeType, input.scopeId ?? null],
  );
  return rows.length > 0;
}

/** Creates a binding (409 via the unique constraint when it already exists). */
export async function createBinding(q: Queryable, input: BindingInput): Promise<RoleBinding> {
  const [column, id] = subjectColumn(input.subject);
  const [row] = await q.query<{ id: string }>(
    `INSERT INTO role_bindings (role_id, ${column}, scope_type, scope_id) VALUES ($1, $2, $3, $4) RETURNING id`,
    [input.roleId, id, input.scopeType, input.scopeType === "global" ? null : input.scopeId ?? null],
  );
  return (await getBinding(q, input.subject, row.id))!;
}

/** Deletes a binding of a subject; false when there was none. */
export async function deleteBinding(
  q: Queryable,
  subject: BindingSubject,
  bindingId: string,
): Promise<boolean> {
  const [column, id] = subjectColumn(subject);
  const rows = await q.query(`DELETE FROM role_bindings WHERE id = $1 AND ${column} = $2 RETURNING id`, [
    bindingId,
    id,
  ]);
  return rows.length > 0;
}

/** Who holds a binding, as the list of every binding shows it. */
export interface BindingHolder {
  type: "user" | "user_group";
  id: string;
  /** Username or user group name. */
  name: string;
}

/** A row of the list of every role binding: the binding and its holder. */
export interface RoleBindingListRow extends RoleBinding {
  subject: BindingHolder;
}

/** Filters of {@link listAllBindings}. */
export interface RoleBindingFilter {
  /**
   * Which kinds of holder the caller may see (user bindings need `user:view`, user-group bindings
   * `user_group:view`); bindings of the other kinds are left out of the rows and the total.
   */
  visible: { users: boolean; userGroups: boolean };
  subjectType?: "user" | "user_group";
  userId?: string;
  userGroupId?: string;
  roleId?: string;
  scopeType?: "global" | "node_group";
  /** Node group of node-group-scoped bindings. */
  scopeId?: string;
  /** Case-insensitive substring of the role name or the holder's name. */
  search?: string;
}

/** Public sort names of {@link listAllBindings} → SQL. */
export const ROLE_BINDING_SORT_COLUMNS: Record<string, string> = {
  role: "r.name",
  subject: "coalesce(u.username, ug.name)",
  scope: "ng.name",
  created_at: "rb.created_at",
};

const HOLDER_SQL = `jsonb_build_object(
    'type', CASE WHEN rb.user_id IS NOT NULL THEN 'user' ELSE 'user_group' END,
    'id', coalesce(rb.user_id, rb.user_group_id),
    'name', coalesce(u.username, ug.name))`;

/** Every role binding the caller may see, filtered, sorted and paginated. */
export async function listAllBindings(
  q: Queryable,
  filter: RoleBindingFilter,
  options: ListOptions,
): Promise<Page<RoleBindingListRow>> {
  const params = new Params();
  const where: string[] = [];
  const { users, userGroups } = filter.visible;
  if (!users && !userGroups) where.push("false");
  else if (!users) where.push("rb.user_group_id IS NOT NULL");
  else if (!userGroups) where.push("rb.user_id IS NOT NULL");
  if (filter.subjectType === "user") where.push("rb.user_id IS NOT NULL");
  if (filter.subjectType === "user_group") where.push("rb.user_group_id IS NOT NULL");
  if (filter.userId) where.push(`rb.user_id = ${params.add(filter.userId)}`);
  if (filter.userGroupId) where.push(`rb.user_group_id = ${params.add(filter.userGroupId)}`);
  if (filter.roleId) where.push(`rb.role_id = ${params.add(filter.roleId)}`);
  if (filter.scopeType) where.push(`rb.scope_type = ${params.add(filter.scopeType)}`);
  if (filter.scopeId) where.push(`rb.scope_id = ${params.add(filter.scopeId)}`);
  if (filter.search) {
    const like = params.add(likePattern(filter.search));
    where.push(
      `(r.name ILIKE ${like} ESCAPE '\\' OR coalesce(u.username, ug.name) ILIKE ${like} ESCAPE '\\')`,
    );
  }
  return await selectPage<RoleBindingListRow>(q, {
    columns: `rb.id, rb.role_id, r.name AS role_name, rb.user_id, rb.user_group_id, rb.scope_type,
      rb.scope_id, ng.name AS scope_name, rb.scope_type = 'global' AS effective, rb.created_at,
      ${HOLDER_SQL} AS subject`,
    from: `role_bindings rb
      JOIN roles r ON r.id = rb.role_id
      LEFT JOIN users u ON u.id = rb.user_id
      LEFT JOIN user_groups ug ON ug.id = rb.user_group_id
      LEFT JOIN node_groups ng ON ng.id = rb.scope_id`,
    where,
    params: params.values,
    orderBy: orderBy(options.sort ?? {}, {
      columns: ROLE_BINDING_SORT_COLUMNS,
      fallback: "role",
      tiebreak: "r.name, coalesce(u.username, ug.name), ng.name NULLS FIRST, rb.id",
    }),
    page: options.page,
  });
}
