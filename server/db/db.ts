/**
 * The one database interface the server uses. Two drivers implement it with the same SQL: PostgreSQL through
 * postgres.js when `database.url` is set, and embedded PGlite (real Postgres in WASM) otherwise.
 *
 * Parameters are positional (`$1`, `$2`, …). `bigint`/`int8` columns come back as JavaScript numbers,
 * `timestamptz` as `Date`, `jsonb` parsed, arrays as arrays, in both drivers.
 */

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
