/**
 * Giving the event loop a turn between two pieces of long synchronous work (embedded database statements
 * that moved a large value, stream messages of large policies), so that other requests and agent streams
 * wait for one piece at most, never for their sum. Chained `await`s run as microtasks in the same turn; only
 * a macrotask lets timers, sockets and worker messages in.
 */

/** A piece of work that took longer than this (ms) on the loop is followed by a turn for everything else. */
export const LONG_WORK_MS = 4;

/** Resolves on a later turn of the event loop. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/** {@link nextTurn} when the work that started at `started` (a `performance.now()`) took long; else nothing. */
export async function yieldAfterLongWork(started: number): Promise<void> {
  if (performance.now() - started > LONG_WORK_MS) await nextTurn();
}
