/**
 * Whether a server's PostgreSQL connections fit the database's limit. Each server process (the main process
 * and every policy worker) opens up to `database.pool_size` connections on demand (half of them transaction
 * lanes), plus {@link FIXED_CONNECTIONS_PER_PROCESS} it holds for its whole life; the limit is only met under
 * load, when PostgreSQL would refuse connections with "too many clients" in the middle of the work. Said once
 * at start instead. docs/operations/capacity.md spells the budget out for replica sets.
 */
import type { Db } from "./db.ts";

/**
 * Connections a server process holds besides its pool: the LISTEN connection (hub notices, live events, the
 * read-model queue), the replica heartbeat's own connection, and the connection that holds the replica's
 * liveness lock. Counted in bench/replica_set.ts: 8 connections per process at pool_size 5.
 */
export const FIXED_CONNECTIONS_PER_PROCESS = 3;

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
  const perProcess = options.poolSize + FIXED_CONNECTIONS_PER_PROCESS;
  const needed = options.processes * perProcess;
  const available = limits.max - limits.reserved;
  if (needed <= available) return undefined;
  return `this server may open ${needed} PostgreSQL connections (${options.processes} process(es) × ` +
    `(database.pool_size ${options.poolSize} + ${FIXED_CONNECTIONS_PER_PROCESS})) but the database allows ${available} ` +
    `(max_connections ${limits.max} - superuser_reserved_connections ${limits.reserved}; ${limits.used} in use ` +
    `now): under load it would refuse connections. Lower database.pool_size or server.policy_workers, or raise ` +
    `max_connections`;
}
