/**
 * Compliance views over the latest result per (node, policy). A result counts only while its policy still
 * reaches the node (released, and an enabled binding to a group the node belongs to): a result left over
 * from an unbound or archived policy describes nothing the node is asked to do any more.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { found } from "./errors.ts";
import {
  likePattern,
  type ListOptions,
  orderBy,
  type Page,
  type PageRequest,
  Params,
  selectPage,
} from "./pagination.ts";

/** Stored compliance statuses (lower-case forms of the protocol's ComplianceStatus). */
export const COMPLIANCE_STATUSES = [
  "compliant",
  "non_compliant",
  "inapplicable",
  "error",
  "unknown",
] as const;
/** A compliance status. */
export type ComplianceStatus = (typeof COMPLIANCE_STATUSES)[number];

/** Per-item result (ComplianceItemResult). */
export interface ComplianceItem {
  schema_id: string;
  key: string;
  status: string;
  message: string;
}

/** One (node, policy) row. `reported_at` is null when the node has not reported on the policy yet. */
export interface ComplianceRow {
  node_id: string;
  node_name: string;
  policy_id: string;
  policy_name: string;
  policy_type: string;
  /** Version of the policy the result was reported for. */
  reported_version: number | null;
  /** Current version of the policy. */
  policy_version: number;
  status: ComplianceStatus;
  message: string;
  items: ComplianceItem[];
  reported_at: Date | null;
}

/** Counts per status. */
export type StatusCounts = Record<ComplianceStatus, number> & { total: number };

/**
 * SQL condition "policy `p` reaches node `n`" (aliases `p` and `n` must be in scope). The one definition of
 * delivery used by every view here.
 */
export const REACHES_SQL = `p.state = 'released' AND EXISTS (
  SELECT 1 FROM policy_bindings rb JOIN node_group_members rm ON rm.node_group_id = rb.node_group_id
  WHERE rb.policy_id = p.id AND rb.state = 'enabled' AND rm.node_id = n.id)`;

const ROW_COLUMNS = `n.id AS node_id, n.name AS node_name, p.id AS policy_id, p.name AS policy_name,
  p.type AS policy_type, r.policy_version AS reported_version, p.version AS policy_version,
  coalesce(r.status, 'unknown') AS status, coalesce(r.message, '') AS message,
  coalesce(r.items, '[]'::jsonb) AS items, r.reported_at`;

/** Public sort names → SQL. */
export const COMPLIANCE_SORT_COLUMNS: Record<string, string> = {
  node: "n.name",
  policy: "p.name",
  status: "r.status",
  reported_at: "r.reported_at",
  /** Problems first: error, non-compliant, not reported yet, compliant, inapplicable. */
  severity: `CASE coalesce(r.status, 'unknown') WHEN 'error' THEN 0 WHEN 'non_compliant' THEN 1
    WHEN 'unknown' THEN 2 WHEN 'compliant' THEN 3 ELSE 4 END`,
};

/** Filters of the fleet-wide result list. */
export interface ComplianceFilter {
  status?: ComplianceStatus;
  nodeId?: string;
  policyId?: string;
  /** Case-insensitive substring of the node or policy name. */
  search?: string;
  /**
   * Also list the (node, policy) pairs the node has not reported on yet, as `unknown`, so the counts equal
   * the fleet summary's.
   */
  includeUnreported?: boolean;
}

/** Reported results (only those whose policy still reaches the node), with counts per status. */
export async function listCompliance(
  q: Queryable,
  filter: ComplianceFilter,
  options: ListOptions,
): Promise<Page<ComplianceRow> & { status_counts: StatusCounts }> {
  const params = new Params();
  const where = [REACHES_SQL];
  if (filter.nodeId) where.push(`n.id = ${params.add(filter.nodeId)}`);
  if (filter.policyId) where.push(`p.id = ${params.add(filter.policyId)}`);
  if (filter.search) {
    const like = params.add(likePattern(filter.search));
    where.push(`(n.name ILIKE ${like} ESCAPE '\\' OR p.name ILIKE ${like} ESCAPE '\\')`);
  }
  const from = filter.includeUnreported
    ? `policies p JOIN nodes n ON ${REACHES_SQL}
       LEFT JOIN compliance_results r ON r.node_id = n.id AND r.policy_id = p.id`
    : `compliance_results r JOIN nodes n ON n.id = r.node_id JOIN policies p ON p.id = r.policy_id`;
  const status = "coalesce(r.status, 'unknown')";
  const counts = await q.query<{ status: ComplianceStatus; n: number }>(
    `SELECT ${status} AS status, count(*)::int AS n FROM ${from} WHERE ${where.join(" AND ")} GROUP BY 1`,
    params.values,
  );
  const statusCounts = toCounts(counts);
  if (filter.status) where.push(`${status} = ${params.add(filter.status)}`);
  const page = await selectPage<ComplianceRow>(q, {
    columns: ROW_COLUMNS,
    from,
    where,
    params: params.values,
    orderBy: orderBy(options.sort ?? {}, {
      columns: COMPLIANCE_SORT_COLUMNS,
      fallback: "reported_at",
      tiebreak: "n.name, p.name, n.id, p.id",
      defaultOrder: options.sort?.field ? "asc" : "desc",
    }),
    page: options.page,
  });
  return { ...page, status_counts: statusCounts };
}

/**
 * Every policy that reaches the node, with its latest result (status `unknown` and `reported_at` null while
 * the node has not reported on it).
 */
