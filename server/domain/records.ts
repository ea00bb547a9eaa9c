/**
 * Guards on single records shared by every area that stores named things (policies, node groups, users,
 * roles, user groups): taking a record's row lock, and keeping names unique with a message that names the
 * clash. Table and column names come from code, never from a request.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { conflictError, found } from "../core/errors.ts";

/**
 * Locks the row `id` of `table` for the rest of the transaction; `not_found` for `what` when it is absent.
 * FOR NO KEY UPDATE: it orders changes of the record, but rows that merely refer to it (a report naming a
 * policy, a node joining a group: KEY SHARE) are not kept waiting while an admin changes it.
 */
export async function lockRow(q: Queryable, row: { table: string; id: string; what: string }): Promise<void> {
  found(await queryOne(q, `SELECT id FROM ${row.table} WHERE id = $1 FOR NO KEY UPDATE`, [row.id]), row.what);
}

/**
 * Refuses (conflict) when another row of `table` already carries `name` in `column` (default `name`);
 * `exceptId` is the record being renamed, which may keep its own name. `noun` names the kind of thing in
 * the message, e.g. `a node group named "lab" already exists; choose another name`.
 */
export async function assertNameFree(
  q: Queryable,
  options: { table: string; column?: string; noun: string; name: string; exceptId?: string },
): Promise<void> {
  const row = await queryOne<{ id: string }>(
    q,
    `SELECT id FROM ${options.table} WHERE ${options.column ?? "name"} = $1`,
    [options.name],
  );
  if (row && row.id !== options.exceptId) {
    throw conflictError(`a ${options.noun} named "${options.name}" already exists; choose another name`);
  }
}
