/**
 * Between syncs, the installed PRESENT and LATEST applications are updated every `update_interval_hours`, never at
 * the same time as a sync: syncs and updates run one at a time through {@linkcode PeriodicUpdates.exclusive}.
 *
 * @module
 */

import type { EnforcerIO } from "../../sync/types.ts";
import { errorText, type FlatpakCli } from "./cli.ts";

/** What the periodic update does: which refs, every how many milliseconds, with which io. */
export interface UpdatePlan {
  io: EnforcerIO;
  refs: string[];
  intervalMs: number;
}

/** See the module documentation. */
export class PeriodicUpdates {
  readonly #cli: FlatpakCli;
  #lock: Promise<unknown> = Promise.resolve();
  #plan: UpdatePlan | undefined;
  #timer: { id: ReturnType<typeof setInterval>; intervalMs: number } | undefined;

  constructor(cli: FlatpakCli) {
    this.#cli = cli;
  }

  /** Runs `work` once no sync or update runs. */
  exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#lock.then(work, work);
    this.#lock = run.catch(() => {});
    return run;
  }

  /** What the next updates do, from the last sync; undefined without policies. */
  plan(next: UpdatePlan | undefined): void {
    this.#plan = next;
  }

  /** Starts, restarts or stops the timer after a sync. */
  schedule(): void {
    if (this.#timer && this.#timer.intervalMs !== this.#plan?.intervalMs) {
      clearInterval(this.#timer.id);
      this.#timer = undefined;
    }
    if (!this.#plan || this.#timer) return;
    const id = setInterval(() => void this.#update(), this.#plan.intervalMs);
    // The timer never keeps the agent process alive on its own.
    Deno.unrefTimer(id as unknown as number);
    this.#timer = { id, intervalMs: this.#plan.intervalMs };
  }

  #update(): Promise<void> {
    return this.exclusive(async () => {
      const plan = this.#plan;
      if (!plan) return;
      for (const ref of plan.refs) {
        const out = await this.#cli.transfer(plan.io, ["--system", "update", "-y", "--noninteractive", ref]);
        if (out.success) plan.io.logger.info("flatpak periodic update", { ref });
        else plan.io.logger.warn("flatpak periodic update failed", { ref, error: errorText(out) });
      }
    });
  }
}
