/**
 * Compliance views over the latest result per (node, policy). A result counts only while its policy still
 * reaches the node (released, and an enabled binding to a group the node belongs to): a result left over
 * from an unbound or archived policy describes nothing the node is asked to do any more.
 *
 * "Reaches" is read from the reach model (`policy_reach`, and the per-node counters that follow it), which
 * equals that definition except that a large binding or policy change reaches it a batch at a time after its
 * commit (server/domain/reach.ts): these views may be as old as that backlog, never inconsistent with each
 * other. A read that must be exact uses `DELIVERS_SQL` there instead.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { fleetTotals } from "../db/fleet_totals.ts";
import { DomainError, found } from "../core/errors.ts";
import {
  likePattern,
  type ListOptions,
  orderBy,
  type Page,
  type PageRequest,
  Params,
  selectPage,
} from "../db/pagination.ts";

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

/** Every reached (node, policy) pair as `n`, `p`, with its latest result `r` (left-joined). */
export const REACHED_PAIRS_SQL =
  `policy_reach pr JOIN nodes n ON n.id = pr.node_id JOIN policies p ON p.id = pr.policy_id
  LEFT JOIN compliance_results r ON r.node_id = pr.node_id AND r.policy_id = pr.policy_id`;

/**
 * {@link REACHED_PAIRS_SQL} and {@link REPORTED_PAIRS_SQL} without nodes and policies, for choosing a page
 * by a result column: `policy_reach` rows are removed with their node or policy (foreign keys), so those
 * joins never drop a row.
 */
const REACHED_KEYS_SQL = `policy_reach pr
  LEFT JOIN compliance_results r ON r.node_id = pr.node_id AND r.policy_id = pr.policy_id`;
const REPORTED_KEYS_SQL = `compliance_results r
  JOIN policy_reach pr ON pr.node_id = r.node_id AND pr.policy_id = r.policy_id`;

/** Reported results whose policy still reaches the node, as `r`, `n`, `p`. */
const REPORTED_PAIRS_SQL = `compliance_results r
  JOIN policy_reach pr ON pr.node_id = r.node_id AND pr.policy_id = r.policy_id
  JOIN nodes n ON n.id = r.node_id JOIN policies p ON p.id = r.policy_id`;

/**
 * Per-node counts of reached pairs by the status of their latest result, kept by triggers in
 * `node_compliance_counts` (alias `c`): reported statuses plus `unreported`. These sums answer the fleet views
 * without reading every result.
 */
export const NODE_COUNTS = {
  /** Pairs that reach the node. */
  total: "(c.compliant + c.non_compliant + c.inapplicable + c.error + c.unknown + c.unreported)",
  /** Reported pairs. */
  reported: "(c.compliant + c.non_compliant + c.inapplicable + c.error + c.unknown)",
  /** Error or non-compliant. */
  problems: "(c.error + c.non_compliant)",
  /** Reported as unknown, or not reported yet. */
  unknown: "(c.unknown + c.unreported)",
} as const;

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
  /** Only pairs whose item for this setting is failing (error or non_compliant), as in {@link failingSettings}. */
  failingSetting?: SettingRef;
}

/** One setting of a policy as compliance items name it: dconf items carry a schema, others only a key. */
export interface SettingRef {
  schemaId: string;
  key: string;
}

/** SQL: the result `r` has a failing item for the setting in parameters `schema` and `key`. */
function failingItemSql(schema: string, key: string): string {
  return `EXISTS (SELECT 1 FROM jsonb_array_elements(r.items) i WHERE i->>'key' = ${key}
    AND coalesce(i->>'schema_id', '') = ${schema} AND i->>'status' IN ('error', 'non_compliant'))`;
}

/** Paging of {@link listCompliance}: a page and a sort, or a keyset cursor. */
export interface ComplianceListOptions extends ListOptions {
  /**
   * The `next_cursor` of the page before (reported results by report time only): the next page is then read
   * after that result, at the same cost however deep, and `page` is ignored.
   */
  cursor?: string;
}

