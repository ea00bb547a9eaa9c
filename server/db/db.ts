/**
 * The one database interface the server uses. Two drivers implement it with the same SQL: PostgreSQL through
 * postgres.js when `database.url` is set, and embedded PGlite (real Postgres in WASM) otherwise.
 *
 * Parameters are positional (`$1`, `$2`, …). `bigint`/`int8` columns come back as JavaScript numbers,
 * `timestamptz` as `Date`, `jsonb` parsed, arrays as arrays, in both drivers.
 *
 * Units of work: {@link Db.unitOfWork} makes one transaction ambient (AsyncLocalStorage) for everything `fn`
 * awaits, begun by the first statement. Any `query`, `transaction` or `notify` on the same `Db` from inside — also through
 * a handle captured long before, as route handlers do with `ctx.db` — joins it (a nested `transaction`
 * becomes a savepoint). That is how a REST change and its audit row commit together or not at all without
 * every handler passing a transaction around. Work that must only happen once the change is durable (syslog
 * forwarding) is queued with {@link afterCommit}. LISTEN callbacks never run inside a caller's unit.
 */
import { AsyncLocalStorage } from "node:async_hooks";

/** Something that runs SQL: the database itself or an open transaction. */
export interface Queryable {
  /** Runs one statement and returns its rows. */
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T[]>;
}

/** A lock held by {@link Db.sessionLock}. */
export interface SessionLock {
  /** Takes the lock again when its connection was lost and replaced; resolves whether it is held. */
  ensure(): Promise<boolean>;
  /** Ends the connection, and the lock with it. */
  release(): Promise<void>;
}

/** Callback for LISTEN; receives the NOTIFY payload. */
export type NotifyHandler = (payload: string) => void;

/** The server's database handle. */
export interface Db extends Queryable {
  /** `postgres` or `pglite`: only for logs and metrics, never for branching SQL. */
  readonly driver: "postgres" | "pglite";
  /**
   * Runs `fn` inside one transaction; commits when it resolves, rolls back when it throws.
   * `NOTIFY`s issued inside (see {@link notifyIn}) are delivered only if the transaction commits.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * Subscribes to a channel; resolves to an unsubscribe function. `onRelisten` runs each time the
   * subscription is set up again after its connection was lost (PostgreSQL): notifications sent in between
   * were never delivered, so a listener that cannot catch up from a log must assume everything changed.
   */
  listen(channel: string, handler: NotifyHandler, onRelisten?: () => void): Promise<() => Promise<void>>;
  /** Sends a notification outside any transaction. */
  notify(channel: string, payload: string): Promise<void>;
  /** Closes every connection. */
  close(): Promise<void>;
  /**
   * PostgreSQL only: takes the session-level advisory lock `(classId, hashtext(key))` on a connection of its
   * own that is never recycled, so the lock lives exactly as long as this process (PostgreSQL frees it as soon
   * as the process dies, kill -9 included). Other processes learn whether the holder is alive by trying it.
   */
  sessionLock?(classId: number, key: string): Promise<SessionLock>;
  /**
   * Runs `fn` as one unit of work: every statement issued on this `Db` while `fn` runs (directly or from
   * anything it awaits) belongs to one transaction that commits when `fn` resolves and rolls back when it
   * throws. Called inside a unit already, `fn` simply joins it.
   */
  unitOfWork<T>(fn: () => Promise<T>): Promise<T>;
}

/** A driver's handle before units of work are added by {@link withUnitsOfWork}. */
export type DriverDb = Omit<Db, "unitOfWork">;

interface UnitScope {
  owner: object;
  /** The unit's transaction, begun by the first statement (so work before it holds no connection or lock). */
  tx(): Promise<Queryable>;
  /** False once `fn` settled: late stragglers fall back to the pool instead of a finished transaction. */
  open: boolean;
  afterCommit: (() => void)[];
  afterUnit: (() => Promise<void>)[];
}

const ambient = new AsyncLocalStorage<UnitScope>();
let savepointSeq = 0;

/**
 * Queues `fn` to run after the current unit of work commits (dropped if it rolls back); runs it at once when
 * no unit is open. For side effects that must describe only committed changes (syslog forwarding).
 */
