/** Reading the audit log: filters shared by the list and the export. SQL only, no HTTP. */
import type { Queryable } from "../db/db.ts";
import { type Page, type PageRequest, Params } from "../db/pagination.ts";

/** Filters of the list and the export (all optional, combined with AND). */
export interface AuditFilter {
  actions?: string[];
  resourceTypes?: string[];
  resourceId?: string;
  /** Username (exact) or user id. */
  user?: string;
  outcome?: string;
  from?: Date;
  to?: Date;
}

/** One audit row as the API returns it. */
export interface AuditLogRow {
  id: number;
  created_at: Date;
  user_id: string | null;
  username: string;
  node_id: string | null;
  action: string;
  resource_type: string;
  resource_id: string;
  resource_name: string;
  outcome: string;
  source_ip: string;
  details: Record<string, unknown>;
}

const COLUMNS =
  `id, created_at, user_id, username, node_id, action, resource_type, resource_id, resource_name,
  outcome, source_ip, details`;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The filter as SQL conditions on `audit_logs`, their values added to `params`; `action` gives one action in
 * place of the filter's list (one branch of {@link idsQuery}).
 */
function conditions(filter: AuditFilter, params: Params, action?: string): string[] {
  const where: string[] = [];
  if (action !== undefined) where.push(`action = ${params.add(action)}`);
  else if (filter.actions?.length) where.push(`action = ANY(${params.add(filter.actions)}::text[])`);
  if (filter.resourceTypes?.length) {
    where.push(`resource_type = ANY(${params.add(filter.resourceTypes)}::text[])`);
  }
  if (filter.resourceId) where.push(`resource_id = ${params.add(filter.resourceId)}`);
  if (filter.user) {
    if (UUID.test(filter.user)) where.push(`user_id = ${params.add(filter.user)}::uuid`);
    else where.push(`username = ${params.add(filter.user)}`);
  }
  if (filter.outcome) where.push(`outcome = ${params.add(filter.outcome)}`);
  if (filter.from) where.push(`created_at >= ${params.add(filter.from)}`);
  if (filter.to) where.push(`created_at < ${params.add(filter.to)}`);
  return where;
}

/** Most actions of a filter read as one ordered branch each (see {@link idsQuery}). */
const MAX_ACTION_BRANCHES = 16;

/**
 * The ids of a page (`limit` rows after skipping `offset`, newest first), as a query reading as little as
 * possible: ids only, so an index holding every filtered column answers without visiting the table
 * (`(action, id DESC) INCLUDE (outcome)` holds what the console filters by most). A list of actions is read
 * as one ordered branch per action, merged: an index yields one action's rows in id order, but not several
 * actions' rows together, and without the branches the database walked the whole log backwards testing
 * every row (175,000 rows for the 10,000th match of two actions in a million, 27 ms, against 4 ms merged).
 */
function idsQuery(
  filter: AuditFilter,
  params: Params,
  extra: string[],
  limit: number,
  offset: number,
): string {
  const select = (where: string[], rows: number, skip = 0) =>
    `SELECT id FROM audit_logs ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
      ORDER BY id DESC LIMIT ${rows}${skip ? ` OFFSET ${skip}` : ""}`;
  const actions = [...new Set(filter.actions ?? [])];
  if (actions.length < 2 || actions.length > MAX_ACTION_BRANCHES) {
    return select([...conditions(filter, params), ...extra], limit, offset);
  }
  const branches = actions.map((action) =>
    `(${select([...conditions(filter, params, action), ...extra], offset + limit)})`
  );
  return `SELECT id FROM (${branches.join(" UNION ALL ")}) AS branches
    ORDER BY id DESC LIMIT ${limit}${offset ? ` OFFSET ${offset}` : ""}`;
}

/** A page of the audit log. */
export interface AuditLogPage extends Page<AuditLogRow> {
  /** Pass as `cursor` to read the rows after this page (older); null when this page reached the end. */
  next_cursor: string | null;
  /** True when `total` is the planner's estimate rather than a count (large, narrowly filtered logs). */
  total_estimated: boolean;
}

/**
 * Deepest row a page number may reach. An offset makes the database read and drop every row before the page,
 * so one request deep into a log of millions of rows costs as much as reading them; beyond this, pages are
 * read by cursor, which costs the same at any depth.
 */
