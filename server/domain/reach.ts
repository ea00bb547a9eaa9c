/**
 * The reach model: which released policy reaches which node (`policy_reach`), and each node's compliance
 * counters (`node_compliance_counts`), kept by migrations/0015, 0017 and 0022.
 *
 * `policy_reach` may lag the binding tables. A binding or policy state change whose policy has more candidate
 * nodes than `svc.reach_inline_nodes` (500) commits with one row in `reach_refresh_queue` instead of a row per
 * node; {@link refreshReachStep} (run by server/hub/read_model_worker.ts in every replica) works the queue off
 * a batch of nodes at a time. The counters always equal the pairs stored, so the fleet views are consistent
 * with each other, just as old as the backlog (`readModelBacklog` in server/metrics/collector.ts; metrics
 * `svc_read_model_pending_changes` and `svc_read_model_lag_seconds`).
 *
 * Who needs what:
 * - What an agent receives is computed from the binding tables directly (hub/snapshot.ts
 *   `loadDeliveredPolicies`), never from `policy_reach`: a change reaches agents at its commit.
 * - Accepting a compliance report checks {@link DELIVERS_SQL} (binding tables), so an agent reporting on a
 *   policy it has just received is not refused while the model catches up.
 * - The compliance lists, node and policy compliance, the dashboard and the metrics read the model
 *   (server/domain/compliance.ts): at 100,000 nodes a join over the binding tables per request is too slow,
 *   and a few seconds of lag after a fleet-wide change is what they may show (the backlog says how much).
 */
import type { Db, Queryable } from "../db/db.ts";

/** NOTIFY channel on which a queued refresh wakes the workers (sent by the migration's trigger functions). */
export const READ_MODEL_CHANNEL = "svc_read_models";

/**
 * Nodes a worker refreshes per transaction unless told otherwise. A batch holds its nodes' counter rows until
 * it commits, so a report of one of them waits at most one batch: 1,000 nodes took ~200 ms on a loaded 2-core
 * machine (bench/binding_change.ts, 100,000 nodes; a report's worst wait 217 ms), half as many half as long,
 * for a catch-up that is a little longer.
 */
export const DEFAULT_BATCH_NODES = 500;

/**
 * SQL condition "policy `p` is delivered to node `n`" (aliases `p` and `n` in scope), exact at every moment:
 * released, and an enabled binding of it to a group the node belongs to. For reads that must not lag.
 */
export const DELIVERS_SQL = `(p.state = 'released' AND EXISTS (
  SELECT 1 FROM policy_bindings b JOIN node_group_members m ON m.node_group_id = b.node_group_id
   WHERE b.policy_id = p.id AND b.state = 'enabled' AND m.node_id = n.id))`;

/** What one {@link refreshReachStep} did. */
export interface ReachStep {
  /** The queue row worked on. */
  jobId: number;
  policyId: string;
  /** Nodes refreshed in this batch. */
  nodes: number;
  /** Rows of the same policy folded into this one (their changes are read by this job from now on). */
  absorbed: number;
  /** The job is finished and its row deleted. */
  done: boolean;
}

/** Options of {@link refreshReachStep}. */
export interface ReachStepOptions {
  /** Nodes per batch (default {@link DEFAULT_BATCH_NODES}). */
  batchNodes?: number;
  /**
   * Runs inside the batch's transaction after its writes, before the commit (tests: a crash there, or locks
   * held open, must leave the queue as it was).
   */
  beforeCommit?: (tx: Queryable, step: ReachStep) => Promise<void>;
}

/**
 * Refreshes one batch of one queued policy in one transaction; undefined when no row is free (the queue is
 * empty, or every row is held by another worker). Started jobs go first, so a job a crashed worker left half
 * done is finished before new ones begin. Safe to run in any number of processes at once.
 */
export async function refreshReachStep(
  db: Db,
  options: ReachStepOptions = {},
): Promise<ReachStep | undefined> {
  const batch = options.batchNodes ?? DEFAULT_BATCH_NODES;
  if (!Number.isInteger(batch) || batch < 1) {
    throw new Error(`batchNodes must be a positive integer, got ${batch}`);
  }
  return await db.transaction(async (tx) => {
    const [job] = await tx.query<{ id: number; policy_id: string; after_node: string | null }>(
      `SELECT id, policy_id, after_node FROM reach_refresh_queue
        ORDER BY after_node IS NULL, id LIMIT 1 FOR UPDATE SKIP LOCKED`,
    );
    if (!job) return undefined;
    // Other rows of this policy that nobody holds committed before this point, so every batch of this job reads
    // their changes from now on: the job restarts from the first node and they go.
    const absorbed = await tx.query<{ enqueued_at: Date }>(
      `DELETE FROM reach_refresh_queue WHERE id IN (
         SELECT id FROM reach_refresh_queue WHERE policy_id = $1 AND id <> $2 FOR UPDATE SKIP LOCKED)
       RETURNING enqueued_at`,
      [job.policy_id, job.id],
    );
    const after = absorbed.length > 0 ? null : job.after_node;
    const candidates = await tx.query<{ node_id: string }>(
      "SELECT node_id FROM reach_candidates($1, $2, $3)",
      [job.policy_id, after, batch],
    );
    const ids = candidates.map((c) => c.node_id);
    if (ids.length > 0) await tx.query("SELECT reach_refresh($1, $2::uuid[])", [job.policy_id, ids]);
    const step: ReachStep = {
      jobId: job.id,
      policyId: job.policy_id,
      nodes: ids.length,
      absorbed: absorbed.length,
      done: ids.length < batch,
    };
    if (step.done) {
      await tx.query("DELETE FROM reach_refresh_queue WHERE id = $1", [job.id]);
    } else {
      const oldest = absorbed.reduce<Date | null>(
        (min, r) => (min === null || r.enqueued_at < min ? r.enqueued_at : min),
        null,
      );
      await tx.query(
        `UPDATE reach_refresh_queue SET after_node = $2,
           enqueued_at = CASE WHEN $3::timestamptz < enqueued_at THEN $3::timestamptz ELSE enqueued_at END
         WHERE id = $1`,
        [job.id, ids[ids.length - 1], oldest],
      );
    }
    await options.beforeCommit?.(tx, step);
    return step;
  });
}

/**
 * Works the queue off until no row is free (tests, benchmarks, and the worker's loop); returns the steps run.
 * Rows held by another worker are left to it.
 */
export async function drainReachQueue(db: Db, options: ReachStepOptions = {}): Promise<number> {
  let steps = 0;
  while (await refreshReachStep(db, options)) steps++;
  return steps;
}
