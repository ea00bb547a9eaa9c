/** Reading the audit log: filters shared by the list and the export. SQL only, no HTTP. */
import type { Queryable } from "../db/db.ts";

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

function whereClause(filter: AuditFilter, params: unknown[]): string {
  const where: string[] = [];
  const add = (sql: (n: string) => string, value: unknown) => {
    params.push(value);
    where.push(sql(`$${params.length}`));
  };
  if (filter.actions?.length) add((p) => `action = ANY(${p}::text[])`, filter.actions);
  if (filter.resourceTypes?.length) add((p) => `resource_type = ANY(${p}::text[])`, filter.resourceTypes);
  if (filter.resourceId) add((p) => `resource_id = ${p}`, filter.resourceId);
  if (filter.user) {
    if (UUID.test(filter.user)) add((p) => `user_id = ${p}::uuid`, filter.user);
    else add((p) => `username = ${p}`, filter.user);
  }
  if (filter.outcome) add((p) => `outcome = ${p}`, filter.outcome);
  if (filter.from) add((p) => `created_at >= ${p}`, filter.from);
  if (filter.to) add((p) => `created_at < ${p}`, filter.to);
  return where.length ? `WHERE ${where.join(" AND ")}` : "";
}

/** A page of rows, newest first. */
export async function listAuditLogs(
  q: Queryable,
  filter: AuditFilter,
  page: { perPage: number; offset: number },
): Promise<{ items: AuditLogRow[]; total: number }> {
  const params: unknown[] = [];
  const where = whereClause(filter, params);
  const [{ n }] = await q.query<{ n: number }>(`SELECT count(*)::int AS n FROM audit_logs ${where}`, params);
  const items = await q.query<AuditLogRow>(
    `SELECT ${COLUMNS} FROM audit_logs ${where} ORDER BY id DESC LIMIT $${params.length + 1} OFFSET $${
      params.length + 2
    }`,
    [...params, page.perPage, page.offset],
  );
  return { items, total: n };
}

/** Every matching row, newest first, fetched in batches by id (constant memory for large exports). */
export async function* iterateAuditLogs(
  q: Queryable,
  filter: AuditFilter,
  batch = 500,
): AsyncGenerator<AuditLogRow> {
  let before: number | undefined;
  while (true) {
    const params: unknown[] = [];
    let where = whereClause(filter, params);
    if (before !== undefined) {
      params.push(before);
      where = `${where ? `${where} AND` : "WHERE"} id < $${params.length}`;
    }
    params.push(batch);
    const rows = await q.query<AuditLogRow>(
      `SELECT ${COLUMNS} FROM audit_logs ${where} ORDER BY id DESC LIMIT $${params.length}`,
      params,
    );
    for (const row of rows) yield row;
    if (rows.length < batch) return;
    before = rows[rows.length - 1].id;
  }
}
