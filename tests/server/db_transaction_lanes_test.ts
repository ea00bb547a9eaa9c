/**
 * Transactions on PostgreSQL run on lanes of their own (server/db/transaction_lanes.ts): never two on one
 * connection, never waiting behind plain statements that wait for them, and never half-committed across a
 * lost connection. postgres.js 3.4.9's `sql.reserve()` handed one connection to two transactions at once when
 * new connections met a queue of statements and reservations (seen as a hang of 200 concurrent enrollments
 * in CI). PostgreSQL only: PGlite has one connection.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { dbTest } from "../helpers/db.ts";
import { eventually } from "../helpers/agents.ts";
import { DatabaseUnavailableError, openPostgres } from "../../server/db/mod.ts";
import { LANE_LIFETIME_MS, transactionLanes } from "../../server/db/transaction_lanes.ts";

/** Settles `work`, or says it hung: minutes for what takes a second, so only a hang reaches it. */
async function settleOrHang<T>(work: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} hung (no progress in 120 s)`)), 120_000);
  });
  try {
    return await Promise.race([work, hang]);
  } finally {
    clearTimeout(timer);
  }
}

dbTest(
  "concurrent transactions on new connections never share one, among queued plain statements",
  async (_db, _t, info) => {
    // Parameters of a few KiB make each statement's write large enough to fill the socket's buffer, which is
    // what made postgres.js offer a connection again while it was being handed to a transaction.
    const big = "x".repeat(2_000);
    let shared = 0;
    for (let round = 0; round < 6; round++) {
      // Fresh connections each round: the double hand-out happened as connections opened under a queue.
      const db = await openPostgres(info.url, { max: 5 });
      try {
        const active = new Set<number>();
        const work = Promise.all(Array.from({ length: 200 }, async (_, i) => {
          await db.query("SELECT $1::int AS n, length($2::text) AS l", [i, big]);
          await db.transaction(async (tx) => {
            const [me] = await tx.query<{ pid: number }>(
              "SELECT pg_backend_pid() AS pid, length($1::text) AS l",
              [big],
            );
            if (active.has(me.pid)) shared++;
            active.add(me.pid);
            await tx.query("SELECT length($1::text) AS l", [big]);
            active.delete(me.pid);
          });
          await db.query("SELECT $1::int AS n, length($2::text) AS l", [i, big]);
        }));
        await settleOrHang(work, `round ${round}`);
      } finally {
        await db.close();
      }
      assert.equal(shared, 0, `round ${round}: transactions ran on a connection another transaction held`);
    }
  },
  { drivers: ["postgres"] },
);

dbTest(
  "a transaction that waits for a plain statement is not stuck behind transactions holding every connection",
  async (_db, _t, info) => {
    const db = await openPostgres(info.url, { max: 4 });
    try {
      // Each transaction needs a plain statement answered before it can end. On one shared pool, the first
      // transactions took every connection and their plain statements queued behind them forever.
      const work = Promise.all(Array.from({ length: 50 }, (_, i) =>
        db.transaction(async (tx) => {
          await tx.query("SELECT $1::int AS n", [i]);
          const [outside] = await db.query<{ n: number }>("SELECT $1::int AS n", [i]);
          await tx.query("SELECT $1::int AS n", [outside.n]);
          return outside.n;
        })));
      const answers = await settleOrHang(work, "transactions waiting for plain statements");
      assert.deepEqual(answers, Array.from({ length: 50 }, (_, i) => i));
    } finally {
      await db.close();
    }
  },
  { drivers: ["postgres"] },
);

dbTest(
  "a transaction whose connection is lost commits nothing, not even what runs after the driver reconnects",
  async (_db, _t, info) => {
    const db = await openPostgres(info.url, { max: 2 });
    try {
      await db.query("CREATE TABLE lane_probe (id int PRIMARY KEY)");
      const outcome = db.transaction(async (tx) => {
        await tx.query("INSERT INTO lane_probe VALUES (1)");
        const [me] = await tx.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
        await db.query("SELECT pg_terminate_backend($1)", [me.pid]);
        // Until the backend is gone and the client has seen its socket close: a statement sent now would
        // otherwise go to the dying connection and fail there, which proves nothing about the reconnect.
        await eventually(
          async () =>
            (await db.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [me.pid])).length === 0,
          { timeoutMs: 60_000, what: "the terminated backend to be gone" },
        );
        await new Promise((resolve) => setTimeout(resolve, 200));
        // The lane's client reconnects for this one: it must be refused, not run outside the transaction.
        await tx.query("INSERT INTO lane_probe VALUES (2)");
      });
      await assert.rejects(outcome, (err: unknown) => {
        assert.ok(err instanceof DatabaseUnavailableError, `expected unavailable, got ${err}`);
        return true;
      });
      const rows = await db.query<{ id: number }>("SELECT id FROM lane_probe ORDER BY id");
      assert.deepEqual(rows, []);
      // The lane serves the next transaction on a new connection.
      const n = await db.transaction(async (tx) => {
        await tx.query("INSERT INTO lane_probe VALUES (3)");
        const [count] = await tx.query<{ n: number }>("SELECT count(*)::int AS n FROM lane_probe");
        return count.n;
      });
      assert.equal(n, 1);
    } finally {
      await db.close();
    }
  },
  { drivers: ["postgres"] },
);

dbTest(
  "lanes are lent first come first served, replaced between transactions when old, refused once closed",
  async (_db, _t, info) => {
    let clock = 0;
    const clients: postgres.Sql[] = [];
    const lanes = transactionLanes(
      2,
      () => {
        const sql = postgres(info.url, { max: 1, onnotice: () => {} });
        clients.push(sql);
        return sql;
      },
      () => new Error("lanes closed"),
      () => clock,
    );
    const a = await lanes.acquire();
    const b = await lanes.acquire();
    assert.notEqual(a, b);
    assert.equal(clients.length, 2);
    const order: string[] = [];
    const third = lanes.acquire().then((lane) => (order.push("third"), lane));
    const fourth = lanes.acquire().then((lane) => (order.push("fourth"), lane));
    lanes.release(a);
    assert.equal(await third, a, "the longest waiter gets the lane given back");
    // Past its lifetime a lane is ended and a new one takes its place, with a connection of its own.
    const [{ pid: oldPid }] = await b.sql`SELECT pg_backend_pid() AS pid`;
    clock = LANE_LIFETIME_MS;
    lanes.release(b);
    const renewed = await fourth;
    assert.deepEqual(order, ["third", "fourth"]);
    assert.notEqual(renewed, b);
    assert.equal(clients.length, 3);
    const [{ pid: newPid }] = await renewed.sql`SELECT pg_backend_pid() AS pid`;
    assert.notEqual(newPid, oldPid);
    await assert.rejects(b.sql`SELECT 1`, /CONNECTION_ENDED/);
    const waiting = assert.rejects(lanes.acquire(), /lanes closed/);
    await lanes.close(5);
    await waiting;
    await assert.rejects(lanes.acquire(), /lanes closed/);
    assert.throws(() => transactionLanes(0, () => clients[0], () => new Error()), /size must be >= 1/);
  },
  { drivers: ["postgres"] },
);
