/** The start-up warning when a server's connections could exceed PostgreSQL's max_connections. */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { connectionBudgetWarning, FIXED_CONNECTIONS_PER_PROCESS } from "../../server/db/connection_budget.ts";
import { loadConfig } from "../../server/config/config.ts";

dbTest("a pool that could exceed max_connections is named at start, with the fix", async (db) => {
  const [{ max }] = await db.query<{ max: number }>("SELECT current_setting('max_connections')::int AS max");
  // Three processes of pool size `max` cannot fit whatever the server's setting is.
  const warning = await connectionBudgetWarning(db, { poolSize: max, processes: 3 });
  assert.ok(warning, "a warning");
  assert.equal(FIXED_CONNECTIONS_PER_PROCESS, 3, "LISTEN, heartbeat and liveness lock");
  assert.match(warning, new RegExp(`may open ${3 * (max + 3)} PostgreSQL connections`));
  assert.match(warning, new RegExp(`max_connections ${max} - superuser_reserved_connections \\d+`));
  assert.match(warning, /Lower database\.pool_size or server\.policy_workers, or raise max_connections/);
  // A small pool fits.
  assert.equal(await connectionBudgetWarning(db, { poolSize: 2, processes: 1 }), undefined);
}, { drivers: ["postgres"] });

dbTest("the embedded database has no connection budget", async (db) => {
  assert.equal(await connectionBudgetWarning(db, { poolSize: 1000, processes: 50 }), undefined);
}, { drivers: ["pglite"] });

Deno.test("database.pool_size: default 20, set by its variable, refused below 2 naming the variable", async () => {
  const none = "/nonexistent/svc-server.yaml";
  assert.equal((await loadConfig({ path: none, env: {} })).database.poolSize, 20);
  assert.equal((await loadConfig({ path: none, env: { SVC_DATABASE_POOL_SIZE: "8" } })).database.poolSize, 8);
  await assert.rejects(
    loadConfig({ path: none, env: { SVC_DATABASE_POOL_SIZE: "1" } }),
    /SVC_DATABASE_POOL_SIZE: 1 is below the minimum 2/,
  );
});
