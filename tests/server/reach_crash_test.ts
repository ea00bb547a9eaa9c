/**
 * A real svc-server killed (SIGKILL) in the middle of a reach catch-up (migrations/0022): the batches it
 * committed stay, the one it had open is rolled back with its connection, and the server started again on the
 * same database finishes the job, leaving the model equal to a recomputation from scratch. PostgreSQL only: the
 * test must hold a lock beside the server to stop it in the middle of a batch, which the embedded database
 * (one process) cannot share; tests/server/reach_queue_test.ts covers a batch lost before its commit on both.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { eventually } from "../helpers/agents.ts";
import { startServerProcess } from "../helpers/process.ts";
import { LOADED_MACHINE_DEADLINE_MS } from "../helpers/replicas.ts";
import { assertReachConsistent, pendingRefreshes, reachedNodes, seedNodes } from "./reach_helpers.ts";
import { DEFAULT_BATCH_NODES } from "../../server/domain/reach.ts";

dbTest(
  "a server killed in the middle of a catch-up finishes it after its restart",
  async (db, _t, info) => {
    const [group] = await db.query<{ id: string }>(
      "INSERT INTO node_groups (name) VALUES ('fleet') RETURNING id",
    );
    const nodes = await seedNodes(db, {
      prefix: "pc",
      count: 2 * DEFAULT_BATCH_NODES + 500,
      groupId: group.id,
    });
    const [policy] = await db.query<{ id: string }>(
      "INSERT INTO policies (name, type, content, state) VALUES ('browser', 'Firefox', '{}', 'released') RETURNING id",
    );
    const [binding] = await db.query<{ id: string }>(
      "INSERT INTO policy_bindings (policy_id, node_group_id) VALUES ($1, $2) RETURNING id",
      [policy.id, group.id],
    );
    const config = {
      database: { url: info.url },
      server: { policy_workers: 1 },
      log: { level: "warn" },
    };
    let server = await startServerProcess({ config });
    // A node of the second batch is held here, so the server stops inside that batch with its pairs written.
    const held = nodes[DEFAULT_BATCH_NODES + DEFAULT_BATCH_NODES / 2];
    let locked = () => {};
    const isLocked = new Promise<void>((resolve) => locked = resolve);
    let release = () => {};
    const released = new Promise<void>((resolve) => release = resolve);
    const holder = db.transaction(async (tx) => {
      await tx.query("SELECT 1 FROM node_compliance_counts WHERE node_id = $1 FOR UPDATE", [held]);
      locked();
      await released;
    });
    try {
      await isLocked;
      // More candidates than svc.reach_inline_nodes: the change commits with a queue row.
      await db.query("UPDATE policy_bindings SET state = 'enabled' WHERE id = $1", [binding.id]);
      assert.equal(await pendingRefreshes(db), 1);
      // The server's batch, waiting for the held node (the test's own connections carry the same name).
      let batchPid = 0;
      await eventually(async () => {
        const [row] = await db.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
              AND query LIKE '%reach_refresh(%'`,
        );
        batchPid = row?.pid ?? 0;
        return batchPid !== 0;
      }, {
        timeoutMs: LOADED_MACHINE_DEADLINE_MS,
        what: "the server's second batch to wait for the held node",
      });
      const [{ after_node }] = await db.query<{ after_node: string }>(
        "SELECT after_node FROM reach_refresh_queue",
      );
      assert.equal(after_node, nodes[DEFAULT_BATCH_NODES - 1], "the first batch committed");
      await server.stop("SIGKILL");
      release();
      await holder;
      // The open batch went with its connection: only the first batch's pairs, and the row where it left off.
      await eventually(async () => {
        const rows = await db.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [batchPid]);
        return rows.length === 0;
      }, { timeoutMs: LOADED_MACHINE_DEADLINE_MS, what: "the killed server's batch connection to end" });
      assert.equal(await reachedNodes(db, policy.id), DEFAULT_BATCH_NODES);
      assert.equal(await pendingRefreshes(db), 1);

      server = await startServerProcess({ config, dataDir: server.dataDir });
      await eventually(async () => await pendingRefreshes(db) === 0, {
        timeoutMs: LOADED_MACHINE_DEADLINE_MS,
        what: "the restarted server to finish the catch-up",
      });
      assert.equal(await reachedNodes(db, policy.id), nodes.length);
      await assertReachConsistent(db, "the restarted catch-up");
    } finally {
      release();
      await holder.catch(() => {});
      await server.stop();
      await Deno.remove(server.dataDir, { recursive: true }).catch(() => {});
    }
  },
  { drivers: ["postgres"] },
);
