/**
 * Taking a trend sample: once per hour bucket, the fleet's compliance and node status go into an hourly point
 * (and replace the day's point, which is the day's latest sample), each rollout younger than the hourly
 * retention gets its hourly progress point, and points past their retention go.
 *
 * Replicas: every replica may call {@link sampleTrends} as often as it likes. A primary-key lookup answers
 * "already sampled" at once; otherwise the sample runs in one transaction behind an advisory lock, and looks
 * again after taking it, so the replica that waited finds the row and reads nothing. The primary key on the
 * bucket makes a second sample of one hour impossible in any case.
 *
 * Cost: the fleet point is one aggregate statement over the per-node counters kept by triggers
 * (`node_compliance_counts`, one narrow row per node) and the node table, never a query per node or a read
 * of the compliance results; the rollout points are one grouped query over the reached pairs of the few
 * recent rollouts (primary keys of `policy_reach` and `compliance_results`).
 */
import type { Db, Queryable } from "../db/db.ts";
import { NODE_COUNTS } from "../domain/compliance.ts";
import { rolloutCounts } from "../domain/rollout.ts";

/** Advisory lock class of trend sampling (`pg_advisory_xact_lock(22020, 0)`). */
const SAMPLE_LOCK = 22020;

/** How long points are kept, in days. */
export interface TrendRetention {
  hourlyRetentionDays: number;
  dailyRetentionDays: number;
}

/** Options of {@link sampleTrends}. */
export interface SampleOptions extends TrendRetention {
  /** The sample's time (tests); default the database's clock. Its hour is the bucket. */
  at?: Date;
}

/** What a call did: took the hour's sample, or found it taken. */
export interface SampleOutcome {
  sampled: boolean;
  /** The hour bucket (UTC). */
  bucket: Date;
  /** Rollouts that got a point (0 when the hour was already sampled). */
  rollouts: number;
}

/** The columns of a fleet point after its key. */
const FLEET_COLUMNS = `sampled_at, nodes, compliant, non_compliant, error, unknown, without_policies,
  online, degraded, offline, never_seen`;

/**
 * The fleet sample (exported for the query plan check in bench/): nodes by their worst result (error, else non_compliant, else unknown, else compliant; none reached: without
 * policies) from the per-node counters, and by connection from the node table: one statement.
 */
export const FLEET_SAMPLE_SQL = `
  SELECT s.nodes, c.compliant, c.non_compliant, c.error, c.unknown, c.without_policies,
         s.online, s.degraded, s.offline, s.never_seen
    FROM (SELECT count(*) FILTER (WHERE ${NODE_COUNTS.total} = 0)::int AS without_policies,
                 count(*) FILTER (WHERE c.error > 0)::int AS error,
                 count(*) FILTER (WHERE c.error = 0 AND c.non_compliant > 0)::int AS non_compliant,
                 count(*) FILTER (WHERE ${NODE_COUNTS.problems} = 0 AND ${NODE_COUNTS.unknown} > 0)::int AS unknown,
                 count(*) FILTER (WHERE ${NODE_COUNTS.problems} = 0 AND ${NODE_COUNTS.unknown} = 0
                                    AND ${NODE_COUNTS.total} > 0)::int AS compliant
            FROM node_compliance_counts c) c,
         (SELECT count(*)::int AS nodes,
                 count(*) FILTER (WHERE last_seen IS NULL)::int AS never_seen,
                 count(*) FILTER (WHERE last_seen IS NOT NULL AND status = 'online')::int AS online,
                 count(*) FILTER (WHERE last_seen IS NOT NULL AND status = 'degraded')::int AS degraded,
                 count(*) FILTER (WHERE last_seen IS NOT NULL AND status NOT IN ('online', 'degraded'))::int
                   AS offline
            FROM nodes) s`;

