/**
 * Whether a server's PostgreSQL connections fit the database's limit. Each server process (the main process
 * and every policy worker) opens up to `database.pool_size` connections on demand, plus one for LISTEN and one
 * for the replica heartbeat; the limit is only met under load, when PostgreSQL would refuse connections with
 * "too many clients" in the middle of the work. Said once at start instead.
 */
import type { Db } from "./db.ts";

/** The warning to log when the server could exceed `max_connections`, or undefined when it fits. */
export async function connectionBudgetWarning(
  db: Db,
  options: { poolSize: number; processes: number },
): Promise<string | undefined> {
  if (db.driver !== "postgres") return undefined;
  const [limits] = await db.query<{ max: number; reserved: number; used: number }>(
    `SELECT current_setting('max_connections')::int AS max,
            current_setting('superuser_reserved_connections')::int AS reserved,
            (SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend') AS used`,
  );
  const perProcess = options.poolSize + 2;
  const needed = options.processes * perProcess;
  const available = limits.max - limits.reserved;
  if (needed <= available) return undefined;
  return `this server may open ${needed} PostgreSQL connections (${options.processes} process(es) × ` +
    `(database.pool_size ${options.poolSize} + 2)) but the database allows ${available} ` +
    `(max_connections ${limits.max} - superuser_reserved_connections ${limits.reserved}; ${limits.used} in use ` +
    `now): under load it would refuse connections. Lower database.pool_size or server.policy_workers, or raise ` +
    `max_connections`;
}
