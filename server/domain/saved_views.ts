/**
 * Saved views: a named query (filters and sort, as the list page keeps them in its URL) of one user for one
 * list page, stored on the server so it follows the person across browsers. Every read and change is scoped
 * to the owner: another user's view is "not found", never an error that says it exists.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { conflictError, found } from "../core/errors.ts";

/** A saved view. */
export interface SavedView {
  id: string;
  /** The list page it belongs to, e.g. `nodes`. */
  list: string;
  name: string;
  /** The list's URL query without its page (e.g. `status=online&sort=name&order=desc`). */
  query: string;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = "id, list, name, query, created_at, updated_at";

/** Query parameters that place a page in a list rather than describe the view; never stored. */
const PAGING_PARAMETERS = new Set(["page", "per_page", "cursor", "prev"]);

/** The query as stored: parameters in a stable order, paging dropped. */
export function normalizeViewQuery(query: string): string {
  const params = new URLSearchParams(query.startsWith("?") ? query.slice(1) : query);
  const kept = [...params].filter(([k, v]) => !PAGING_PARAMETERS.has(k) && v !== "");
  kept.sort(([a], [b]) => a.localeCompare(b));
  return new URLSearchParams(kept).toString();
}

async function assertNameFree(
  q: Queryable,
  owner: { userId: string; list: string },
  name: string,
  exceptId?: string,
): Promise<void> {
  const clash = await queryOne<{ id: string }>(
    q,
    "SELECT id FROM saved_views WHERE user_id = $1 AND list = $2 AND name = $3",
    [owner.userId, owner.list, name],
  );
  if (clash && clash.id !== exceptId) {
    throw conflictError(`you already have a view named "${name}" of this list; choose another name`);
  }
}

/** The views of `userId` for `list`, by name. */
export async function listSavedViews(q: Queryable, userId: string, list: string): Promise<SavedView[]> {
  return await q.query<SavedView>(
    `SELECT ${COLUMNS} FROM saved_views WHERE user_id = $1 AND list = $2 ORDER BY lower(name), name`,
    [userId, list],
  );
}

/** Saves a new view of `userId`; a name already used for that list is refused. */
export async function createSavedView(
  q: Queryable,
  userId: string,
  input: { list: string; name: string; query: string },
): Promise<SavedView> {
  await assertNameFree(q, { userId, list: input.list }, input.name);
  const [row] = await q.query<SavedView>(
    `INSERT INTO saved_views (user_id, list, name, query) VALUES ($1, $2, $3, $4) RETURNING ${COLUMNS}`,
    [userId, input.list, input.name, normalizeViewQuery(input.query)],
  );
  return row;
}

async function ownView(q: Queryable, userId: string, id: string): Promise<SavedView> {
  return found(
    await queryOne<SavedView>(
      q,
      `SELECT ${COLUMNS} FROM saved_views WHERE id = $1 AND user_id = $2 FOR UPDATE`,
      [id, userId],
    ),
    `saved view ${id}`,
  );
}

/** Renames a view of `userId` and/or replaces its query. */
export async function updateSavedView(
  q: Queryable,
  userId: string,
  id: string,
  input: { name?: string; query?: string },
): Promise<SavedView> {
  const view = await ownView(q, userId, id);
  if (input.name !== undefined) await assertNameFree(q, { userId, list: view.list }, input.name, id);
  const [row] = await q.query<SavedView>(
    `UPDATE saved_views SET name = $2, query = $3, updated_at = now() WHERE id = $1 RETURNING ${COLUMNS}`,
    [id, input.name ?? view.name, input.query === undefined ? view.query : normalizeViewQuery(input.query)],
  );
  return row;
}

/** Deletes a view of `userId`. */
export async function deleteSavedView(q: Queryable, userId: string, id: string): Promise<SavedView> {
  const view = await ownView(q, userId, id);
  await q.query("DELETE FROM saved_views WHERE id = $1", [id]);
  return view;
}
