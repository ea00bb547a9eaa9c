/**
 * Role bindings: a role given to a user or a user group, globally or scoped to one node group. Scoped
 * bindings are kept (an upgrade could honour them) but grant nothing in the community edition, and every
 * binding says so in `effective`. SQL only, no HTTP.
 */
import { type Queryable, queryOne } from "../db/db.ts";

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
