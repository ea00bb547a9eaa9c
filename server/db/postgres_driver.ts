/** PostgreSQL driver (postgres.js) for the {@link Db} interface. */
import postgres from "postgres";
import {
  classified,
  DatabaseUnavailableError,
  type Db,
  type NotifyHandler,
  type Queryable,
  type SessionLock,
  withUnitsOfWork,
} from "./db.ts";
import { outageGate } from "./outage_gate.ts";
import { type Lane, transactionLanes } from "./transaction_lanes.ts";

/**
 * Longest a connection may take to be set up, in seconds (postgres.js's `connect_timeout`, default 30): a
 * database host that drops packets is reported unreachable after this, not after half a minute.
 */
const CONNECT_TIMEOUT_SECONDS = 5;

/**
 * Seconds a client waits before connecting again after a failed attempt: 50 ms doubling to 1 s. postgres.js's
 * own backoff grows to 10–20 s, and a statement waiting for the connection waits that long; while the database
 * is known down no statement reaches the pool anyway (outage_gate.ts), so the short pause costs nothing.
 */
function reconnectBackoff(retries: number): number {
  return Math.min(0.05 * 2 ** retries, 1);
}

/** The error postgres.js gives a statement on an ended pool, for a transaction asked of one. */
const closedError = () =>
  Object.assign(new Error("CONNECTION_ENDED: the database pool is closed"), { code: "CONNECTION_ENDED" });

/** Options for {@link openPostgres}. */
export interface PostgresOptions {
  /**
   * Connections in all (default 20): half of them (at least one) run transactions, one transaction each at a
   * time, and the rest (at least one) plain statements. Opened on first need.
   */
  max?: number;
  /** Statements postgres.js pipelines onto one busy connection (its `max_pipeline`, default 100). */
  maxPipeline?: number;
  /** Told when the database becomes known down (`true`) and when it answers again (`false`). */
  onOutage?: (down: boolean) => void;
}

