/**
 * A replica's liveness lock: the nodes of a replica whose process died (a real `psql` session holding the
 * replica's lock, killed with SIGKILL) go offline the moment a server starts, not after the 30 s replica
 * timeout; those of a replica whose lock is still held, and of a replica of an earlier version (no lock
 * claimed), stay online; and a running hub holds its own lock until it stops.
 */
import assert from "node:assert/strict";
import { freshDb, TEST_DATABASE_URL } from "../helpers/db.ts";
import { eventually, startAgentServer } from "../helpers/agents.ts";
import type { Db } from "../../server/db/mod.ts";

/** The key class replicas lock (server/hub/hub.ts). */
const REPLICA_LOCK_CLASS = 0x73766372;

/** A `psql` session that holds `replicaId`'s liveness lock until it is killed. */
async function lockHolder(url: string, replicaId: string) {
  const child = new Deno.Command("psql", {
    args: [url, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1"],
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(
    new TextEncoder().encode(
      `SELECT pg_advisory_lock(${REPLICA_LOCK_CLASS}, hashtext('${replicaId}'));\nSELECT 'locked';\n`,
    ),
  );
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes("locked")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`psql ended before it held the lock: ${out}`);
    out += value;
  }
  return {
    async kill() {
      child.kill("SIGKILL");
      await child.status;
      reader.cancel().catch(() => {});
      writer.releaseLock();
    },
  };
}

async function lockHeld(db: Db, replicaId: string): Promise<boolean> {
  const [row] = await db.query<{ held: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
                     AND classid = $1::bigint::oid AND objid = (hashtext($2)::bigint & 4294967295)::oid) AS held`,
    [REPLICA_LOCK_CLASS, replicaId],
  );
  return row.held;
}

/** A replica row with one online node streaming through it. */
async function replicaWithNode(db: Db, replicaId: string, node: string, livenessLock: boolean) {
  await db.query("INSERT INTO server_replicas (id, hostname, liveness_lock) VALUES ($1, 'host-a', $2)", [
    replicaId,
    livenessLock,
  ]);
  const [{ id }] = await db.query<{ id: string }>(
    "INSERT INTO nodes (name, status) VALUES ($1, 'online') RETURNING id",
    [node],
  );
  await db.query("INSERT INTO node_streams (node_id, replica_id) VALUES ($1, $2)", [id, replicaId]);
}

async function statuses(db: Db): Promise<Record<string, string>> {
  const rows = await db.query<{ name: string; status: string }>(
    "SELECT name, status FROM nodes ORDER BY name",
  );
  return Object.fromEntries(rows.map((r) => [r.name, r.status]));
}

Deno.test({
  name: "hub: nodes of a replica whose process died go offline as the server starts [postgres]",
  ignore: !TEST_DATABASE_URL,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const info = await freshDb("postgres");
    const db = info.db;
    const alive = await lockHolder(info.url, "host-a-alive");
    let server: Awaited<ReturnType<typeof startAgentServer>> | undefined;
    try {
      // The previous incarnation: its process held its lock, then was killed (kill -9, no cleanup).
      await replicaWithNode(db, "host-a-dead", "n-dead", true);
      const dead = await lockHolder(info.url, "host-a-dead");
      await dead.kill();
      await eventually(async () => !(await lockHeld(db, "host-a-dead")), {
        what: "PostgreSQL freed the killed session's lock",
        timeoutMs: 60_000,
      });
      await replicaWithNode(db, "host-a-alive", "n-alive", true);
      await replicaWithNode(db, "host-a-older-version", "n-older", false);

      server = await startAgentServer(db, { hub: { heartbeatIntervalMs: 60_000 } });
      assert.deepEqual(await statuses(db), { "n-alive": "online", "n-dead": "offline", "n-older": "online" });
      const [reason] = await db.query<{ status_reason: string }>(
        "SELECT status_reason FROM nodes WHERE name = 'n-dead'",
      );
      assert.match(reason.status_reason, /replica holding the stream stopped/);
      const replicas = (await db.query<{ id: string }>("SELECT id FROM server_replicas ORDER BY id")).map((
        r,
      ) => r.id);
      assert.deepEqual(replicas.filter((id) => id.startsWith("host-a")), [
        "host-a-alive",
        "host-a-older-version",
      ]);

      // The server holds its own lock and says so; stopping releases it with the row.
      const own = server.ctx.replicaId;
      assert.equal(await lockHeld(db, own), true);
      const [row] = await db.query<{ liveness_lock: boolean }>(
        "SELECT liveness_lock FROM server_replicas WHERE id = $1",
        [own],
      );
      assert.equal(row.liveness_lock, true);
      await server.stop();
      server = undefined;
      assert.equal(await lockHeld(db, own), false);
    } finally {
      await server?.stop();
      await alive.kill();
      await info.dispose();
    }
  },
});
