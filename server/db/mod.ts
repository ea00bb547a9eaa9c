/** Database access: the {@link Db} interface, its two drivers and migrations. */
export * from "./db.ts";
export { openPostgres } from "./postgres_driver.ts";
export { openPglite } from "./pglite_driver.ts";
export { knownMigrations, migrate, readMigrations } from "./migrate.ts";
import type { Db } from "./db.ts";
import { openPostgres } from "./postgres_driver.ts";
import { openPglite } from "./pglite_driver.ts";
import { join } from "node:path";

/**
 * Opens PostgreSQL when `url` is set, otherwise the embedded database under `{dataDir}/db`.
 *
 * The embedded database is one process's files: a second process opening them (a second server, or an admin
 * command while the server runs) would corrupt them. The opener therefore holds an exclusive lock on
 * `{dataDir}/db.lock` until `close()`, and a second opener is refused with a message saying what to do.
 */
export async function openDatabase(
  options: { url: string; dataDir: string; poolSize?: number; onOutage?: (down: boolean) => void },
): Promise<Db> {
  if (options.url) {
    return await openPostgres(options.url, { max: options.poolSize, onOutage: options.onOutage });
  }
  await Deno.mkdir(options.dataDir, { recursive: true, mode: 0o700 });
  const lockPath = join(options.dataDir, "db.lock");
  const lock = await Deno.open(lockPath, { read: true, write: true, create: true, mode: 0o600 });
  if (!await lock.tryLock(true)) {
    lock.close();
    throw new Error(
      `the embedded database in ${options.dataDir} is in use by another svc-server process ` +
        "(stop that server first, or use PostgreSQL with database.url)",
    );
  }
  let db: Db;
  try {
    db = await openPglite({ dataDir: join(options.dataDir, "db") });
  } catch (err) {
    lock.close();
    throw err;
  }
  const close = db.close.bind(db);
  return Object.assign(db, {
    async close() {
      try {
        await close();
      } finally {
        try {
          lock.close();
        } catch { /* already closed */ }
      }
    },
  });
}

/**
 * A handle for a replica's liveness heartbeat, which must not wait behind the main pool's work (a busy replica
 * would be declared dead): a one-connection pool of its own on PostgreSQL; on the embedded database, `db`
 * itself (one connection in all). A caller closes the handle only when it is not `db`.
 */
export async function openHeartbeatDatabase(db: Db, url: string): Promise<Db> {
  if (db.driver !== "postgres" || !url) return db;
  return await openPostgres(url, { max: 1 });
}
