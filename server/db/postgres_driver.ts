/** PostgreSQL driver (postgres.js) for the {@link Db} interface. */
import postgres from "postgres";
import { classified, type Db, type NotifyHandler, type Queryable, withUnitsOfWork } from "./db.ts";

/** Options for {@link openPostgres}. */
export interface PostgresOptions {
  /** Maximum pool size (default 20). */
  max?: number;
}

/** Connects to PostgreSQL at `url` and checks the connection answers. */
export async function openPostgres(url: string, options: PostgresOptions = {}): Promise<Db> {
  const sql = postgres(url, {
    max: options.max ?? 20,
    onnotice: () => {},
    // int8 (oid 20) as a JS number: counts and revisions stay far below 2^53, and PGlite does the same.
    types: {
      bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
    },
    connection: { application_name: "svc-server" },
  });
  await sql`SELECT 1`;
  const wrap = (s: postgres.Sql | postgres.TransactionSql): Queryable => ({
    async query<T>(text: string, params: readonly unknown[] = []) {
      // deno-lint-ignore no-explicit-any
      const rows = await classified(() => s.unsafe(text, params as any[]));
      return Array.from(rows) as T[];
    },
  });
  const base = wrap(sql);
  return withUnitsOfWork({
    driver: "postgres" as const,
    query: base.query,
    transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      return classified(() => sql.begin((tx) => fn(wrap(tx))) as Promise<T>);
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
      await sql.end({ timeout: 5 });
    },
  });
}
