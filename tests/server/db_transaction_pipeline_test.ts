/**
 * Transactions stay on a connection of their own while other statements queue up behind busy connections.
 * postgres.js 3.4.9's own `sql.begin` can send BEGIN on a connection it did not reserve when that BEGIN fills
 * the connection's pipeline (porsager/postgres#823, #1189): the transaction then fails with
 * UNSAFE_TRANSACTION, or other statements run inside it. Seen here as "initial sync failed" when 1,000 agents
 * connected at once (bench/fanout.ts). Transactions now run on lanes (db_transaction_lanes_test.ts); this
 * keeps the pipelined case covered. PostgreSQL only: PGlite has one connection and no pipeline.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { openPostgres } from "../../server/db/mod.ts";

dbTest(
  "transactions commit apart while hundreds of statements are pipelined behind busy connections",
  async (_db, _t, info) => {
    // A pipeline of 1 puts every queued BEGIN at the boundary where postgres.js skipped the reservation (the
    // default of 100 does the same to every 100th statement queued behind a busy connection).
    const db = await openPostgres(info.url, { max: 2, maxPipeline: 1 });
    try {
      await db.query("CREATE TABLE pipeline_probe (id int PRIMARY KEY, owner int NOT NULL)");
      // The BEGIN that fills a connection's pipeline is the one postgres.js fails to reserve: with both
      // connections busy, the statements queued before the transactions go out in order when a connection
      // frees, up to 100 on it, so each round queues a few more to move the transactions across that boundary.
      let id = 0;
      for (let round = 0; round < 8; round++) {
        const sleepers = [db.query("SELECT pg_sleep(0.1)"), db.query("SELECT pg_sleep(0.1)")];
        const plain = Array.from({ length: 10 + round }, (_, i) => db.query("SELECT $1::int AS n", [i]));
        // Let the plain statements reach the pool's queue first.
        await new Promise((resolve) => setTimeout(resolve, 10));
        const units = Array.from({ length: 6 }, () =>
          db.transaction(async (tx) => {
            const mine = ++id;
            await tx.query("INSERT INTO pipeline_probe (id, owner) VALUES ($1, $2)", [mine, round]);
            const [seen] = await tx.query<{ n: number }>(
              "SELECT count(*)::int AS n FROM pipeline_probe WHERE id = $1",
              [
                mine,
              ],
            );
            return seen.n;
          }));
        const results = await Promise.allSettled([...sleepers, ...plain, ...units]);
        const failed = results.filter((r) => r.status === "rejected") as PromiseRejectedResult[];
        assert.deepEqual(failed.map((f) => String(f.reason).slice(0, 200)), [], `round ${round}`);
      }
      const [count] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM pipeline_probe");
      assert.equal(count.n, 48);
      // Nothing was left open on a pooled connection: a plain statement is outside any transaction.
      const [state] = await db.query<{ open: boolean }>("SELECT now() <> statement_timestamp() AS open");
      assert.equal(state.open, false);
    } finally {
      await db.close();
    }
  },
  { drivers: ["postgres"] },
);

dbTest(
  "a closed pool refuses transactions as it refuses statements (no new connection)",
  async (_db, _t, info) => {
    const db = await openPostgres(info.url, { max: 2 });
    await db.query("SELECT 1");
    await db.close();
    await assert.rejects(db.query("SELECT 1"), /CONNECTION_ENDED|unreachable|unavailable/i);
    await assert.rejects(
      db.transaction((tx) => tx.query("SELECT 1")),
      /CONNECTION_ENDED|unreachable|unavailable/i,
    );
  },
  { drivers: ["postgres"] },
);