/** A page of {@link listCompliance}. */
export type CompliancePage = Page<ComplianceRow> & {
  status_counts: StatusCounts;
  /**
   * Pass as `cursor` for the page after this one; null when this page was not full, or when the list is not of
   * reported results by report time.
   */
  next_cursor: string | null;
};

const CURSOR_TIME = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?[+-]\d\d(:\d\d)?$/;
const CURSOR_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A result's place in report-time order, as an opaque string: its report time (exact text) and its pair. */
export function complianceCursor(at: string, nodeId: string, policyId: string): string {
  return btoa(JSON.stringify([at, nodeId, policyId])).replaceAll("+", "-").replaceAll("/", "_").replace(
    /=+$/,
    "",
  );
}

function decodeCursor(cursor: string): [string, string, string] {
  const refuse = () =>
    new DomainError("bad_request", "cursor: not a next_cursor of this list; pass one as it was returned", [
      { field: "cursor", message: "not a next_cursor of this list" },
    ]);
  let value: unknown;
  try {
    value = JSON.parse(atob(cursor.replaceAll("-", "+").replaceAll("_", "/")));
  } catch {
    throw refuse();
  }
  if (
    !Array.isArray(value) || value.length !== 3 || typeof value[0] !== "string" ||
    !CURSOR_TIME.test(value[0]) ||
    typeof value[1] !== "string" || !CURSOR_ID.test(value[1]) || typeof value[2] !== "string" ||
    !CURSOR_ID.test(value[2])
  ) throw refuse();
  return value as [string, string, string];
}

/** Reported results (only those whose policy still reaches the node), with counts per status. */
export async function listCompliance(
  q: Queryable,
  filter: ComplianceFilter,
  options: ComplianceListOptions,
): Promise<CompliancePage> {
  const params = new Params();
  const where: string[] = [];
  if (filter.nodeId) where.push(`pr.node_id = ${params.add(filter.nodeId)}`);
  if (filter.policyId) where.push(`pr.policy_id = ${params.add(filter.policyId)}`);
  if (filter.search) {
    const like = params.add(likePattern(filter.search));
    where.push(`(n.name ILIKE ${like} ESCAPE '\\' OR p.name ILIKE ${like} ESCAPE '\\')`);
  }
  if (filter.failingSetting) {
    const { schemaId, key } = filter.failingSetting;
    where.push(failingItemSql(params.add(schemaId), params.add(key)));
  }
  const from = filter.includeUnreported ? REACHED_PAIRS_SQL : REPORTED_PAIRS_SQL;
  // A reported result always has a status; only unreported pairs need the default (and lose the index).
  const status = filter.includeUnreported ? "coalesce(r.status, 'unknown')" : "r.status";
  // The whole fleet's counts come from the per-node counters; a narrowed list counts its own rows.
  const statusCounts = where.length === 0
    ? await fleetStatusCounts(q, { includeUnreported: filter.includeUnreported === true })
    : toCounts(
      await q.query<{ status: ComplianceStatus; n: number }>(
        `SELECT ${status} AS status, count(*)::int AS n FROM ${from} WHERE ${where.join(" AND ")} GROUP BY 1`,
        params.values,
      ),
    );
  if (filter.status) where.push(`${status} = ${params.add(filter.status)}`);
  const field = options.sort?.field && Object.hasOwn(COMPLIANCE_SORT_COLUMNS, options.sort.field)
    ? options.sort.field
    : "reported_at";
  // Report times almost never tie, so ties there are broken by the pair's ids, and the page is then chosen
  // without reading node and policy names (every match is sorted to find a deep page). Sorts with many ties
  // (status, severity) list them by node and policy name, as a reader expects.
  const byTime = field === "reported_at";
  // Keyset paging where it is cheap and exact: reported results (a time each) in report-time order.
  const keyset = byTime && !filter.includeUnreported;
  const descending = (options.sort?.order ?? (options.sort?.field ? "asc" : "desc")) === "desc";
  if (options.cursor !== undefined) {
    if (!keyset) {
      throw new DomainError(
        "bad_request",
        "cursor: only reported results in report-time order are read by cursor; drop include_unreported or the sort, or page by number",
        [{ field: "cursor", message: "needs sort=reported_at without include_unreported" }],
      );
    }
    const [at, nodeId, policyId] = decodeCursor(options.cursor);
    // Cast through text: postgres.js turns a timestamptz parameter into a Date first, dropping microseconds.
    const t = `${params.add(at)}::text::timestamptz`;
    where.push(
      `(r.reported_at ${descending ? "<" : ">"} ${t} OR (r.reported_at = ${t} AND ` +
        `(pr.node_id, pr.policy_id) > (${params.add(nodeId)}::uuid, ${params.add(policyId)}::uuid)))`,
    );
  }
  const order = {
    columns: COMPLIANCE_SORT_COLUMNS,
    fallback: "reported_at",
    tiebreak: byTime ? "pr.node_id, pr.policy_id" : "n.name, p.name, n.id, p.id",
    defaultOrder: options.sort?.field ? "asc" as const : "desc" as const,
  };
  const page = await selectPage<ComplianceRow>(q, {
    columns: ROW_COLUMNS,
    from,
    keyFrom: byTime && !filter.search
      ? (filter.includeUnreported ? REACHED_KEYS_SQL : REPORTED_KEYS_SQL)
      : from,
    where,
    params: params.values,
    orderBy: orderBy(options.sort ?? {}, order),
    // A deep page by number is read from the nearer end (the total is known from the counts above).
    reverseOrderBy: orderBy(options.sort ?? {}, { ...order, reverse: true }),
    page: options.cursor === undefined ? options.page : { page: 1, perPage: options.page.perPage },
    total: filter.status ? statusCounts[filter.status] : statusCounts.total,
    pageKey: "pr.node_id, pr.policy_id",
  });
  const last = page.items.at(-1);
  let next: string | null = null;
  if (keyset && last && page.items.length === page.per_page) {
    // The exact time (a Date keeps milliseconds, the column microseconds), read for the last row only.
    const [row] = await q.query<{ at: string }>(
      "SELECT reported_at::text AS at FROM compliance_results WHERE node_id = $1 AND policy_id = $2",
      [last.node_id, last.policy_id],
    );
    if (row) next = complianceCursor(row.at, last.node_id, last.policy_id);
  }
  return { ...page, status_counts: statusCounts, next_cursor: next };
}

