/**
 * Connections that each run one PostgreSQL transaction at a time, for the postgres.js driver.
 *
 * postgres.js 3.4.9 hands a pooled connection to a second holder while the first still has it: a connection
 * whose socket reports backpressure ('drain') while it has statements in flight is offered again from its
 * pool, so `sql.reserve()` gave one connection to two transactions at once (seen as a hang of 200 concurrent
 * enrollments: one holder's statements were queued on a connection that the other then owned), and
 * `sql.begin` can send BEGIN on a connection it never reserved (porsager/postgres#823, #1189; fixes #1206,
 * #1218 unreleased). Both live in the pool's bookkeeping, so transactions do not use it: each lane is a
 * postgres.js client of one connection (the mode postgres.js documents as safe for BEGIN), and a lane is
 * lent to one transaction at a time by this module. A transaction's statements then cannot share a
 * connection with anything else, and plain statements (the other pool) cannot wait behind transactions that
 * wait for them.
 */
import type postgres from "postgres";

/** One single-connection client; `closes` counts the connection's losses (a transaction spans one). */
export interface Lane {
  readonly sql: postgres.Sql;
  /** Times the lane's connection closed; a transaction that sees it change lost its connection. */
  closes: number;
  readonly born: number;
}

/**
 * postgres.js replaces its connections after 30-60 minutes, even one idle inside a transaction (which then
 * rolls back). Lanes are made without that timer and replaced here, between transactions, after this long.
 */
export const LANE_LIFETIME_MS = 45 * 60_000;

/** A fixed number of lanes, made on first need, lent first come first served. */
export interface TransactionLanes {
  /** Waits for a free lane (FIFO); refused once closed. */
  acquire(): Promise<Lane>;
  /** Gives a lane back (to the longest waiter, or to the idle set). */
  release(lane: Lane): void;
  /** Refuses waiters and new acquisitions, and ends every lane's connection. */
  close(timeoutSeconds: number): Promise<void>;
}

/**
 * @param size how many lanes (connections) at most.
 * @param open makes a lane's client; it must call `onClose` whenever the client's connection closes.
 * @param closedError the error a waiter or a new acquisition gets once the lanes are closed.
 */
export function transactionLanes(
  size: number,
  open: (onClose: () => void) => postgres.Sql,
  closedError: () => Error,
  now: () => number = Date.now,
): TransactionLanes {
  if (!Number.isInteger(size) || size < 1) {
    throw new Error(`transaction lanes: size must be >= 1, got ${size}`);
  }
  const idle: Lane[] = [];
  const all = new Set<Lane>();
  const waiters: { resolve: (lane: Lane) => void; reject: (err: Error) => void }[] = [];
  let closed = false;

  const make = (): Lane => {
    // The callback runs only when the connection closes, after `lane` exists.
    const lane: Lane = { sql: open(() => lane.closes++), closes: 0, born: now() };
    all.add(lane);
    return lane;
  };

  return {
    acquire() {
      if (closed) return Promise.reject(closedError());
      // The most recently used lane first: its connection is open and its statements prepared.
      const lane = idle.pop() ?? (all.size < size ? make() : undefined);
      if (lane) return Promise.resolve(lane);
      return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
    },
    release(lane) {
      if (closed) return;
      let next = lane;
      if (now() - lane.born >= LANE_LIFETIME_MS) {
        all.delete(lane);
        lane.sql.end({ timeout: 5 }).catch(() => {});
        next = make();
      }
      const waiter = waiters.shift();
      if (waiter) waiter.resolve(next);
      else idle.push(next);
    },
    async close(timeoutSeconds) {
      closed = true;
      for (const waiter of waiters.splice(0)) waiter.reject(closedError());
      idle.length = 0;
      await Promise.all([...all].map((lane) => lane.sql.end({ timeout: timeoutSeconds })));
    },
  };
}