/** Connects to PostgreSQL at `url` and checks the connection answers. */
export async function openPostgres(url: string, options: PostgresOptions = {}): Promise<Db> {
  const max = options.max ?? 20;
  const laneCount = Math.max(1, Math.floor(max / 2));
  const clientOptions = {
    // Honoured by postgres.js, missing from its types.
    ...({ max_pipeline: options.maxPipeline ?? 100 } as object),
    onnotice: () => {},
    connect_timeout: CONNECT_TIMEOUT_SECONDS,
    backoff: reconnectBackoff,
    // int8 (oid 20) as a JS number: counts and revisions stay far below 2^53, and PGlite does the same.
    types: {
      bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
    },
    // Prepared statements are planned for their actual parameters at every call (see `run` below).
    connection: { application_name: "svc-server", plan_cache_mode: "force_custom_plan" },
  };
  const sql = postgres(url, { ...clientOptions, max: Math.max(1, max - laneCount) });
  await sql`SELECT 1`;
  // Transactions run on lanes of their own (see transaction_lanes.ts for why not on `sql`'s pool). A lane's
  // connection lives until the lanes replace it between transactions, never inside one.
  const lanes = transactionLanes(
    laneCount,
    (onClose) => postgres(url, { ...clientOptions, max: 1, max_lifetime: null, onclose: onClose }),
    closedError,
  );
  // Statements with parameters run as named prepared statements, kept per connection by postgres.js (its
  // `unsafe` does not prepare unless told): PostgreSQL then parses each hot statement once per connection
  // instead of at every call, and plans it with the actual parameters (plan_cache_mode above: the generic
  // plans PostgreSQL would otherwise settle on halved the speed of the compliance list, whose best plan
  // depends on the status asked for). Measured on enrollment (bench/enroll.ts, 2 cores, concurrency 64):
  // PostgreSQL's CPU 3.4-4.0 -> 2.7 ms per enrollment, 125 -> 180 enrollments/s (generic plans: 2.1 ms, 190/s).
  // Statements whose text inlines values (page limits and offsets) prepare one statement per distinct text;
  // a connection holds them until it is replaced (the pool's after 30-60 minutes, a lane's after 45, between
  // transactions).
  // Prepared statements need session-level connections, which LISTEN/NOTIFY requires already (no pgbouncer
  // in transaction mode). Statements without parameters (migrations, scripts) keep the simple protocol.
  const run = async <T>(s: postgres.Sql, text: string, params: readonly unknown[]): Promise<T[]> => {
    // deno-lint-ignore no-explicit-any
    const rows = await classified(() => s.unsafe(text, params as any[], { prepare: params.length > 0 }));
    return Array.from(rows) as T[];
  };
  // Clients of session locks: closing the database ends them too (every connection closes).
  const locks = new Set<postgres.Sql>();
  // A probe connects afresh every time: a connection of a host that vanished can hang until TCP gives up.
  const gate = outageGate(async () => {
    const probe = postgres(url, { ...clientOptions, max: 1 });
    try {
      await probe`SELECT 1`;
    } finally {
      probe.end({ timeout: 0 }).catch(() => {});
    }
  }, options.onOutage ? { onChange: options.onOutage } : {});
  // The gate is asked before a statement or a transaction starts, never between a transaction's statements: a
  // transaction that began runs to its COMMIT or ROLLBACK on its own connection.
  const gated = async <T>(op: () => Promise<T>): Promise<T> => {
    gate.check();
    try {
      return await op();
    } catch (err) {
      if (err instanceof DatabaseUnavailableError) gate.failed();
      throw err;
    }
  };
  return withUnitsOfWork({
    driver: "postgres" as const,
    query: <T>(text: string, params: readonly unknown[] = []) => gated(() => run<T>(sql, text, params)),
    transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      return gated(() =>
        classified(async () => {
          const lane = await lanes.acquire();
          try {
            return await inTransaction(lane, fn, run);
          } finally {
            lanes.release(lane);
          }
        })
      );
    },
    async listen(channel: string, handler: NotifyHandler, onRelisten?: () => void) {
      // postgres.js calls its listen callback when the LISTEN is first in place and again after every
      // reconnect of the dedicated listening connection; only the later calls mean notices were missed.
      let listened = false;
      const onListen = () => {
        if (listened) onRelisten?.();
        listened = true;
      };
      const sub = await classified(() => sql.listen(channel, (payload) => handler(payload), onListen));
      return () => sub.unlisten();
    },
    async notify(channel: string, payload: string) {
      await classified(() => sql.notify(channel, payload));
    },
    async sessionLock(classId: number, key: string): Promise<SessionLock> {
      // Its own client of one connection, without postgres.js's lifetime timer (which would drop the lock
      // every 30-60 minutes); a lost connection is counted, and `ensure` takes the lock on the new one.
      let closes = 0;
      let heldOn = -1;
      const client = postgres(url, {
        ...clientOptions,
        max: 1,
        max_lifetime: null,
        idle_timeout: 0,
        onclose: () => closes++,
      });
      const ensure = async () => {
        if (heldOn === closes) return true;
        const before = closes;
        const [row] = await classified(() =>
          client.unsafe("SELECT pg_try_advisory_lock($1, hashtext($2)) AS held", [classId, key])
        );
        if (row.held && closes === before) heldOn = before;
        return heldOn === closes;
      };
      await ensure();
      locks.add(client);
      return {
        ensure,
        release: async () => {
          locks.delete(client);
          await client.end({ timeout: 5 });
        },
      };
    },
    async close() {
      gate.close();
      await Promise.all([
        lanes.close(5),
        sql.end({ timeout: 5 }),
        ...[...locks].map((l) => l.end({ timeout: 5 })),
      ]);
      locks.clear();
    },
  });
}

/**
 * Runs `fn` between BEGIN and COMMIT (ROLLBACK when it throws) on a lane. A lane's client reconnects by itself
 * on its next statement, which would then run outside the transaction PostgreSQL rolled back with the lost
 * connection: once the lane's connection closed, every later statement of the transaction, and its COMMIT,
 * fails instead.
 */
async function inTransaction<T>(
  lane: Lane,
  fn: (tx: Queryable) => Promise<T>,
  run: <R>(s: postgres.Sql, text: string, params: readonly unknown[]) => Promise<R[]>,
): Promise<T> {
  // Read before BEGIN: a close between BEGIN's answer and the next line must count as a loss too.
  const closes = lane.closes;
  const intact = () => {
    if (lane.closes !== closes) {
      throw Object.assign(
        new Error("CONNECTION_CLOSED: the database connection was lost inside a transaction (rolled back)"),
        { code: "CONNECTION_CLOSED" },
      );
    }
  };
  await run(lane.sql, "BEGIN", []);
  intact();
  const tx: Queryable = {
    async query<R>(text: string, params: readonly unknown[] = []) {
      intact();
      const rows = await run<R>(lane.sql, text, params);
      intact();
      return rows;
    },
  };
  let result: T;
  try {
    result = await fn(tx);
    intact();
  } catch (err) {
    // A lost connection took the transaction with it; a ROLLBACK would only make the client reconnect.
    if (lane.closes === closes) await run(lane.sql, "ROLLBACK", []).catch(() => {});
    throw err;
  }
  await run(lane.sql, "COMMIT", []);
  return result;
}
