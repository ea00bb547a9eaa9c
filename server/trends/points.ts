/**
 * Reading trend points: the fleet's hourly or daily points over a time range, and one policy's rollout since
 * its current version started to be delivered. Points are shaped for a reader: the compliance part and the
 * node-status part apart (each guarded by its own permission at the route), with the share compliant worked
 * out.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { found } from "../core/errors.ts";
import { type RolloutCounts, rolloutCounts } from "../domain/rollout.ts";

/** Point granularities. */
export const GRANULARITIES = ["hour", "day"] as const;
/** A granularity. */
export type Granularity = (typeof GRANULARITIES)[number];

/** Length of one bucket in milliseconds. */
export const BUCKET_MS: Record<Granularity, number> = { hour: 3_600_000, day: 86_400_000 };

/** Nodes by their worst result at one point. */
export interface CompliancePoint {
  /** Nodes that receive at least one policy. */
  reached: number;
  compliant: number;
  non_compliant: number;
  error: number;
  /** Not reported yet on some policy, or reported as unknown (and nothing worse). */
  unknown: number;
  without_policies: number;
  /** compliant / reached × 100, one decimal; null when no node receives a policy. */
  percent_compliant: number | null;
}

/** Nodes by connection at one point. */
export interface NodeStatusPoint {
  total: number;
  online: number;
  degraded: number;
  offline: number;
  never_seen: number;
}

/** One fleet point; a part is absent when the reader may not see it. */
export interface FleetPoint {
  /** Start of the hour or day (UTC). */
  bucket: Date;
  sampled_at: Date;
  compliance?: CompliancePoint;
  nodes?: NodeStatusPoint;
}

interface FleetRow {
  bucket: Date;
  sampled_at: Date;
  nodes: number;
  compliant: number;
  non_compliant: number;
  error: number;
  unknown: number;
  without_policies: number;
  online: number;
  degraded: number;
  offline: number;
  never_seen: number;
}

/** Options of {@link fleetTrend}. */
export interface FleetTrendQuery {
  granularity: Granularity;
  /** Earliest bucket start (inclusive). */
  from: Date;
  /** Latest bucket start (exclusive). */
  to: Date;
  /** Which parts to include. */
  parts: { compliance: boolean; nodes: boolean };
}

/** The fleet's points of one granularity with buckets in [from, to), oldest first. */
export async function fleetTrend(q: Queryable, query: FleetTrendQuery): Promise<FleetPoint[]> {
  const rows = await q.query<FleetRow>(
    `SELECT bucket, sampled_at, nodes, compliant, non_compliant, error, unknown, without_policies,
            online, degraded, offline, never_seen
       FROM fleet_trend_points WHERE granularity = $1 AND bucket >= $2 AND bucket < $3 ORDER BY bucket`,
    [query.granularity, query.from, query.to],
  );
  return rows.map((r) => {
    const point: FleetPoint = { bucket: r.bucket, sampled_at: r.sampled_at };
    if (query.parts.compliance) {
      const reached = r.nodes - r.without_policies;
      point.compliance = {
        reached,
        compliant: r.compliant,
        non_compliant: r.non_compliant,
        error: r.error,
        unknown: r.unknown,
        without_policies: r.without_policies,
        percent_compliant: reached > 0 ? Math.round((r.compliant / reached) * 1000) / 10 : null,
      };
    }
    if (query.parts.nodes) {
      point.nodes = {
        total: r.nodes,
        online: r.online,
        degraded: r.degraded,
        offline: r.offline,
        never_seen: r.never_seen,
      };
    }
    return point;
  });
}

/** One hourly point of a rollout. */
export interface RolloutPoint {
  bucket: Date;
  sampled_at: Date;
  reached: number;
  compliant: number;
  pending: number;
  error: number;
  non_compliant: number;
  inapplicable: number;
}

/** A policy's rollout over time. */
export interface PolicyTrend {
  policy_id: string;
  /** The policy's current version. */
  version: number;
  /** When that version started to be delivered; null while the policy is not released. */
  started_at: Date | null;
  /** Hourly points of that version since then (those still within the hourly retention), oldest first. */
  points: RolloutPoint[];
  /** Where the rollout stands now (the rollout panel's counts). */
  current: RolloutCounts;
}

/** The rollout of a policy's current version: its hourly points, and where it stands now. */
export async function policyTrend(q: Queryable, policyId: string): Promise<PolicyTrend> {
  const policy = found(
    await queryOne<{ version: number; started_at: Date | null }>(
      q,
      `SELECT p.version, ro.started_at FROM policies p
         LEFT JOIN policy_rollouts ro ON ro.policy_id = p.id AND ro.version = p.version AND p.state = 'released'
        WHERE p.id = $1`,
      [policyId],
    ),
    `policy ${policyId}`,
  );
  const points = policy.started_at === null ? [] : await q.query<RolloutPoint>(
    `SELECT bucket, sampled_at, reached, compliant, pending, error, non_compliant, inapplicable
       FROM policy_trend_points
      WHERE policy_id = $1 AND version = $2 AND bucket >= date_trunc('hour', $3::timestamptz, 'UTC')
      ORDER BY bucket`,
    [policyId, policy.version, policy.started_at],
  );
  const current = (await rolloutCounts(q, [policyId])).get(policyId)!;
  return { policy_id: policyId, version: policy.version, started_at: policy.started_at, points, current };
}

/** A release whose reached nodes have not all applied it yet. */
export interface ReleaseInFlight {
  policy_id: string;
  policy_name: string;
  policy_type: string;
  version: number;
  started_at: Date;
  counts: RolloutCounts;
}

/** Most releases {@link releasesInFlight} lists. */
export const MAX_RELEASES_IN_FLIGHT = 50;

/**
 * Versions released within the last `hours` hours and still delivered, whose reached nodes are not all done
 * (compliant or inapplicable), newest first. A release that reaches no node has nothing in flight.
 */
export async function releasesInFlight(q: Queryable, hours: number): Promise<ReleaseInFlight[]> {
  const recent = await q.query<Omit<ReleaseInFlight, "counts">>(
    `SELECT p.id AS policy_id, p.name AS policy_name, p.type AS policy_type, p.version, ro.started_at
       FROM policy_rollouts ro
       JOIN policies p ON p.id = ro.policy_id AND p.version = ro.version AND p.state = 'released'
      WHERE ro.started_at > now() - make_interval(hours => $1)
      ORDER BY ro.started_at DESC, p.id LIMIT 200`,
    [hours],
  );
  const counts = await rolloutCounts(q, recent.map((r) => r.policy_id));
  return recent
    .map((r) => ({ ...r, counts: counts.get(r.policy_id)! }))
    .filter((r) => r.counts.total > 0 && r.counts.compliant + r.counts.inapplicable < r.counts.total)
    .slice(0, MAX_RELEASES_IN_FLIGHT);
}