export const MAX_OFFSET_ROWS = 10_000;

/** Up to this many matches are counted exactly; beyond, the total is the planner's estimate. */
const EXACT_COUNT_LIMIT = 1_000;

/**
 * A page of rows, newest first: after `cursor` (the previous page's `next_cursor`, keyset: stable while rows
 * are added, and as fast at any depth) or else the `page`-th page by offset.
 */
export async function listAuditLogs(
  q: Queryable,
  filter: AuditFilter,
  page: PageRequest & { cursor?: string },
): Promise<AuditLogPage> {
  const countParams = new Params();
  const where = conditions(filter, countParams);
  const params = new Params();
  const after = page.cursor === undefined ? [] : [`id < ${params.add(page.cursor)}::bigint`];
  // Numbers only (validated integers), so safe to inline.
  const offset = page.cursor === undefined ? (page.page - 1) * page.perPage : 0;
  // One row more than the page: whether another page follows, so the last page says so (next_cursor null)
  // even when it is exactly full, and no client asks for an empty page after it. The rows skipped by the
  // offset are chosen by id alone; only the page's rows are read in full.
  const [{ total, estimated }, rows] = await Promise.all([
    countAuditLogs(q, filter, { where, params: countParams.values }),
    q.query<AuditLogRow>(
      `SELECT ${COLUMNS} FROM audit_logs
        WHERE id IN (${idsQuery(filter, params, after, page.perPage + 1, offset)})
        ORDER BY id DESC`,
      params.values,
    ),
  ]);
  const items = rows.slice(0, page.perPage);
  return {
    items,
    total,
    page: page.page,
    per_page: page.perPage,
    next_cursor: rows.length > page.perPage ? String(items[items.length - 1].id) : null,
    total_estimated: estimated,
  };
}

/**
 * The number of rows matching `filter`, without counting a million rows per request: by action (or the
 * whole log) from the per-action counts the triggers of migration 0010 keep; otherwise an exact count up to
 * {@link EXACT_COUNT_LIMIT} matches and the planner's estimate beyond.
 */
async function countAuditLogs(
  q: Queryable,
  filter: AuditFilter,
  query: { where: readonly string[]; params: readonly unknown[] },
): Promise<{ total: number; estimated: boolean }> {
  const byActionOnly = Object.entries(filter).every(([key, value]) =>
    key === "actions" || value === undefined
  );
  if (byActionOnly) {
    const [{ n }] = await q.query<{ n: number }>(
      `SELECT coalesce(sum(n), 0)::float8 AS n FROM audit_action_counts
        ${filter.actions?.length ? "WHERE action = ANY($1::text[])" : ""}`,
      filter.actions?.length ? [filter.actions] : [],
    );
    return { total: Number(n), estimated: false };
  }
  const where = `WHERE ${query.where.join(" AND ")}`;
  const [{ n }] = await q.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (SELECT 1 FROM audit_logs ${where} LIMIT ${EXACT_COUNT_LIMIT + 1}) s`,
    query.params,
  );
  if (n <= EXACT_COUNT_LIMIT) return { total: n, estimated: false };
  const [plan] = await q.query<{ "QUERY PLAN": Array<{ Plan: { "Plan Rows": number } }> }>(
    `EXPLAIN (FORMAT JSON) SELECT 1 FROM audit_logs ${where}`,
    query.params,
  );
  return { total: Math.max(n, Math.round(plan["QUERY PLAN"][0].Plan["Plan Rows"])), estimated: true };
}

/** Every matching row, newest first, fetched in batches by id (constant memory for large exports). */
export async function* iterateAuditLogs(
  q: Queryable,
  filter: AuditFilter,
  batch = 500,
): AsyncGenerator<AuditLogRow> {
  let before: number | undefined;
  while (true) {
    const params = new Params();
    const where = conditions(filter, params);
    if (before !== undefined) where.push(`id < ${params.add(before)}`);
    const rows = await q.query<AuditLogRow>(
      `SELECT ${COLUMNS} FROM audit_logs ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
       ORDER BY id DESC LIMIT ${params.add(batch)}`,
      params.values,
    );
    for (const row of rows) yield row;
    if (rows.length < batch) return;
    before = rows[rows.length - 1].id;
  }
}