/** Takes the sample of the hour of `options.at` (default now) unless some replica already did. */
export async function sampleTrends(db: Db, options: SampleOptions): Promise<SampleOutcome> {
  const [clock] = await db.query<{ at: Date; hour: Date; taken: boolean }>(
    `SELECT t.at, t.hour, EXISTS (SELECT 1 FROM fleet_trend_points f WHERE f.granularity = 'hour' AND f.bucket = t.hour)
       AS taken
       FROM (SELECT coalesce($1::timestamptz, now()) AS at,
                    date_trunc('hour', coalesce($1::timestamptz, now()), 'UTC') AS hour) t`,
    [options.at?.toISOString() ?? null],
  );
  if (clock.taken) return { sampled: false, bucket: clock.hour, rollouts: 0 };
  return await db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock($1, 0)", [SAMPLE_LOCK]);
    const taken = await tx.query(
      "SELECT 1 FROM fleet_trend_points WHERE granularity = 'hour' AND bucket = $1",
      [clock.hour],
    );
    if (taken.length > 0) return { sampled: false, bucket: clock.hour, rollouts: 0 };
    await tx.query(
      `INSERT INTO fleet_trend_points (granularity, bucket, ${FLEET_COLUMNS})
       SELECT 'hour', $1, $2, f.* FROM (${FLEET_SAMPLE_SQL}) f`,
      [clock.hour, clock.at],
    );
    await rollIntoDay(tx, clock.hour);
    const rollouts = await sampleRollouts(tx, clock, options.hourlyRetentionDays);
    await purge(tx, clock.at, options);
    return { sampled: true, bucket: clock.hour, rollouts };
  });
}

/** The day's point becomes this hour's sample, unless it already holds a later one. */
async function rollIntoDay(q: Queryable, hour: Date): Promise<void> {
  const columns = FLEET_COLUMNS.split(",").map((c) => c.trim());
  await q.query(
    `INSERT INTO fleet_trend_points (granularity, bucket, ${FLEET_COLUMNS})
     SELECT 'day', date_trunc('day', bucket, 'UTC'), ${FLEET_COLUMNS}
       FROM fleet_trend_points WHERE granularity = 'hour' AND bucket = $1
     ON CONFLICT (granularity, bucket) DO UPDATE SET ${columns.map((c) => `${c} = EXCLUDED.${c}`).join(", ")}
       WHERE fleet_trend_points.sampled_at <= EXCLUDED.sampled_at`,
    [hour],
  );
}

/**
 * One point per rollout younger than the hourly retention whose version is still the one delivered: its
 * reached nodes by rollout state (the rollout panel's counts, from the same query).
 */
async function sampleRollouts(
  q: Queryable,
  clock: { at: Date; hour: Date },
  hourlyRetentionDays: number,
): Promise<number> {
  const recent = await q.query<{ policy_id: string; version: number }>(
    `SELECT ro.policy_id, ro.version FROM policy_rollouts ro
       JOIN policies p ON p.id = ro.policy_id AND p.version = ro.version AND p.state = 'released'
      WHERE ro.started_at > $1::timestamptz - make_interval(days => $2) AND ro.started_at <= $1::timestamptz`,
    [clock.at, hourlyRetentionDays],
  );
  if (recent.length === 0) return 0;
  const counts = await rolloutCounts(q, recent.map((r) => r.policy_id));
  const rows = recent.map((r) => {
    const c = counts.get(r.policy_id)!;
    return {
      policy_id: r.policy_id,
      version: r.version,
      reached: c.total,
      compliant: c.compliant,
      pending: c.pending,
      error: c.error,
      non_compliant: c.non_compliant,
      inapplicable: c.inapplicable,
    };
  });
  await q.query(
    `INSERT INTO policy_trend_points (policy_id, bucket, version, sampled_at, reached, compliant, pending, error,
       non_compliant, inapplicable)
     SELECT u.policy_id, $1, u.version, $2, u.reached, u.compliant, u.pending, u.error, u.non_compliant,
            u.inapplicable
       FROM jsonb_to_recordset($3::text::jsonb) AS u(policy_id uuid, version int, reached int, compliant int,
            pending int, error int, non_compliant int, inapplicable int)
     ON CONFLICT (policy_id, bucket) DO NOTHING`,
    [clock.hour, clock.at, JSON.stringify(rows)],
  );
  return rows.length;
}

/** Deletes the points past their retention (a few rows each hour, found by the primary keys' order). */
async function purge(q: Queryable, at: Date, retention: TrendRetention): Promise<void> {
  await q.query(
    `DELETE FROM fleet_trend_points
      WHERE (granularity = 'hour' AND bucket < $1::timestamptz - make_interval(days => $2))
         OR (granularity = 'day' AND bucket < $1::timestamptz - make_interval(days => $3))`,
    [at, retention.hourlyRetentionDays, retention.dailyRetentionDays],
  );
  await q.query(
    "DELETE FROM policy_trend_points WHERE bucket < $1::timestamptz - make_interval(days => $2)",
    [at, retention.hourlyRetentionDays],
  );
}
