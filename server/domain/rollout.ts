/**
 * Rollout of a released policy: every node it reaches (through which enabled bindings), and where that node
 * stands with the policy's current version. A node that has not reported on the current version is
 * `pending` (its last report, if any, was for an older version or carried no status); the other states are
 * the reported compliance statuses. The per-policy counts for many policies come from one grouped query, so
 * the policy list can show them for a whole page.
 */
import type { Queryable } from "../db/db.ts";
import { queryOne } from "../db/db.ts";
import { found } from "../core/errors.ts";
import { likePattern, type Page, type PageRequest, Params, selectPage } from "../db/pagination.ts";
import { REACHED_PAIRS_SQL } from "./compliance.ts";

/** Where a node stands with the current version of a policy. */
export const ROLLOUT_STATES = ["pending", "error", "non_compliant", "compliant", "inapplicable"] as const;
/** A rollout state. */
export type RolloutState = (typeof ROLLOUT_STATES)[number];

/** Counts per rollout state. */
export type RolloutCounts = Record<RolloutState, number> & { total: number };

/** One node the policy reaches. */
export interface RolloutRow {
  node_id: string;
  node_name: string;
  /** The node's connection status (online, degraded, offline, unknown). */
  node_status: string;
  last_seen: Date | null;
  state: RolloutState;
  /** Version of the policy the node last reported on (null: never). */
  reported_version: number | null;
  message: string;
  reported_at: Date | null;
  /** The enabled bindings through which the policy reaches the node. */
  via: Array<{ binding_id: string; node_group_id: string; node_group_name: string; priority: number }>;
}

/** SQL of the rollout state (aliases `p` and `r` in scope; `r` left-joined). */
const STATE_SQL = `CASE WHEN r.node_id IS NULL OR r.policy_version <> p.version OR r.status = 'unknown'
  THEN 'pending' ELSE r.status END`;

const FROM = REACHED_PAIRS_SQL;

/** Sort order: problems first (pending, error, non-compliant), then by node name. */
const PROBLEMS_FIRST = `ORDER BY CASE ${STATE_SQL} WHEN 'error' THEN 0 WHEN 'non_compliant' THEN 1
  WHEN 'pending' THEN 2 WHEN 'compliant' THEN 3 ELSE 4 END, n.name, n.id`;

function emptyCounts(): RolloutCounts {
  return { pending: 0, error: 0, non_compliant: 0, compliant: 0, inapplicable: 0, total: 0 };
}

/** Filters of {@link policyRollout}. */
export interface RolloutFilter {
  state?: RolloutState;
  /** Case-insensitive substring of the node name. */
  search?: string;
}

/** The nodes a policy reaches with their rollout state, problems first, plus counts per state. */
export async function policyRollout(
  q: Queryable,
  policyId: string,
  options: { page: PageRequest; filter?: RolloutFilter },
): Promise<Page<RolloutRow> & { policy_id: string; version: number; counts: RolloutCounts }> {
  const policy = found(
    await queryOne<{ version: number }>(q, "SELECT version FROM policies WHERE id = $1", [policyId]),
    `policy ${policyId}`,
  );
  const counts = (await rolloutCounts(q, [policyId])).get(policyId) ?? emptyCounts();
  const params = new Params();
  const where = [`pr.policy_id = ${params.add(policyId)}`];
  if (options.filter?.state) where.push(`${STATE_SQL} = ${params.add(options.filter.state)}`);
  if (options.filter?.search) {
    where.push(`n.name ILIKE ${params.add(likePattern(options.filter.search))} ESCAPE '\\'`);
  }
  const page = await selectPage<RolloutRow>(q, {
    columns: `n.id AS node_id, n.name AS node_name, n.status AS node_status, n.last_seen,
      ${STATE_SQL} AS state, r.policy_version AS reported_version,
      -- A pending row has no report on the current version: an older report's message would be stale.
      CASE WHEN ${STATE_SQL} = 'pending' THEN '' ELSE coalesce(r.message, '') END AS message,
      r.reported_at,
      (SELECT coalesce(jsonb_agg(jsonb_build_object('binding_id', b.id, 'node_group_id', g.id,
          'node_group_name', g.name, 'priority', b.priority) ORDER BY g.name), '[]'::jsonb)
        FROM policy_bindings b JOIN node_groups g ON g.id = b.node_group_id
        JOIN node_group_members m ON m.node_group_id = g.id
        WHERE b.policy_id = p.id AND b.state = 'enabled' AND m.node_id = n.id) AS via`,
    from: FROM,
    where,
    params: params.values,
    orderBy: PROBLEMS_FIRST,
    page: options.page,
    total: options.filter?.search
      ? undefined
      : options.filter?.state
      ? counts[options.filter.state]
      : counts.total,
    pageKey: "pr.node_id, pr.policy_id",
  });
  return { policy_id: policyId, version: policy.version, ...page, counts };
}

/** Rollout counts of each of `policyIds` (policies that reach no node get all zeros), in one grouped query. */
export async function rolloutCounts(
  q: Queryable,
  policyIds: readonly string[],
): Promise<Map<string, RolloutCounts>> {
  const out = new Map<string, RolloutCounts>(policyIds.map((id) => [id, emptyCounts()]));
  if (policyIds.length === 0) return out;
  const rows = await q.query<{ policy_id: string; state: RolloutState; n: number }>(
    `SELECT p.id AS policy_id, ${STATE_SQL} AS state, count(*)::int AS n FROM ${FROM}
     WHERE pr.policy_id = ANY($1::uuid[]) GROUP BY 1, 2`,
    [policyIds],
  );
  for (const row of rows) {
    const counts = out.get(row.policy_id)!;
    counts[row.state] += row.n;
    counts.total += row.n;
  }
  return out;
}