export function afterCommit(fn: () => void): void {
  const scope = ambient.getStore();
  if (scope?.open) scope.afterCommit.push(fn);
  else fn();
}

/** Whether the caller runs inside an open unit of work (its statements join a transaction). */
export function inUnitOfWork(): boolean {
  return ambient.getStore()?.open === true;
}

/**
 * Runs `fn` once the current unit of work has ended, committed or rolled back, outside it; at once when no
 * unit is open. For writes that must outlive a refused request (a failure counter), which a rolled-back unit
 * would otherwise take with it. The unit's caller waits for `fn`; its errors are dropped (the request's own
 * outcome stands).
 */
export async function afterUnit(fn: () => Promise<void>): Promise<void> {
  const scope = ambient.getStore();
  if (scope?.open) scope.afterUnit.push(fn);
  else await fn();
}

async function runAfterUnit(scope: UnitScope): Promise<void> {
  for (const task of scope.afterUnit) await ambient.exit(task).catch(() => {});
}

/** Adds ambient units of work to a driver's handle (both drivers return their handle through this). */
export function withUnitsOfWork<D extends DriverDb>(base: D): D & Db {
  const owner = {};
  const current = (): UnitScope | undefined => {
    const scope = ambient.getStore();
    return scope?.open && scope.owner === owner ? scope : undefined;
  };
  return {
    ...base,
    async query<T>(sql: string, params?: readonly unknown[]): Promise<T[]> {
      const scope = current();
      return scope ? await (await scope.tx()).query<T>(sql, params) : await base.query<T>(sql, params);
    },
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      const scope = current();
      return scope ? await savepoint(await scope.tx(), fn) : await base.transaction(fn);
    },
    listen(channel: string, handler: NotifyHandler, onRelisten?: () => void) {
      // PGlite delivers notifications while the committing caller's context is still current.
      return base.listen(channel, (payload) => ambient.exit(() => handler(payload)), onRelisten);
    },
    async notify(channel: string, payload: string): Promise<void> {
      const scope = current();
      return scope ? await notifyIn(await scope.tx(), channel, payload) : await base.notify(channel, payload);
    },
    async unitOfWork<T>(fn: () => Promise<T>): Promise<T> {
      if (current()) return await fn();
      // PostgreSQL ends one of two transactions that wait on each other (deadlock) or that cannot both
      // hold under their isolation (serialization failure); nothing of the loser was kept, so the unit is
      // run again from the start rather than answering a 500 for a request that was never wrong.
      for (let attempt = 1;; attempt++) {
        try {
          return await runUnit(fn);
        } catch (err) {
          if (attempt >= UNIT_ATTEMPTS || !isTransientConflict(err)) throw err;
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));
        }
      }
    },
  };

  async function runUnit<T>(fn: () => Promise<T>): Promise<T> {
    let begun: Promise<Queryable> | undefined;
    let settle: (commit: boolean) => void = () => {};
    // Never rejects (an unawaited rejection would end the process); the outcome is read after `fn`.
    let done: Promise<{ ok: true } | { ok: false; err: unknown }> | undefined;
    const scope: UnitScope = {
      owner,
      open: true,
      afterCommit: [],
      afterUnit: [],
      tx() {
        begun ??= new Promise<Queryable>((resolveTx, rejectTx) => {
          const decided = new Promise<boolean>((resolve) => settle = resolve);
          done = base.transaction(async (tx) => {
            resolveTx(tx);
            if (!(await decided)) throw new UnitRolledBack();
          }).then(() => ({ ok: true as const }), (err) => {
            rejectTx(err);
            return { ok: false as const, err };
          });
        });
        return begun;
      },
    };
    let result: T;
    try {
      result = await ambient.run(scope, fn);
    } catch (err) {
      scope.open = false;
      settle(false);
      await done;
      await runAfterUnit(scope);
      throw err;
    }
    scope.open = false;
    settle(true);
    const outcome = await done;
    await runAfterUnit(scope);
    if (outcome && !outcome.ok) throw outcome.err;
    for (const task of scope.afterCommit) task();
    return result;
  }
}

