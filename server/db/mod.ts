/** Database access: the {@link Db} interface, its two drivers and migrations. */
export * from "./db.ts";
export { openPostgres } from "./postgres_driver.ts";
export { openPglite } from "./pglite_driver.ts";
export { migrate, readMigrations } from "./migrate.ts";
import type { Db } from "./db.ts";
import { openPostgres } from "./postgres_driver.ts";
import { openPglite } from "./pglite_driver.ts";
import { join } from "node:path";

/** Opens PostgreSQL when `url` is set, otherwise the embedded database under `{dataDir}/db`. */
export async function openDatabase(options: { url: string; dataDir: string }): Promise<Db> {
  if (options.url) return await openPostgres(options.url);
  return await openPglite({ dataDir: join(options.dataDir, "db") });
}
