/**
 * This replica's liveness, and what happens to the nodes of replicas that stop: the replica row with its
 * heartbeat (on its own timer and database handle, so a busy database cannot make a live replica look dead),
 * the advisory lock whose release tells the others at once that the process is gone, and the reaping of dead
 * replicas and stale stream rows that marks their nodes offline.
 */
import { hostname } from "node:os";
import * as grpc from "@grpc/grpc-js";
import type { Db, SessionLock } from "../db/mod.ts";
import type { Logger } from "../core/log.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import { markNodesOffline, recordStreamOpen } from "./node_status.ts";
import { REVOKED_MESSAGE, type StreamState } from "./stream_delivery.ts";

/** First key of the advisory locks replicas hold while alive (the second is `hashtext` of the replica id). */
const REPLICA_LOCK_CLASS = 0x73766372; // "svcr"

/** The liveness of one replica. */
export interface ReplicaLiveness {
  /** Takes the replica's advisory lock (when the database has session locks). */
  takeLock(): Promise<void>;
  /** Writes the replica row (the lock is taken first: a row claiming a lock nobody holds is reaped). */
  registerReplica(): Promise<void>;
  /** Forgets the rows of a previous process on the embedded database. */
  reapPreviousProcesses(): Promise<void>;
  /** Reaps stopped replicas and marks their nodes offline. */
  reapDeadReplicas(): Promise<void>;
  /** Drops this replica's stream rows that no open stream backs, and fixes statuses. */
  reconcileOwnStreams(): Promise<void>;
  /** Starts the heartbeat timer. */
  startHeartbeat(): void;
  /** Stops the heartbeat timer now; resolves when a running heartbeat has finished. */
  stopHeartbeat(): Promise<void>;
  /** At stop: removes the replica row (and its stream rows), then releases the lock and the heartbeat handle. */
  leave(): Promise<void>;
  /** When start failed: releases the lock and the heartbeat handle. */
  abandon(): Promise<void>;
}

/**
 * Creates the liveness of replica `replicaId`. `streams` are the hub's open streams (recorded again when
 * another replica took this one for dead); `isRunning` says whether the heartbeat goes on.
 */
