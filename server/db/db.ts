/**
 * The one database interface the server uses. Two drivers implement it with the same SQL: PostgreSQL through
 * postgres.js when `database.url` is set, and embedded PGlite (real Postgres in WASM) otherwise.
 *
 * Parameters are positional (`$1`, `$2`, …). `bigint`/`int8` columns come back as JavaScript numbers,
 * `timestamptz` as `Date`, `jsonb` parsed, arrays as arrays, in both drivers.
 *
 * Units of work: {@link Db.unitOfWork} opens one transaction and makes it ambient (AsyncLocalStorage) for
 * everything `fn` awaits. Any `query`, `transaction` or `notify` on the same `Db` from inside — also through
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
  /** Subscribes to a channel; resolves to an unsubscribe function. */
  listen(channel: string, handler: NotifyHandler): Promise<() => Promise<void>>;
  /** Sends a notification outside any transaction. */
  notify(channel: string, payload: string): Promise<void>;
  /** Closes every connection. */
  close(): Promise<void>;
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
  tx: Queryable;
  /** False once `fn` settled: late stragglers fall back to the pool instead of a finished transaction. */
  open: boolean;
  afterCommit: (() => void)[];
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

/** Adds ambient units of work to a driver's handle (both drivers return their handle through this). */
export function withUnitsOfWork<D extends DriverDb>(base: D): D & Db {
  const owner = {};
  const current = (): UnitScope | undefined => {
    const scope = ambient.getStore();
    return scope?.open && scope.owner === owner ? scope : undefined;
  };
  return {
    ...base,
    query<T>(sql: string, params?: readonly unknown[]): Promise<T[]> {
      const scope = current();
      return scope ? scope.tx.query<T>(sql, params) : base.query<T>(sql, params);
    },
    transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      const scope = current();
      return scope ? savepoint(scope.tx, fn) : base.transaction(fn);
    },
    listen(channel: string, handler: NotifyHandler) {
      // PGlite delivers notifications while the committing caller's context is still current.
      return base.listen(channel, (payload) => ambient.exit(() => handler(payload)));
    },
    notify(channel: string, payload: string): Promise<void> {
      const scope = current();
      return scope ? notifyIn(scope.tx, channel, payload) : base.notify(channel, payload);
    },
    async unitOfWork<T>(fn: () => Promise<T>): Promise<T> {
      if (current()) return await fn();
      const scope: UnitScope = { owner, tx: base, open: true, afterCommit: [] };
      try {
        const result = await base.transaction(async (tx) => {
          scope.tx = tx;
          try {
            return await ambient.run(scope, fn);
          } finally {
            scope.open = false;
          }
        });
        for (const task of scope.afterCommit) task();
        return result;
      } finally {
        scope.open = false;
      }
    },
  };
}

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
