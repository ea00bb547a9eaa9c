/**
 * Fails fast while PostgreSQL is known to be down.
 *
 * Without it, every statement during an outage waits for postgres.js to connect again, and postgres.js waits
 * longer before each attempt (its backoff grows to 10–20 s), so a REST answer of "the database is
 * unreachable" took 8–12 s and a metrics scrape, a dozen statements in a row, over 10 s. Here, a statement
 * that fails for want of a connection makes one probe on a connection of its own; when the probe fails too,
 * the database is known down and every statement is refused at once until a probe, repeated every second,
 * gets an answer. A single lost connection (a restarted pooler, a terminated backend) whose probe succeeds
 * changes nothing.
 *
 * @module
 */
import { DatabaseUnavailableError } from "./db.ts";

/** The gate in front of a driver's statements. */
export interface OutageGate {
  /** Throws {@link DatabaseUnavailableError} at once while the database is known down. */
  check(): void;
  /** Tells the gate a statement failed for want of a connection: confirms with a probe. */
  failed(): void;
  /** Whether the database is known down (the last probe failed). */
  readonly down: boolean;
  /** Stops probing. */
  close(): void;
}

/** Options of {@link outageGate}. */
export interface OutageGateOptions {
  /** Pause between probes while down (default 1 s). */
  intervalMs?: number;
  /** Longest a probe may take before it counts as failed (default 5 s). */
  probeTimeoutMs?: number;
  /** Called when the database goes down or comes back. */
  onChange?: (down: boolean) => void;
}

/**
 * @param probe resolves when the database answers a trivial statement on a connection of its own (not one
 *   of the pool, whose reconnection the outage slows down).
 */
export function outageGate(probe: () => Promise<void>, options: OutageGateOptions = {}): OutageGate {
  const intervalMs = options.intervalMs ?? 1000;
  const probeTimeoutMs = options.probeTimeoutMs ?? 5000;
  let down = false;
  let probing = false;
  let closed = false;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const probeOnce = async (): Promise<boolean> => {
    let timeout: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([
        probe(),
        new Promise((_, reject) => {
          timeout = setTimeout(() => reject(new Error("probe timed out")), probeTimeoutMs);
          Deno.unrefTimer(timeout);
        }),
      ]);
      return true;
    } catch {
      return false;
    } finally {
      clearTimeout(timeout);
    }
  };

  const set = (value: boolean) => {
    if (down === value) return;
    down = value;
    options.onChange?.(value);
  };

  const run = async () => {
    if (probing || closed) return;
    probing = true;
    try {
      const answered = await probeOnce();
      if (closed) return;
      set(!answered);
      if (!answered) {
        timer = setTimeout(() => void run(), intervalMs);
        // Probing never keeps a process alive that has nothing else to do.
        Deno.unrefTimer(timer);
      }
    } finally {
      probing = false;
    }
  };

  return {
    check() {
      if (down) {
        throw new DatabaseUnavailableError(
          new Error("the database did not answer the last probe; statements are refused until it does"),
        );
      }
    },
    failed() {
      if (!down) void run();
    },
    get down() {
      return down;
    },
    close() {
      closed = true;
      clearTimeout(timer);
    },
  };
}
