/**
 * The worker that brings the reach model up to date after large binding and policy changes (server/domain/
 * reach.ts, migrations/0022), and folds the node groups' size deltas. One runs in every replica's main process; they share the queue through
 * FOR UPDATE SKIP LOCKED, so any number may run and a replica that dies mid-batch loses only that batch's
 * uncommitted transaction, which the next worker to take the row does again.
 *
 * It wakes on the `svc_read_models` notification a queued change sends at commit, and polls besides: a
 * notification lost with a dropped LISTEN connection, or a row left by a replica that died, is picked up within
 * one poll interval. Between batches it gives the loop a turn, so requests interleave with a long catch-up
 * (with the embedded database they share its one connection).
 */
import type { Db } from "../db/db.ts";
import type { Logger } from "../core/log.ts";
import { DEFAULT_BATCH_NODES, READ_MODEL_CHANNEL, refreshReachStep } from "../domain/reach.ts";
import { foldGroupSizes } from "../domain/node_groups.ts";
import { foldFleetTotals, foldNodeStatusSizes } from "../db/fleet_totals.ts";

/** Options of {@link startReadModelWorker}. */
export interface ReadModelWorkerOptions {
  /** Nodes per batch transaction (default {@link DEFAULT_BATCH_NODES}). */
  batchNodes?: number;
  /** How often the queue is looked at without a notification (default 5 s). */
  pollMs?: number;
}

/** A running worker. */
export interface ReadModelWorker {
  /** Looks at the queue now (as a notification does). */
  wake(): void;
  /** Stops after the batch under way. */
  stop(): Promise<void>;
}

/** Longest pause after a failed batch (the database away, a deadlock) before trying again. */
const MAX_BACKOFF_MS = 30_000;

/** Starts the worker on `db`; it looks at the queue at once (rows left from before a restart). */
export async function startReadModelWorker(
  ctx: { db: Db; log: Logger },
  options: ReadModelWorkerOptions = {},
): Promise<ReadModelWorker> {
  const { db, log } = ctx;
  const batchNodes = options.batchNodes ?? DEFAULT_BATCH_NODES;
  let stopped = false;
  let again = false;
  let running: Promise<void> | undefined;
  let failures = 0;
  let retry: ReturnType<typeof setTimeout> | undefined;

  async function drain(): Promise<void> {
    while (!stopped) {
      const step = await refreshReachStep(db, { batchNodes });
      if (!step) return;
      if (step.done) log.debug("read models: policy reach refreshed", { policyId: step.policyId });
      // A turn of the loop between batches, so a long catch-up never holds the process.
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
  }

  function wake(): void {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = (async () => {
      do {
        again = false;
        try {
          await drain();
          failures = 0;
        } catch (err) {
          failures++;
          const pause = Math.min(MAX_BACKOFF_MS, 250 * 2 ** Math.min(failures, 7));
          log.warn("read models: a reach refresh batch failed; trying again", {
            error: String(err),
            retryInMs: pause,
          });
          clearTimeout(retry);
          retry = setTimeout(wake, pause);
        }
      } while (again && !stopped && failures === 0);
      running = undefined;
    })();
  }

  const unlisten = await db.listen(READ_MODEL_CHANNEL, wake, wake);
  // Group sizes, fleet compliance totals and node status counts are kept as deltas (migrations/0022, 0024);
  // folding them now and then keeps each a few rows. Each fold is its own statement: one failing leaves the
  // others done.
  let folding: Promise<void> | undefined;
  const poll = setInterval(() => {
    wake();
    folding ??= Promise.all([foldGroupSizes(db), foldFleetTotals(db), foldNodeStatusSizes(db)]).then(() => {})
      .catch((err) =>
        log.warn("read models: folding group sizes or fleet totals failed; trying again later", {
          error: String(err),
        })
      ).finally(() => folding = undefined);
  }, options.pollMs ?? 5_000);
  wake();
  return {
    wake,
    async stop() {
      stopped = true;
      clearInterval(poll);
      clearTimeout(retry);
      await unlisten().catch(() => {});
      await running;
      await folding;
    },
  };
}
