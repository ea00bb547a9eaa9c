/**
 * The policy hub of one server replica: it serves the `SubscribePolicyUpdates` streams connected to this
 * process, turns resync notices (published by domain code through `publishResync` in
 * server/events/hub_notice.ts and
 * delivered to every replica by LISTEN/NOTIFY) into fresh snapshots, routes targeted commands, and keeps the
 * replica's liveness row and stream records so that survivors can mark the nodes of a dead replica offline
 * (with the embedded database, at once when the server starts again: no other process can share it).
 *
 * Delivery guarantees:
 * - A stream registers for notices before its initial sync is computed, so a change committed meanwhile is
 *   never missed: it is sent as a second snapshot right after the first.
 * - Each stream remembers the highest revision it must reach (`wantRevision`) and the revision of the last
 *   snapshot it was sent (`sentRevision`). Several resyncs that arrive while a stream is busy or
 *   backpressured coalesce into one snapshot, built when the stream can take it, so a slow or stuck agent
 *   never delays others, never makes the server queue unbounded data, and never loses an update.
 * - A snapshot is built once per distinct node-group set and the same encoded bytes go to every stream that
 *   shares the set.
 * - Missed notifications (a dropped LISTEN connection) are caught up from `hub_events` on every tick.
 */
import * as grpc from "@grpc/grpc-js";
import type { ServerContext } from "../context.ts";
import { type Db, openHeartbeatDatabase } from "../db/mod.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import { observePolicyPropagation } from "../metrics/counters.ts";
import { HUB_CHANNEL, type HubNotice } from "../events/hub_notice.ts";
import { currentRevision } from "./snapshot.ts";
import { createSnapshotCache } from "./snapshot_cache.ts";
import {
  createStreamDelivery,
  type PolicyStreamCall,
  type Publication,
  type StreamSubscriber,
} from "./stream_delivery.ts";
import { createReplicaLiveness } from "./replica_liveness.ts";
import { createMemoryTrim } from "./memory_trim.ts";

export type { PolicyStreamCall, StreamSubscriber };

/** Tunables, mostly for tests. */
export interface HubOptions {
  /** How often this replica refreshes its liveness row and runs its checks (default 5 s). */
  heartbeatIntervalMs?: number;
  /** A replica whose liveness row is older than this is dead; its nodes go offline (default 30 s). */
  replicaTimeoutMs?: number;
  /** Hub events kept for replay; older ones are compacted away (default 1000). */
  eventRetention?: number;
  /** How long an unused snapshot stays cached (default 30 s). */
  snapshotCacheMs?: number;
  /**
   * The handle the liveness heartbeat uses, so that it does not queue behind the main pool (see
   * `openHeartbeatDatabase`); the hub closes it on stop, or when start fails, unless it is the main handle.
   * Default: the main pool.
   */
  heartbeatDb?: Db;
  /** Least time between two returns of freed native memory to the system (memory_trim.ts; default 30 s). */
  memoryTrimIntervalMs?: number;
}

/** The hub of one replica. */
export interface Hub {
  /** Listens for notices, registers this replica and starts the liveness ticker. */
  start(): Promise<void>;
  /** Closes every stream (agents reconnect elsewhere), forgets this replica and stops listening. */
  stop(): Promise<void>;
  /**
   * Serves one policy stream: initial sync, then snapshots and commands until the client goes away or the
   * server closes it. Resolves when the stream ended normally; rejects with a {@link GrpcError} when the
   * server ends it (revoked certificate, deleted node, shutdown).
   */
  serveStream(call: PolicyStreamCall, subscriber: StreamSubscriber): Promise<void>;
  /** Ends every open stream with UNAVAILABLE and waits until their bookkeeping is written. */
  closeAllStreams(reason: string): Promise<void>;
  /** Counters of this replica's hub (tests, benchmarks, diagnostics). */
  stats(): HubStats;
}

/** Counters of one hub since it was created. */
export interface HubStats {
  /** Streams open now. */
  streams: number;
  /** Snapshots built (one per distinct node-group set and revision, however many streams receive it). */
  snapshotBuilds: number;
  /** Writes that found a stream's buffer full; that stream's next snapshot then waits for it to drain. */
  backpressureEvents: number;
}

