/**
 * Units of work that PostgreSQL ends for a conflict with a concurrent one (deadlock, serialization failure)
 * run again instead of failing a request that was never wrong; other errors are not retried. PostgreSQL only:
 * PGlite has one connection, so its transactions never wait on each other.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { isTransientConflict } from "../../server/db/db.ts";
import { toHttpError } from "../../server/http/errors.ts";

/** Resolves once `n` parties have arrived. */
function barrier(n: number): () => Promise<void> {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => open = resolve);
  return () => {
    if (++arrived === n) open();
    return opened;
  };
}

dbTest("two units that deadlock both commit: the loser runs again", async (db) => {
  await db.query("CREATE TABLE retry_probe (id int PRIMARY KEY, n int NOT NULL)");
  await db.query("INSERT INTO retry_probe VALUES (1, 0), (2, 0)");
  const bothHoldTheirFirstRow = barrier(2);
  const runs = [0, 0];
  // Each unit locks one row, waits until the other holds its row, then asks for the other's row: a real
  // deadlock on the first attempt, which PostgreSQL breaks by ending one of them.
  const unit = (me: 0 | 1, first: number, second: number) =>
    db.unitOfWork(async () => {
      runs[me]++;
      await db.query("UPDATE retry_probe SET n = n + 1 WHERE id = $1", [first]);
      if (runs[me] === 1) await bothHoldTheirFirstRow();
      await db.query("UPDATE retry_probe SET n = n + 1 WHERE id = $1", [second]);
      return me;
    });
  const results = await Promise.all([unit(0, 1, 2), unit(1, 2, 1)]);
  assert.deepEqual(results, [0, 1]);
  assert(runs[0] + runs[1] >= 3, `one unit must have run again (runs ${runs})`);
  // Nothing of the ended attempt was kept: each row was incremented once per committed unit.
  const rows = await db.query<{ n: number }>("SELECT n FROM retry_probe ORDER BY id");
  assert.deepEqual(rows.map((r) => r.n), [2, 2]);
}, { drivers: ["postgres"] });

dbTest("a unit that fails for another reason is not run again", async (db) => {
  let runs = 0;
  await assert.rejects(() =>
    db.unitOfWork(async () => {
      runs++;
      await db.query("SELECT 1/0");
    })
  );
  assert.deepEqual(runs, 1);
}, { drivers: ["postgres"] });

Deno.test("a conflict that outlasts the retries answers 503 with Retry-After, not a bare 500", () => {
  for (const code of ["40001", "40P01"]) {
    const err = Object.assign(new Error("deadlock detected"), { code });
    assert(isTransientConflict(err));
    const http = toHttpError(err);
    assert.deepEqual(http?.status, 503);
    assert.deepEqual(http?.headers?.["Retry-After"], "1");
  }
  assert(!isTransientConflict(Object.assign(new Error("x"), { code: "23505" })));
});
