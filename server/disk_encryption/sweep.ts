/**
 * The periodic check that turns aged recovery keys into rotation tasks. Age is otherwise only looked at when
 * a node reports; a node that reports rarely still gets its rotation on time. Every replica may run it: the
 * one-pending-task-per-volume index makes a second sweep a no-op.
 */
import type { ServerContext } from "../context.ts";
import { sweepDueRotations } from "./escrow.ts";

/** Starts the sweep (first run after one interval); returns its stop function. */
export function startRotationSweep(ctx: ServerContext, intervalMs = 3_600_000): () => Promise<void> {
  let running: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    running = sweepDueRotations(ctx.db).catch((err) =>
      ctx.log.warn("disk encryption: rotation sweep failed", { error: String(err) })
    );
  }, intervalMs);
  return async () => {
    clearInterval(timer);
    await running;
  };
}
