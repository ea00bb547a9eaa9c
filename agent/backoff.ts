/**
 * Reconnect delays: 1 s, doubling, capped at 60 s (spec, Limits), and reset once a stream has
 * been healthy (it delivered a complete snapshot), so a node that reconnects after a long good
 * run waits 1 s again rather than the last cap.
 *
 * @module
 */

/** Options of {@linkcode Backoff}. */
export interface BackoffOptions {
  /** First delay in milliseconds; default 1000. */
  initialMs?: number;
  /** Largest delay in milliseconds; default 60 000. */
  maxMs?: number;
}

/** A doubling delay with a cap and a reset. */
export class Backoff {
  readonly #initial: number;
  readonly #max: number;
  #current: number;

  constructor(options: BackoffOptions = {}) {
    this.#initial = options.initialMs ?? 1000;
    this.#max = options.maxMs ?? 60_000;
    this.#current = this.#initial;
  }

  /** The delay to wait now; the following call returns twice as much, up to the cap. */
  next(): number {
    const delay = this.#current;
    this.#current = Math.min(this.#current * 2, this.#max);
    return delay;
  }

  /** Starts over from the first delay. */
  reset(): void {
    this.#current = this.#initial;
  }
}

/** Resolves after `ms`, or early (without error) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
