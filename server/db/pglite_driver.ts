/** Embedded PGlite driver for the {@link Db} interface: real Postgres in WASM, one process, no server. */
import { PGlite } from "@electric-sql/pglite";
import { classified, type Db, type NotifyHandler, type Queryable, withUnitsOfWork } from "./db.ts";
import { yieldAfterLongWork } from "../core/loop_turn.ts";

/** Options for {@link openPglite}. */
export interface PgliteOptions {
  /** A data directory to use (created when missing); omitted = in memory. */
  dataDir?: string;
  /** A tarball from `dumpDataDir` to start from (test template clones). */
  loadDataDir?: Blob | File;
}

/** Opens (or creates) an embedded database. */
export async function openPglite(options: PgliteOptions = {}): Promise<Db & { pglite: PGlite }> {
  if (options.dataDir) await Deno.mkdir(options.dataDir, { recursive: true, mode: 0o700 });
  const pg = await PGlite.create(
    options.dataDir,
    options.loadDataDir ? { loadDataDir: options.loadDataDir } : {},
  );
  const wrap = (q: Pick<PGlite, "query">): Queryable => ({
    async query<T>(text: string, params: readonly unknown[] = []) {
      const started = performance.now();
      const res = await classified(() => q.query<T>(text, params as unknown[]));
      // A statement runs on this thread: after a long one (a large value), other work gets a turn before
      // the caller's next statement, so a transaction of several never holds the loop for their sum.
      await yieldAfterLongWork(started);
      return res.rows;
    },
  });
  const base = wrap(pg);
  return withUnitsOfWork({
    driver: "pglite" as const,
    pglite: pg,
    query: base.query,
    transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      return classified(() => pg.transaction((tx) => fn(wrap(tx))));
    },
    async listen(channel: string, handler: NotifyHandler) {
      const unsub = await classified(() => pg.listen(channel, handler));
      return async () => await unsub();
    },
    async notify(channel: string, payload: string) {
      await classified(() => pg.query("SELECT pg_notify($1, $2)", [channel, payload]));
    },
    async close() {
      if (!pg.closed) await pg.close();
    },
  });
}