/** Reached pairs of the whole fleet by status, from the fleet totals (reported only, or all). */
async function fleetStatusCounts(
  q: Queryable,
  options: { includeUnreported: boolean },
): Promise<StatusCounts> {
  const t = await fleetTotals(q);
  const row = { ...t, unknown: t.unknown + (options.includeUnreported ? t.unreported : 0) };
  return toCounts(COMPLIANCE_STATUSES.map((status) => ({ status, n: row[status] })));
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
    `SELECT ${ROW_COLUMNS} FROM ${REACHED_PAIRS_SQL} WHERE pr.node_id = $1 ORDER BY p.name, p.id`,
    [nodeId],
  );
  return { node_id: nodeId, summary: countRows(results), results };
}

/** Compact per-status counts for one node (used by the node detail view), from its counters. */
export async function nodeComplianceSummary(q: Queryable, nodeId: string): Promise<StatusCounts> {
  const [row] = await q.query<Omit<StatusCounts, "total">>(
    `SELECT c.compliant, c.non_compliant, c.inapplicable, c.error, ${NODE_COUNTS.unknown} AS unknown
       FROM node_compliance_counts c WHERE c.node_id = $1`,
    [nodeId],
  );
  return toCounts(row ? COMPLIANCE_STATUSES.map((status) => ({ status, n: row[status] })) : []);
}

