/** Audit retention: rows older than `audit.retention_days` are deleted at start and then every hour. */
import type { Db } from "../db/db.ts";
import type { Logger } from "../core/log.ts";
import type { AuditRecorder } from "./event.ts";

const BATCH = 10_000;

/**
 * Deletes rows older than `days` days in batches (short transactions on a large table); returns the count.
 * With `audit`, each batch and the `audit_log.purge` row recording it commit together (one unit of work per
 * batch), so no row disappears without a trace and no trace claims a purge that rolled back.
 */
export async function purgeAuditLogs(db: Db, days: number, audit?: AuditRecorder): Promise<number> {
  if (days <= 0) return 0;
  let total = 0;
  while (true) {
    const n = await db.unitOfWork(async () => {
      const [{ n }] = await db.query<{ n: number }>(
        `WITH gone AS (
           DELETE FROM audit_logs WHERE id IN (
             SELECT id FROM audit_logs WHERE created_at < now() - make_interval(days => $1) LIMIT $2)
           RETURNING 1)
         SELECT count(*)::int AS n FROM gone`,
        [days, BATCH],
      );
      if (n > 0 && audit) {
        await audit.record({
          action: "audit_log.purge",
          outcome: "success",
          actor: { username: "system" },
          resource: { type: "audit_log" },
          details: { rows: n, retention_days: days },
        });
      }
      return n;
    });
    total += n;
    if (n < BATCH) return total;
  }
}

/** Options of {@link startRetentionJob}. */
export interface RetentionJobOptions {
  db: Db;
  log: Logger;
  audit: AuditRecorder;
  days: number;
  intervalMs?: number;
  /** Extra housekeeping run on the same schedule (expired sessions). */
  alsoRun?: () => Promise<unknown>;
}

/** Runs the purge now and periodically; returns a stop function that waits for a run in progress. */
export function startRetentionJob(options: RetentionJobOptions): () => Promise<void> {
  let running: Promise<void> | undefined;
  const run = () => {
    running ??= (async () => {
      try {
        const n = await purgeAuditLogs(options.db, options.days, options.audit);
        if (n > 0) {
          options.log.info("audit: retention purged old rows", { rows: n, retention_days: options.days });
        }
        await options.alsoRun?.();
      } catch (err) {
        options.log.error("audit: retention run failed", { error: String(err) });
      } finally {
        running = undefined;
      }
    })();
  };
  run();
  const timer = setInterval(run, options.intervalMs ?? 3_600_000);
  Deno.unrefTimer(timer);
  return async () => {
    clearInterval(timer);
    await running;
  };
}
