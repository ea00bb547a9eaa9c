/** PostgreSQL driver (postgres.js) for the {@link Db} interface. */
import postgres from "postgres";
import { classified, type Db, type NotifyHandler, type Queryable, withUnitsOfWork } from "./db.ts";

/** The error postgres.js gives a statement on an ended pool, for a transaction asked of one. */
const CLOSED = { code: "CONNECTION_ENDED" } as const;

/** Options for {@link openPostgres}. */
export interface PostgresOptions {
  /** Maximum pool size (default 20). */
  max?: number;
  /** Statements postgres.js pipelines onto one busy connection (its `max_pipeline`, default 100). */
  maxPipeline?: number;
}

/** Connects to PostgreSQL at `url` and checks the connection answers. */
export async function openPostgres(url: string, options: PostgresOptions = {}): Promise<Db> {
  const sql = postgres(url, {
    max: options.max ?? 20,
    // Honoured by postgres.js, missing from its types.
    ...({ max_pipeline: options.maxPipeline ?? 100 } as object),
    onnotice: () => {},
    // int8 (oid 20) as a JS number: counts and revisions stay far below 2^53, and PGlite does the same.
    types: {
      bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
    },
    // Prepared statements are planned for their actual parameters at every call (see `wrap` below).
    connection: { application_name: "svc-server", plan_cache_mode: "force_custom_plan" },
  });
  await sql`SELECT 1`;
  // Statements with parameters run as named prepared statements, kept per connection by postgres.js (its
  // `unsafe` does not prepare unless told): PostgreSQL then parses each hot statement once per connection
  // instead of at every call, and plans it with the actual parameters (plan_cache_mode above: the generic
  // plans PostgreSQL would otherwise settle on halved the speed of the compliance list, whose best plan
  // depends on the status asked for). Measured on enrollment (bench/enroll.ts, 2 cores, concurrency 64):
  // PostgreSQL's CPU 3.4-4.0 -> 2.7 ms per enrollment, 125 -> 180 enrollments/s (generic plans: 2.1 ms, 190/s).
  // Statements whose text inlines values (page limits and offsets) prepare one statement per distinct text;
  // a connection holds them until it is replaced (postgres.js ends each connection after 30-60 minutes).
  // Prepared statements need session-level connections, which LISTEN/NOTIFY requires already (no pgbouncer
  // in transaction mode). Statements without parameters (migrations, scripts) keep the simple protocol.
  const wrap = (s: postgres.Sql | postgres.TransactionSql): Queryable => ({
    async query<T>(text: string, params: readonly unknown[] = []) {
      // deno-lint-ignore no-explicit-any
      const rows = await classified(() => s.unsafe(text, params as any[], { prepare: params.length > 0 }));
      return Array.from(rows) as T[];
    },
  });
  const base = wrap(sql);
  // postgres.js refuses statements once ended, but `sql.reserve()` would still open a new connection.
  let ended = false;
  return withUnitsOfWork({
    driver: "postgres" as const,
    query: base.query,
    transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      return classified(async () => {
        // A connection reserved before BEGIN is sent, not postgres.js's `sql.begin`: that one could send
        // BEGIN on a connection it had not reserved when the BEGIN filled the connection's pipeline of
        // statements queued behind busy connections (porsager/postgres#823, #1189; seen as UNSAFE_TRANSACTION
        // when 1,000 agents connected at once), and other callers' statements could then run inside it.
        if (ended) throw Object.assign(new Error("CONNECTION_ENDED: the database pool is closed"), CLOSED);
        const reserved = await sql.reserve();
        try {
          await reserved.unsafe("BEGIN");
          let result: T;
          try {
            result = await fn(wrap(reserved));
          } catch (err) {
            await reserved.unsafe("ROLLBACK").catch(() => {});
            throw err;
          }
          await reserved.unsafe("COMMIT");
          return result;
        } finally {
          reserved.release();
        }
      });
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
    async close() {
      ended = true;
      await sql.end({ timeout: 5 });
    },
  });
}