/** Every node the policy reaches, with its latest result, paginated, plus counts per status. */
export async function policyCompliance(
  q: Queryable,
  policyId: string,
  options: { page: PageRequest; status?: ComplianceStatus },
): Promise<Page<ComplianceRow> & { policy_id: string; status_counts: StatusCounts }> {
  found(await queryOne(q, "SELECT 1 FROM policies WHERE id = $1", [policyId]), `policy ${policyId}`);
  // Counted from the reach rows and their results alone (a reach row goes with its node or policy, so joining
  // those would drop none); the page's total is then known and needs no count of its own.
  const counts = toCounts(
    await q.query<{ status: ComplianceStatus; n: number }>(
      `SELECT coalesce(r.status, 'unknown') AS status, count(*)::int AS n FROM ${REACHED_KEYS_SQL}
        WHERE pr.policy_id = $1 GROUP BY 1`,
      [policyId],
    ),
  );
  const where = ["pr.policy_id = $1"];
  if (options.status) where.push("coalesce(r.status, 'unknown') = $2");
  const page = await selectPage<ComplianceRow>(q, {
    columns: ROW_COLUMNS,
    from: REACHED_PAIRS_SQL,
    // The page is chosen by node name: the nodes are needed for that, the policy's row is not.
    keyFrom: `${REACHED_KEYS_SQL} JOIN nodes n ON n.id = pr.node_id`,
    where,
    params: options.status ? [policyId, options.status] : [policyId],
    orderBy: "ORDER BY n.name, n.id",
    reverseOrderBy: "ORDER BY n.name DESC, n.id DESC",
    page: options.page,
    total: options.status ? counts[options.status] : counts.total,
    pageKey: "pr.node_id, pr.policy_id",
  });
  return { policy_id: policyId, ...page, status_counts: counts };
}

/** A setting failing on nodes, for the dashboard's attention list. */
export interface FailingSetting {
  policy_id: string;
  policy_name: string;
  policy_type: string;
  schema_id: string;
  key: string;
  /** Nodes where the setting's item is error or non_compliant. */
  nodes: number;
  error: number;
  non_compliant: number;
}

/**
 * The settings failing on most nodes: items reported as error or non_compliant in results whose policy still
 * reaches the node, by policy and setting, most nodes first. Only problem results are read (their status
 * index), never every result of the fleet.
 */
export async function failingSettings(q: Queryable, limit: number): Promise<FailingSetting[]> {
  return await q.query<FailingSetting>(
    `SELECT p.id AS policy_id, p.name AS policy_name, p.type AS policy_type, f.schema_id, f.key,
            f.nodes, f.error, f.non_compliant
       FROM (SELECT r.policy_id, i.schema_id, i.key, count(*)::int AS nodes,
                    count(*) FILTER (WHERE i.error)::int AS error,
                    count(*) FILTER (WHERE NOT i.error)::int AS non_compliant
               FROM ${REPORTED_KEYS_SQL}
              -- One row per failing setting of a result (its worst status), so a pair counts once.
              CROSS JOIN LATERAL (
                SELECT coalesce(e->>'schema_id', '') AS schema_id, e->>'key' AS key,
                       bool_or(e->>'status' = 'error') AS error
                  FROM jsonb_array_elements(r.items) e
                 WHERE e->>'status' IN ('error', 'non_compliant') AND coalesce(e->>'key', '') <> ''
                 GROUP BY 1, 2) i
              WHERE r.status IN ('error', 'non_compliant')
              GROUP BY 1, 2, 3) f
       JOIN policies p ON p.id = f.policy_id
      ORDER BY f.nodes DESC, p.name, f.schema_id, f.key
      LIMIT $1`,
    [limit],
  );
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

/**
 * Fleet-wide compliance summary, from the fleet totals (a few rows, however many nodes and results the fleet
 * has).
 */
export async function fleetSummary(q: Queryable): Promise<FleetSummary> {
  const t = await fleetTotals(q);
  const row = { ...t, unknown: t.unknown + t.unreported };
  const results = toCounts(COMPLIANCE_STATUSES.map((status) => ({ status, n: row[status] })));
  const scored = results.compliant + results.non_compliant + results.error;
  return {
    results,
    score: scored === 0 ? null : results.compliant / scored,
    nodes: { total: t.nodes, compliant: t.good, non_compliant: t.bad, without_policies: t.none },
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