export function createReplicaLiveness(deps: {
  db: Db;
  heartbeatDb: Db;
  log: Logger;
  replicaId: string;
  heartbeatMs: number;
  replicaTimeoutMs: number;
  streams: ReadonlyMap<string, StreamState>;
  isRunning: () => boolean;
}): ReplicaLiveness {
  const { db, heartbeatDb, log, replicaId, heartbeatMs, replicaTimeoutMs, streams, isRunning } = deps;
  let livenessLock: SessionLock | undefined;
  let beatTimer: ReturnType<typeof setTimeout> | undefined;
  let beatRunning: Promise<void> | undefined;

  async function registerReplica(): Promise<void> {
    // The lock is taken before the row says it is held: a row claiming a lock nobody holds is reaped at once.
    const locked = livenessLock ? await livenessLock.ensure() : false;
    await db.query(
      `INSERT INTO server_replicas (id, hostname, liveness_lock) VALUES ($1, $2, $3)
       ON CONFLICT (id) DO UPDATE SET last_seen = now(), liveness_lock = EXCLUDED.liveness_lock`,
      [replicaId, hostname(), locked],
    );
  }

  async function heartbeat(): Promise<void> {
    // A lost lock connection is replaced by the next statement; the lock is taken again on it here.
    await livenessLock?.ensure();
    const rows = await heartbeatDb.query(
      "UPDATE server_replicas SET last_seen = now() WHERE id = $1 RETURNING id",
      [
        replicaId,
      ],
    );
    if (rows.length > 0) return;
    // Another replica declared us dead and removed our stream rows: record our live streams again.
    log.warn("hub: this replica was considered dead by another one; registering its streams again", {
      replicaId,
    });
    await registerReplica();
    for (const s of streams.values()) {
      if (!s.registered) continue;
      const recorded = await recordStreamOpen(db, {
        id: s.id,
        nodeId: s.sub.nodeId,
        replicaId,
        serial: s.sub.serial,
      });
      if (!recorded) s.finish(new GrpcError(grpc.status.UNAUTHENTICATED, REVOKED_MESSAGE));
    }
  }

  /**
   * Reaps replicas that stopped: those silent for the replica timeout, and at once those whose liveness lock
   * is free (their process is gone: killed, or this very server before a restart). The lock is tried for the
   * statement only (`_xact_`), so no one keeps it. Runs at start, before any stream is served, and on every tick.
   */
  async function reapDeadReplicas(): Promise<void> {
    const orphans = await db.query<{ node_id: string }>(
      `WITH dead AS (
         DELETE FROM server_replicas
          WHERE id <> $1
            AND (last_seen < now() - make_interval(secs => $2::float8)
                 OR (liveness_lock AND pg_try_advisory_xact_lock($3, hashtext(id))))
         RETURNING id)
       SELECT DISTINCT node_id FROM node_streams WHERE replica_id IN (SELECT id FROM dead)`,
      [replicaId, replicaTimeoutMs / 1000, REPLICA_LOCK_CLASS],
    );
    if (orphans.length === 0) return;
    log.warn("hub: a server replica stopped responding; marking its nodes offline", {
      nodes: orphans.length,
    });
    await markNodesOffline(
      db,
      orphans.map((o) => o.node_id),
      "server replica holding the stream stopped responding",
    );
  }

  /**
   * With the embedded database (PGlite) no other process can have the data directory open while this one
   * runs, so every other replica row was left by a previous process (killed without cleaning up, then
   * restarted on the same data directory): its streams are gone now, not after the replica timeout. Runs
   * before this replica serves any stream, so every node still marked connected is stale.
   */
  async function reapPreviousProcesses(): Promise<void> {
    if (db.driver !== "pglite") return;
    const gone = await db.query<{ id: string }>("DELETE FROM server_replicas WHERE id <> $1 RETURNING id", [
      replicaId,
    ]);
    const stale = await db.query<{ id: string }>(
      "SELECT id FROM nodes WHERE status IN ('online', 'degraded') ORDER BY id",
    );
    if (gone.length === 0 && stale.length === 0) return;
    log.info("hub: the embedded database holds streams of a previous server process; nodes go offline", {
      replicas: gone.length,
      nodes: stale.length,
    });
    await markNodesOffline(
      db,
      stale.map((r) => r.id),
      "server restarted; waiting for the agent to reconnect",
    );
  }

  /** Drops stream rows of this replica that no open stream backs (a failed close), and fixes statuses. */
  async function reconcileOwnStreams(): Promise<void> {
    const rows = await db.query<{ id: string; node_id: string }>(
      "SELECT id, node_id FROM node_streams WHERE replica_id = $1",
      [replicaId],
    );
    // A stream still registering is in the map already, so its fresh row is never taken for stale.
    const stale = rows.filter((r) => !streams.has(r.id));
    if (stale.length > 0) {
      await db.query("DELETE FROM node_streams WHERE id = ANY($1::uuid[])", [stale.map((r) => r.id)]);
    }
    const unbacked = await db.query<{ id: string }>(
      `SELECT id FROM nodes n WHERE status IN ('online', 'degraded')
       AND NOT EXISTS (SELECT 1 FROM node_streams s WHERE s.node_id = n.id)`,
    );
    await markNodesOffline(db, unbacked.map((r) => r.id), "policy stream closed");
  }

  // The heartbeat has its own timer (and handle): checks that wait on a busy database must not stop this
  // replica from saying it is alive, or survivors would mark its nodes offline.
  function scheduleHeartbeat(): void {
    beatTimer = setTimeout(() => {
      beatRunning = heartbeat().catch((err) => log.error("hub: heartbeat failed", { error: String(err) }))
        .finally(
          () => {
            beatRunning = undefined;
            if (isRunning()) scheduleHeartbeat();
          },
        );
    }, heartbeatMs);
  }

  async function releaseLock(): Promise<void> {
    await livenessLock?.release().catch(() => {});
    livenessLock = undefined;
    if (heartbeatDb !== db) await heartbeatDb.close().catch(() => {});
  }

  return {
    async takeLock() {
      livenessLock = await db.sessionLock?.(REPLICA_LOCK_CLASS, replicaId);
    },
    registerReplica,
    reapPreviousProcesses,
    reapDeadReplicas,
    reconcileOwnStreams,
    startHeartbeat: scheduleHeartbeat,
    async stopHeartbeat() {
      clearTimeout(beatTimer);
      await beatRunning;
    },
    async leave() {
      // Deleting the row also drops any stream rows left behind (ON DELETE CASCADE).
      await db.query("DELETE FROM server_replicas WHERE id = $1", [replicaId]).catch((err) =>
        log.warn("hub: removing the replica row failed", { error: String(err) })
      );
      // Only once the row is gone: a row whose lock is free would be reaped by another replica.
      await releaseLock();
    },
    abandon: releaseLock,
  };
}