/**
 * Creates the hub of this replica (`ctx.replicaId`) from its three parts: the snapshot cache
 * (snapshot_cache.ts), the streams (stream_delivery.ts) and the replica's liveness (replica_liveness.ts).
 * This function holds what ties them: the notices, the periodic checks, and start and stop.
 */
/**
 * The hub of a serving process (the main server or a policy worker), started with the configured replica
 * timeout: its own heartbeat connection, and a heartbeat a third of the timeout (at most 5 s) so that two
 * missed beats never look like a dead replica. `overrides` (tests) win.
 */
export async function startConfiguredHub(ctx: ServerContext, db: Db, overrides?: HubOptions): Promise<Hub> {
  const replicaTimeoutMs = ctx.config.server.replicaTimeoutSeconds * 1000;
  const hub = createHub(ctx, {
    heartbeatDb: await openHeartbeatDatabase(db, ctx.config.database.url),
    replicaTimeoutMs,
    heartbeatIntervalMs: Math.min(5000, Math.floor(replicaTimeoutMs / 3)),
    ...overrides,
  });
  await hub.start();
  return hub;
}

export function createHub(ctx: ServerContext, options: HubOptions = {}): Hub {
  const { db, log, replicaId } = ctx;
  const heartbeatMs = options.heartbeatIntervalMs ?? 5_000;
  const heartbeatDb = options.heartbeatDb ?? db;
  const replicaTimeoutMs = options.replicaTimeoutMs ?? 30_000;
  const retention = options.eventRetention ?? 1_000;
  const cacheMs = options.snapshotCacheMs ?? 30_000;

  let latestRevision = 0;
  let unlisten: (() => Promise<void>) | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let tickRunning: Promise<void> | undefined;
  let running = false;
  const isRunning = () => running;

  const snapshots = createSnapshotCache(db, log, { cacheMs, latestRevision: () => latestRevision });
  const delivery = createStreamDelivery({
    db,
    log,
    replicaId,
    snapshots,
    isRunning,
    registerReplica: () => liveness.registerReplica(),
  });
  const trim = createMemoryTrim(log, { intervalMs: options.memoryTrimIntervalMs });
  const liveness = createReplicaLiveness({
    db,
    heartbeatDb,
    log,
    replicaId,
    heartbeatMs,
    replicaTimeoutMs,
    streams: delivery.streams,
    isRunning,
  });

  // --- notices -----------------------------------------------------------------------------------------

  /** Finds out when a resync was published (its hub_events row), then records the waiting completions. */
  async function timePublication(revision: number, publication: Publication): Promise<void> {
    const arrived = performance.now();
    let age = 0;
    try {
      const [row] = await db.query<{ age: number }>(
        `SELECT greatest(extract(epoch FROM clock_timestamp() - created_at), 0)::float8 AS age
         FROM hub_events WHERE revision = $1`,
        [revision],
      );
      // The query's own duration is not part of the age at arrival.
      age = row ? Math.max(0, row.age * 1000 - (performance.now() - arrived)) : 0;
    } catch {
      // Without the row (compacted already) the arrival time is the best estimate.
    }
    publication.at = arrived - age;
    for (const done of publication.completions.splice(0)) {
      observePolicyPropagation((done - publication.at) / 1000);
    }
  }

  function onResync(revision: number, nodeGroupIds: readonly string[]): void {
    if (revision > latestRevision) latestRevision = revision;
    const affected = nodeGroupIds.length === 0 ? "all" : new Set(nodeGroupIds);
    // Evict before any snapshot is built, so no stream can pick up one that predates this change.
    snapshots.evict(affected);
    const publication = delivery.resync(revision, affected);
    if (!publication) return;
    timePublication(revision, publication).catch((err) =>
      log.debug("hub: timing a resync failed", { revision, error: String(err) })
    );
  }

  function onNotice(payload: string): void {
    let notice: HubNotice;
    try {
      notice = JSON.parse(payload);
    } catch {
      log.warn("hub: ignoring a malformed notice", { payload: payload.slice(0, 200) });
      return;
    }
    if (notice.kind === "resync") {
      onResync(notice.revision, notice.nodeGroupIds);
    } else if (notice.kind === "node_command") {
      delivery.onCommand(notice.nodeId, notice.command);
    }
  }

  // --- periodic checks ---------------------------------------------------------------------------------

  /** Processes resyncs whose notification never arrived (e.g. while the LISTEN connection was down). */
  async function catchUp(): Promise<void> {
    const current = await currentRevision(db);
    if (current <= latestRevision) return;
    const events = await db.query<{ revision: number; node_group_ids: string[] }>(
      "SELECT revision, node_group_ids FROM hub_events WHERE revision > $1 ORDER BY revision",
      [latestRevision],
    );
    const from = latestRevision;
    if (events.length !== current - from) {
      log.warn("hub: missed hub events were compacted; sending fresh snapshots to every stream", {
        from,
        current,
      });
      onResync(current, []);
      return;
    }
    for (const e of events) onResync(e.revision, e.node_group_ids);
  }

  /** Closes streams whose certificate became invalid without a `disconnect` command reaching us. */
  async function recheckCertificates(): Promise<void> {
    const serials = [...new Set([...delivery.streams.values()].map((s) => s.sub.serial))];
    if (serials.length === 0) return;
    const bad = await db.query<{ serial: string }>(
      `SELECT s.serial FROM unnest($1::text[]) AS s(serial)
       WHERE EXISTS (SELECT 1 FROM revoked_certificates r WHERE r.serial = s.serial)
          OR NOT EXISTS (SELECT 1 FROM node_certificates c JOIN nodes n ON n.id = c.node_id WHERE c.serial = s.serial)`,
      [serials],
    );
    if (bad.length === 0) return;
    const badSet = new Set(bad.map((b) => b.serial));
    for (const s of delivery.streams.values()) {
      if (badSet.has(s.sub.serial)) delivery.onCommand(s.sub.nodeId, "disconnect");
    }
  }

  async function compact(): Promise<void> {
    await db.query(
      "DELETE FROM hub_events WHERE revision <= (SELECT revision FROM hub_state WHERE id) - $1",
      [
        retention,
      ],
    );
    snapshots.expire();
  }

  async function tick(): Promise<void> {
    trim.tick(delivery.activity());
    for (
      const step of [
        liveness.reapDeadReplicas,
        liveness.reconcileOwnStreams,
        catchUp,
        recheckCertificates,
        compact,
      ]
    ) {
      if (!running) return;
      try {
        await step();
      } catch (err) {
        log.error(`hub: ${step.name} failed`, { error: String(err) });
      }
    }
  }

  function schedule(): void {
    timer = setTimeout(() => {
      tickRunning = tick().finally(() => {
        tickRunning = undefined;
        if (running) schedule();
      });
    }, heartbeatMs);
  }

  return {
    async start() {
      if (running) return;
      try {
        unlisten = await db.listen(HUB_CHANNEL, onNotice);
        latestRevision = await currentRevision(db);
        await liveness.takeLock();
        await liveness.registerReplica();
        await liveness.reapPreviousProcesses();
        // Streams of a replica that died (this server before a kill -9 and restart, or another one) are gone
        // now: their nodes go offline before this replica serves anything, not after the replica timeout.
        await liveness.reapDeadReplicas();
        await liveness.reconcileOwnStreams();
      } catch (err) {
        // stop() does nothing for a hub that never ran: what start opened is closed here.
        await unlisten?.().catch(() => {});
        unlisten = undefined;
        await liveness.abandon();
        throw err;
      }
      running = true;
      schedule();
      liveness.startHeartbeat();
      log.info("hub: started", { replicaId, revision: latestRevision });
    },
    async stop() {
      if (!running) return;
      running = false;
      clearTimeout(timer);
      const heartbeatStopped = liveness.stopHeartbeat();
      await tickRunning;
      await heartbeatStopped;
      await delivery.closeStreams(
        () => true,
        new GrpcError(grpc.status.UNAVAILABLE, "server is shutting down; reconnect"),
      );
      await unlisten?.().catch(() => {});
      await liveness.leave();
      trim.close();
    },
    serveStream: delivery.serveStream,
    async closeAllStreams(reason) {
      await delivery.closeStreams(() => true, new GrpcError(grpc.status.UNAVAILABLE, reason));
    },
    stats: () => ({
      streams: delivery.streams.size,
      snapshotBuilds: snapshots.builds(),
      backpressureEvents: delivery.backpressureEvents(),
    }),
  };
}