export async function nodeCompliance(
  q: Queryable,
  nodeId: string,
): Promise<{ node_id: string; summary: StatusCounts; results: ComplianceRow[] }> {
  found(await queryOne(q, "SELECT 1 FROM nodes WHERE id = $1", [nodeId]), `node ${nodeId}`);
  const results = await q.query<ComplianceRow>(
    `SELECT ${ROW_COLUMNS} FROM nodes n JOIN policies p ON ${REACHES_SQL}
     LEFT JOIN compliance_results r ON r.node_id = n.id AND r.policy_id = p.id
     WHERE n.id = $1 ORDER BY p.name, p.id`,
    [nodeId],
  );
  return { node_id: nodeId, summary: countRows(results), results };
}

/** Compact per-status counts for one node (used by the node detail view). */
export async function nodeComplianceSummary(q: Queryable, nodeId: string): Promise<StatusCounts> {
  const rows = await q.query<{ status: ComplianceStatus; n: number }>(
    `SELECT coalesce(r.status, 'unknown') AS status, count(*)::int AS n
     FROM nodes n JOIN policies p ON ${REACHES_SQL}
     LEFT JOIN compliance_results r ON r.node_id = n.id AND r.policy_id = p.id
     WHERE n.id = $1 GROUP BY 1`,
    [nodeId],
  );
  return toCounts(rows);
}

/** Every node the policy reaches, with its latest result, paginated, plus counts per status. */
export async function policyCompliance(
  q: Queryable,
  policyId: string,
  options: { page: PageRequest; status?: ComplianceStatus },
): Promise<Page<ComplianceRow> & { policy_id: string; status_counts: StatusCounts }> {
  found(await queryOne(q, "SELECT 1 FROM policies WHERE id = $1", [policyId]), `policy ${policyId}`);
  const from = `policies p JOIN nodes n ON ${REACHES_SQL}
    LEFT JOIN compliance_results r ON r.node_id = n.id AND r.policy_id = p.id`;
  const counts = await q.query<{ status: ComplianceStatus; n: number }>(
    `SELECT coalesce(r.status, 'unknown') AS status, count(*)::int AS n FROM ${from} WHERE p.id = $1 GROUP BY 1`,
    [policyId],
  );
  const where = ["p.id = $1"];
  if (options.status) where.push("coalesce(r.status, 'unknown') = $2");
  const page = await selectPage<ComplianceRow>(q, {
    columns: ROW_COLUMNS,
    from,
    where,
    params: options.status ? [policyId, options.status] : [policyId],
    orderBy: "ORDER BY n.name, n.id",
    page: options.page,
  });
  return { policy_id: policyId, ...page, status_counts: toCounts(counts) };
}

/** Fleet summary. */
export interface FleetSummary {
  /** Expected (node, policy) pairs by status; pairs without a report count as `unknown`. */
  results: StatusCounts;
  /**
   * compliant / (compliant + non_compliant + error), as a fraction; null when nothing counts. Inapplicable and
   * unknown results are left out, as the agent's own rollup does.
   */
  score: number | null;
  nodes: {
    total: number;
    /** Nodes whose every expected result is compliant or inapplicable (and at least one exists). */
    compliant: number;
    /** Nodes with at least one non_compliant or error result. */
    non_compliant: number;
    /** Nodes that receive no policy. */
    without_policies: number;
  };
}

/** Fleet-wide compliance summary. */
export async function fleetSummary(q: Queryable): Promise<FleetSummary> {
  const perNode = await q.query<{ node_id: string; status: ComplianceStatus; n: number }>(
    `SELECT n.id AS node_id, coalesce(r.status, 'unknown') AS status, count(*)::int AS n
     FROM nodes n JOIN policies p ON ${REACHES_SQL}
     LEFT JOIN compliance_results r ON r.node_id = n.id AND r.policy_id = p.id
     GROUP BY 1, 2`,
  );
  const [{ total }] = await q.query<{ total: number }>("SELECT count(*)::int AS total FROM nodes");
  const results = toCounts([]);
  const byNode = new Map<string, Set<ComplianceStatus>>();
  for (const row of perNode) {
    results[row.status] += row.n;
    results.total += row.n;
    const set = byNode.get(row.node_id) ?? new Set();
    set.add(row.status);
    byNode.set(row.node_id, set);
  }
  let compliant = 0;
  let nonCompliant = 0;
  for (const statuses of byNode.values()) {
    if (statuses.has("non_compliant") || statuses.has("error")) nonCompliant++;
    else if ([...statuses].every((s) => s === "compliant" || s === "inapplicable")) compliant++;
  }
  const scored = results.compliant + results.non_compliant + results.error;
  return {
    results,
    score: scored === 0 ? null : results.compliant / scored,
    nodes: { total, compliant, non_compliant: nonCompliant, without_policies: total - byNode.size },
  };
}

function toCounts(rows: readonly { status: ComplianceStatus; n: number }[]): StatusCounts {
  const counts = { compliant: 0, non_compliant: 0, inapplicable: 0, error: 0, unknown: 0, total: 0 };
  for (const row of rows) {
    counts[row.status] += row.n;
    counts.total += row.n;
  }
  return counts;
}

function countRows(rows: readonly ComplianceRow[]): StatusCounts {
  return toCounts(rows.map((r) => ({ status: r.status, n: 1 })));
}
