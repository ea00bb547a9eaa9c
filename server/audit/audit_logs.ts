/** Reading the audit log: filters shared by the list and the export. SQL only, no HTTP. */
import type { Queryable } from "../db/db.ts";
import { type Page, type PageRequest, Params, selectPage } from "../domain/pagination.ts";

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

/** The filter as SQL conditions on `audit_logs`, their values added to `params`. */
function conditions(filter: AuditFilter, params: Params): string[] {
  const where: string[] = [];
  if (filter.actions?.length) where.push(`action = ANY(${params.add(filter.actions)}::text[])`);
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

/** A page of rows, newest first. */
export async function listAuditLogs(
  q: Queryable,
  filter: AuditFilter,
  page: PageRequest,
): Promise<Page<AuditLogRow>> {
  const params = new Params();
  return await selectPage<AuditLogRow>(q, {
    columns: COLUMNS,
    from: "audit_logs",
    where: conditions(filter, params),
    params: params.values,
    orderBy: "ORDER BY id DESC",
    page,
  });
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
