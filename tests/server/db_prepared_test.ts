/**
 * On PostgreSQL, statements with parameters run as named prepared statements (server/db/postgres_driver.ts),
 * so a hot statement is parsed and planned once per connection; statements without parameters keep the simple
 * protocol (several statements in one text, as migrations send, still work). PostgreSQL only: PGlite runs in
 * process.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";

dbTest("parameterized statements are prepared once per connection and reused", async (db) => {
  // One transaction holds one connection, whose prepared statements pg_prepared_statements lists.
  await db.transaction(async (tx) => {
    const statement = "SELECT $1::int + 1 AS n";
    for (let i = 0; i < 3; i++) {
      const [row] = await tx.query<{ n: number }>(statement, [i]);
      assert.equal(row.n, i + 1);
    }
    const prepared = await tx.query<{ statement: string; calls: number }>(
      "SELECT statement, generic_plans + custom_plans AS calls FROM pg_prepared_statements WHERE statement = $1",
      [statement],
    );
    assert.equal(prepared.length, 1, "the statement was prepared once on this connection");
    assert.equal(Number(prepared[0].calls), 3, "and executed three times");
    // Each call is planned for its own parameters (a generic plan halved the compliance list's speed).
    const [mode] = await tx.query<{ plan_cache_mode: string }>("SHOW plan_cache_mode");
    assert.equal(mode.plan_cache_mode, "force_custom_plan");
    // Without parameters: the simple protocol, which takes several statements in one text.
    await tx.query("CREATE TEMP TABLE simple_probe (n int); INSERT INTO simple_probe VALUES (1)");
    const [count] = await tx.query<{ n: number }>("SELECT count(*)::int AS n FROM simple_probe");
    assert.equal(count.n, 1);
  });
}, { drivers: ["postgres"] });
