/** The replica heartbeat keeps the liveness row fresh while the main pool is exhausted (issue #22). */
import assert from "node:assert/strict";
import { freshDb, TEST_DATABASE_URL } from "../helpers/db.ts";
import { eventually, startAgentServer } from "../helpers/agents.ts";
import { openHeartbeatDatabase } from "../../server/db/mod.ts";

Deno.test({
  name: "hub heartbeat: the liveness row advances while every main-pool connection is held [postgres]",
  ignore: !TEST_DATABASE_URL,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const info = await freshDb("postgres");
    const observer = await openHeartbeatDatabase(info.db, info.url);
    const server = await startAgentServer(info.db, {
      hub: { heartbeatIntervalMs: 200, heartbeatDb: await openHeartbeatDatabase(info.db, info.url) },
    });
    let release!: () => void;
    const held = new Promise<void>((r) => release = r);
    const holders: Promise<unknown>[] = [];
    try {
      const replicaId = server.ctx.replicaId;
      const lastSeen = async () =>
        (await observer.query<{ t: string }>(
          "SELECT last_seen::text AS t FROM server_replicas WHERE id = $1",
          [
            replicaId,
          ],
        ))[0]?.t;
      // Hold every connection of the main pool (max 5): its transaction lanes with open transactions, its
      // plain connections with statements that wait for an advisory lock the observer holds.
      let lockerPid = 0;
      const locker = observer.transaction(async (tx) => {
        await tx.query("SELECT pg_advisory_xact_lock(4242)");
        const [me] = await tx.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
        lockerPid = me.pid;
        await held;
      });
      holders.push(locker);
      await eventually(() => Promise.resolve(lockerPid !== 0), { what: "the observer holds the lock" });
      for (let i = 0; i < 5; i++) {
        holders.push(info.db.transaction(async (tx) => {
          await tx.query("SELECT 1");
          await held;
        }));
        holders.push(info.db.query("SELECT pg_advisory_xact_lock(4242)"));
      }
      await eventually(async () => {
        const [row] = await observer.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> $1
              AND (state = 'idle in transaction' OR wait_event_type = 'Lock')`,
          [lockerPid],
        );
        return row.n === 5;
      }, { what: "all main-pool connections held" });
      const before = await lastSeen();
      assert.ok(before, "the replica registered its liveness row");
      await eventually(async () => (await lastSeen())! > before!, { what: "the liveness row advanced" });
    } finally {
      release();
      await Promise.all(holders);
      await server.stop();
      await observer.close();
      await info.dispose();
    }
  },
});

Deno.test({
  name: "hub heartbeat: a hub that fails to start closes its heartbeat pool [postgres]",
  ignore: !TEST_DATABASE_URL,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const info = await freshDb("postgres");
    const heartbeatDb = await openHeartbeatDatabase(info.db, info.url);
    try {
      // The hub reads its revision at start: without the table, start fails after LISTEN was set up.
      await info.db.query("DROP TABLE hub_state CASCADE");
      await assert.rejects(startAgentServer(info.db, { hub: { heartbeatDb } }), /hub_state/);
      await assert.rejects(heartbeatDb.query("SELECT 1"), "the heartbeat pool was closed");
    } finally {
      await heartbeatDb.close().catch(() => {});
      await info.dispose();
    }
  },
});