/** How often a unit of work is tried when PostgreSQL ends it for a conflict with a concurrent one. */
const UNIT_ATTEMPTS = 4;

/** SQLSTATE 40001 (serialization_failure) and 40P01 (deadlock_detected): safe to run the unit again. */
export function isTransientConflict(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return code === "40001" || code === "40P01";
}

/** Thrown inside a unit's transaction to roll it back after `fn` failed (never leaves the unit). */
class UnitRolledBack extends Error {}

async function savepoint<T>(tx: Queryable, fn: (tx: Queryable) => Promise<T>): Promise<T> {
  const name = `svc_sp_${++savepointSeq}`;
  await tx.query(`SAVEPOINT ${name}`);
  let result: T;
  try {
    result = await fn(tx);
  } catch (err) {
    await tx.query(`ROLLBACK TO SAVEPOINT ${name}`).catch(() => {});
    throw err;
  }
  await tx.query(`RELEASE SAVEPOINT ${name}`);
  return result;
}

/**
 * The database cannot be reached (refused or lost connection, server shutting down, database gone, embedded
 * database closed). Both drivers turn such failures into this one type, so the transports can answer "try
 * again later" (HTTP 503 with Retry-After, gRPC UNAVAILABLE) instead of treating them as bugs.
 */
export class DatabaseUnavailableError extends Error {
  constructor(cause: unknown) {
    super("the database is unreachable", { cause });
    this.name = "DatabaseUnavailableError";
  }
}

/** Network-level codes of postgres.js and Deno's sockets that mean the connection is not there. */
const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "CONNECTION_CLOSED",
  "CONNECTION_DESTROYED",
  "CONNECTION_ENDED",
  "CONNECT_TIMEOUT",
]);

/**
 * PostgreSQL SQLSTATEs that mean the server or database is not available: connection exceptions (08…),
 * operator intervention (57P01 terminated, 57P02 crash, 57P03 starting up or shutting down), too many
 * connections (53300), and a database that no longer exists (3D000).
 */
function unavailableSqlState(code: string): boolean {
  return code.startsWith("08") || ["57P01", "57P02", "57P03", "53300", "3D000"].includes(code);
}

/** `err` as a {@link DatabaseUnavailableError} when it is a connection failure; otherwise `err` itself. */
export function classifyDatabaseError(err: unknown): unknown {
  if (err instanceof DatabaseUnavailableError) return err;
  const code = (err as { code?: unknown })?.code;
  if (typeof code === "string" && (CONNECTION_CODES.has(code) || unavailableSqlState(code))) {
    return new DatabaseUnavailableError(err);
  }
  if (err instanceof Error && err.message === "PGlite is closed") return new DatabaseUnavailableError(err);
  if (err instanceof Deno.errors.ConnectionRefused || err instanceof Deno.errors.ConnectionReset) {
    return new DatabaseUnavailableError(err);
  }
  return err;
}

/**
 * Whether `err` (or an error it was caused by) says the storage under the data is full: PostgreSQL's
 * `disk_full` (SQLSTATE 53100, which PGlite raises too when its data directory fills up), or a file write that
 * failed with ENOSPC or EDQUOT (Deno and Node carry these as `code`). Such a write fails until space is freed,
 * then works again at once: the transports answer "storage full, retry later" rather than a bug.
 */
export function isStorageFull(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (code === "53100" || code === "ENOSPC" || code === "EDQUOT") return true;
  }
  return false;
}

/** Runs `op`, rethrowing connection failures as {@link DatabaseUnavailableError}. */
export async function classified<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    throw classifyDatabaseError(err);
  }
}

/** Queues a notification inside a transaction (delivered at commit, dropped on rollback). */
export async function notifyIn(q: Queryable, channel: string, payload: string): Promise<void> {
  await q.query("SELECT pg_notify($1, $2)", [channel, payload]);
}

/** First row or undefined. */
export async function queryOne<T = Record<string, unknown>>(
  q: Queryable,
  sql: string,
  params?: readonly unknown[],
): Promise<T | undefined> {
  const rows = await q.query<T>(sql, params);
  return rows[0];
}
