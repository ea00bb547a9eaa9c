/**
 * The policy hub of one server replica: it serves the `SubscribePolicyUpdates` streams connected to this
 * process, turns resync notices (published by domain code through `publishResync` in `publish.ts` and
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
import { hostname } from "node:os";
import * as grpc from "@grpc/grpc-js";
import { create, toBinary } from "@bufbuild/protobuf";
import type { ServerContext } from "../context.ts";
import type { Db, SessionLock } from "../db/mod.ts";
import { GrpcError, type ServerStreamCall } from "../../shared/grpc/adapter.ts";
import {
  EventType,
  PolicyUpdateSchema,
  type SubscribePolicyUpdatesRequestSchema,
} from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { incPolicyStreamsOpen, observePolicyPropagation } from "../metrics/counters.ts";
import { HUB_CHANNEL, type HubNotice, type NodeCommand } from "../events/hub_notice.ts";
import { buildSnapshot, currentRevision, type Snapshot } from "./snapshot.ts";
import { decideInitialSync, encodeReplay } from "./initial_sync.ts";
import { markNodesOffline, recordStreamClosed, recordStreamOpen } from "./node_status.ts";

/** The grpc-js call of a policy stream. */
export type PolicyStreamCall = ServerStreamCall<
  typeof SubscribePolicyUpdatesRequestSchema,
  typeof PolicyUpdateSchema
>;

/** The verified identity behind a policy stream. */
export interface StreamSubscriber {
  nodeId: string;
  nodeName: string;
  /** Serial of the client certificate the stream was opened with. */
  serial: string;
  lastKnownRevision: number;
}

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

interface StreamState {
  id: string;
  sub: StreamSubscriber;
  call: PolicyStreamCall;
  /** Node groups read when the stream opened; undefined until then. */
  groupIds?: string[];
  groupKey: string;
  /** Highest revision this stream must be brought to. */
  wantRevision: number;
  /** Revision of the last snapshot (or replay) written. */
  sentRevision: number;
  /** Publication of the oldest resync not yet delivered to this stream (for the propagation metric). */
  pendingSince?: Publication;
  /** The last write returned false: wait for 'drain' before writing more snapshots. */
  blocked: boolean;
  /** A snapshot for this stream is being built. */
  sending: boolean;
  initialDone: boolean;
  /** Commands that arrived before the initial sync was sent. */
  queuedCommands: EventType[];
  registered: boolean;
  closed: boolean;
  /** Database bookkeeping for this stream, in order (open before close). */
  dbChain: Promise<void>;
  finish(error?: GrpcError): void;
}

/**
 * When a resync was published, on this process's clock. Known only after a database round trip, which the
 * fan-out does not wait for: streams that finish first leave their completion times here.
 */
interface Publication {
  at?: number;
  completions: number[];
}

interface CacheEntry {
  groupIds: string[];
  /** Every revision up to this one is contained in the snapshot. */
  floor: number;
  promise: Promise<Snapshot>;
  createdAt: number;
}

/** First key of the advisory locks replicas hold while alive (the second is `hashtext` of the replica id). */
const REPLICA_LOCK_CLASS = 0x73766372; // "svcr"

/** Why a stream of a revoked or deleted node is ended. */
const REVOKED_MESSAGE = "the certificate of this node was revoked or the node was deleted; enroll again";

const COMMAND_EVENTS: Partial<Record<NodeCommand, EventType>> = {
  metadata_request: EventType.METADATA_REQUEST,
  disk_encryption_task: EventType.DISK_ENCRYPTION_TASK,
};

/** Creates the hub of this replica (`ctx.replicaId`). */
export function createHub(ctx: ServerContext, options: HubOptions = {}): Hub {
  const { db, log, replicaId } = ctx;
  const heartbeatMs = options.heartbeatIntervalMs ?? 5_000;
  const heartbeatDb = options.heartbeatDb ?? db;
  const replicaTimeoutMs = options.replicaTimeoutMs ?? 30_000;
  const retention = options.eventRetention ?? 1_000;
  const cacheMs = options.snapshotCacheMs ?? 30_000;

  const streams = new Map<string, StreamState>();
  const byNode = new Map<string, Set<StreamState>>();
  const cache = new Map<string, CacheEntry>();
  let latestRevision = 0;
  let snapshotBuilds = 0;
  let backpressureEvents = 0;
  let unlisten: (() => Promise<void>) | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let tickRunning: Promise<void> | undefined;
  let beatTimer: ReturnType<typeof setTimeout> | undefined;
  let beatRunning: Promise<void> | undefined;
  let running = false;
  let livenessLock: SessionLock | undefined;

  // --- snapshots -------------------------------------------------------------------------------------

  function getSnapshot(groupKey: string, groupIds: string[], minRevision: number): Promise<Snapshot> {
    const hit = cache.get(groupKey);
    if (hit && hit.floor >= minRevision) return hit.promise;
    // Every revision whose notice has arrived is committed, so a build starting now contains it.
    snapshotBuilds++;
    const entry: CacheEntry = {
      groupIds,
      floor: Math.max(minRevision, latestRevision),
      promise: buildSnapshot(db, groupIds, log),
      createdAt: performance.now(),
    };
    cache.set(groupKey, entry);
    entry.promise.catch(() => {
      if (cache.get(groupKey) === entry) cache.delete(groupKey);
    });
    return entry.promise;
  }

  function evictCache(affected: ReadonlySet<string> | "all"): void {
    for (const [key, entry] of cache) {
      if (affected === "all" || entry.groupIds.some((g) => affected.has(g))) cache.delete(key);
    }
  }

  // --- writing -----------------------------------------------------------------------------------------

  function write(s: StreamState, bytes: Uint8Array): void {
    if (s.closed) return;
    try {
      if (!s.call.write(bytes) && !s.blocked) {
        s.blocked = true;
        backpressureEvents++;
      }
    } catch (err) {
      log.debug("hub: write to a closing stream failed", { node: s.sub.nodeName, error: String(err) });
    }
  }

  function writeSnapshot(s: StreamState, snapshot: Snapshot, minRevision: number): void {
    for (const message of snapshot.messages) write(s, message);
    s.sentRevision = Math.max(s.sentRevision, snapshot.revision, minRevision);
    if (s.pendingSince !== undefined && s.wantRevision <= s.sentRevision) {
      const publication = s.pendingSince;
      if (publication.at === undefined) publication.completions.push(performance.now());
      else observePolicyPropagation((performance.now() - publication.at) / 1000);
      s.pendingSince = undefined;
    }
  }

  function commandMessage(s: StreamState, type: EventType): Uint8Array {
    // Commands carry the stream's current revision so they never move the agent's last known revision.
    return toBinary(
      PolicyUpdateSchema,
      create(PolicyUpdateSchema, { type, revision: BigInt(s.sentRevision) }),
    );
  }

  /** Sends the pending resync when the stream can take it; loops while newer resyncs keep arriving. */
  async function pump(s: StreamState): Promise<void> {
    while (!s.closed && !s.sending && !s.blocked && s.initialDone && s.wantRevision > s.sentRevision) {
      const want = s.wantRevision;
      s.sending = true;
      try {
        const snapshot = await getSnapshot(s.groupKey, s.groupIds ?? [], want);
        writeSnapshot(s, snapshot, want);
      } catch (err) {
        log.error("hub: building a snapshot failed; closing the stream so the agent reconnects", {
          node: s.sub.nodeName,
          error: String(err),
        });
        s.finish(
          new GrpcError(grpc.status.UNAVAILABLE, "server could not build the policy snapshot; reconnect"),
        );
        return;
      } finally {
        s.sending = false;
      }
    }
  }

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
    evictCache(affected);
    // A stream whose groups are still being read counts as affected: one extra snapshot beats a missed one.
    const targets = [...streams.values()].filter((s) =>
      !s.closed && revision > s.wantRevision &&
      (affected === "all" || s.groupIds === undefined || s.groupIds.some((g) => affected.has(g)))
    );
    if (targets.length === 0) return;
    const publication: Publication = { completions: [] };
    for (const s of targets) {
      s.wantRevision = revision;
      s.pendingSince ??= publication;
      void pump(s);
    }
    timePublication(revision, publication).catch((err) =>
      log.debug("hub: timing a resync failed", { revision, error: String(err) })
    );
  }

  function onCommand(nodeId: string, command: NodeCommand): void {
    const targets = byNode.get(nodeId);
    if (!targets) return;
    for (const s of targets) {
      if (command === "disconnect") {
        s.finish(new GrpcError(grpc.status.UNAUTHENTICATED, REVOKED_MESSAGE));
        continue;
      }
      const type = COMMAND_EVENTS[command];
      if (type === undefined) continue;
      if (s.initialDone) write(s, commandMessage(s, type));
      else s.queuedCommands.push(type);
    }
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
      onCommand(notice.nodeId, notice.command);
    }
  }

  // --- streams -----------------------------------------------------------------------------------------

  function serveStream(call: PolicyStreamCall, sub: StreamSubscriber): Promise<void> {
    if (!running) {
      return Promise.reject(new GrpcError(grpc.status.UNAVAILABLE, "server is shutting down; reconnect"));
    }
    return new Promise<void>((resolve, reject) => {
      const s: StreamState = {
        id: crypto.randomUUID(),
        sub,
        call,
        groupKey: "",
        wantRevision: 0,
        sentRevision: 0,
        blocked: false,
        sending: false,
        initialDone: false,
        queuedCommands: [],
        registered: false,
        closed: false,
        dbChain: Promise.resolve(),
        finish(error) {
          if (s.closed) return;
          s.closed = true;
          streams.delete(s.id);
          const set = byNode.get(sub.nodeId);
          set?.delete(s);
          if (set?.size === 0) byNode.delete(sub.nodeId);
          incPolicyStreamsOpen(-1);
          s.dbChain = s.dbChain.then(async () => {
            if (!s.registered) return;
            await recordStreamClosed(db, { id: s.id, nodeId: sub.nodeId }).catch((err) =>
              // The tick reconciles this replica's stream rows, so a failure here heals itself.
              log.warn("hub: recording a closed stream failed", { node: sub.nodeName, error: String(err) })
            );
          });
          if (error) reject(error);
          else resolve();
        },
      };
      streams.set(s.id, s);
      let set = byNode.get(sub.nodeId);
      if (!set) byNode.set(sub.nodeId, set = new Set());
      set.add(s);
      incPolicyStreamsOpen(1);
      call.on("cancelled", () => s.finish());
      call.on("close", () => s.finish());
      call.on("drain", () => {
        s.blocked = false;
        void pump(s);
      });
      initialSync(s).catch((err) => {
        if (err instanceof GrpcError) return s.finish(err);
        log.error("hub: initial sync failed", { node: sub.nodeName, error: String(err) });
        s.finish(
          new GrpcError(grpc.status.UNAVAILABLE, "server could not complete the initial sync; reconnect"),
        );
      });
    });
  }

  async function initialSync(s: StreamState): Promise<void> {
    const groups = await db.query<{ node_group_id: string }>(
      "SELECT node_group_id FROM node_group_members WHERE node_id = $1 ORDER BY node_group_id",
      [s.sub.nodeId],
    );
    const groupIds = groups.map((g) => g.node_group_id);
    s.groupIds = groupIds;
    s.groupKey = groupIds.join(",");
    const decision = await decideInitialSync(db, s.sub.lastKnownRevision);
    if (s.closed) return;
    if (decision.action === "snapshot") {
      writeSnapshot(s, await getSnapshot(s.groupKey, groupIds, 0), 0);
    } else if (decision.action === "replay") {
      const messages = await encodeReplay(db, decision.events, { groupIds, log });
      for (const m of messages) write(s, m);
      s.sentRevision = Math.max(s.sentRevision, decision.revision);
    } else {
      s.sentRevision = Math.max(s.sentRevision, decision.revision);
      // Nothing to send: response headers alone tell the agent its revision is current, so it can count
      // the connection as healthy (agent/stream.ts reads the header).
      const headers = new grpc.Metadata();
      headers.set("svc-up-to-date", String(decision.revision));
      s.call.sendMetadata(headers);
    }
    if (s.closed) return;
    s.initialDone = true;
    for (const type of s.queuedCommands.splice(0)) write(s, commandMessage(s, type));
    const registration = s.dbChain.then(() => registerStream(s));
    // The chain itself never rejects, so a later close (and shutdown, which waits for it) still runs.
    s.dbChain = registration.catch(() => {});
    await registration;
    void pump(s);
  }

  async function registerStream(s: StreamState): Promise<void> {
    if (s.closed) return;
    const record = () =>
      recordStreamOpen(db, { id: s.id, nodeId: s.sub.nodeId, replicaId, serial: s.sub.serial });
    let exists: boolean;
    try {
      exists = await record();
    } catch (err) {
      // Our liveness row was reaped (this process stalled longer than the timeout): come back and retry.
      if ((err as { code?: string }).code !== "23503") throw err;
      await registerReplica();
      exists = await record();
    }
    if (!exists) {
      s.finish(new GrpcError(grpc.status.UNAUTHENTICATED, REVOKED_MESSAGE));
      return;
    }
    s.registered = true;
  }

  function closeStreams(filter: (s: StreamState) => boolean, error: GrpcError): Promise<void[]> {
    const closing = [...streams.values()].filter(filter);
    for (const s of closing) s.finish(error);
    return Promise.all(closing.map((s) => s.dbChain));
  }

  // --- replica liveness --------------------------------------------------------------------------------

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
    const serials = [...new Set([...streams.values()].map((s) => s.sub.serial))];
    if (serials.length === 0) return;
    const bad = await db.query<{ serial: string }>(
      `SELECT s.serial FROM unnest($1::text[]) AS s(serial)
       WHERE EXISTS (SELECT 1 FROM revoked_certificates r WHERE r.serial = s.serial)
          OR NOT EXISTS (SELECT 1 FROM node_certificates c JOIN nodes n ON n.id = c.node_id WHERE c.serial = s.serial)`,
      [serials],
    );
    if (bad.length === 0) return;
    const badSet = new Set(bad.map((b) => b.serial));
    for (const s of streams.values()) {
      if (badSet.has(s.sub.serial)) onCommand(s.sub.nodeId, "disconnect");
    }
  }

  async function compact(): Promise<void> {
    await db.query(
      "DELETE FROM hub_events WHERE revision <= (SELECT revision FROM hub_state WHERE id) - $1",
      [
        retention,
      ],
    );
    const now = performance.now();
    for (const [key, entry] of cache) if (now - entry.createdAt > cacheMs) cache.delete(key);
  }

  async function tick(): Promise<void> {
    for (
      const step of [reapDeadReplicas, reconcileOwnStreams, catchUp, recheckCertificates, compact]
    ) {
      if (!running) return;
      try {
        await step();
      } catch (err) {
        log.error(`hub: ${step.name} failed`, { error: String(err) });
      }
    }
  }

  // The heartbeat has its own timer (and handle): checks that wait on a busy database must not stop this
  // replica from saying it is alive, or survivors would mark its nodes offline.
  function scheduleHeartbeat(): void {
    beatTimer = setTimeout(() => {
      beatRunning = heartbeat().catch((err) => log.error("hub: heartbeat failed", { error: String(err) }))
        .finally(
          () => {
            beatRunning = undefined;
            if (running) scheduleHeartbeat();
          },
        );
    }, heartbeatMs);
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
        livenessLock = await db.sessionLock?.(REPLICA_LOCK_CLASS, replicaId);
        await registerReplica();
        await reapPreviousProcesses();
        // Streams of a replica that died (this server before a kill -9 and restart, or another one) are gone
        // now: their nodes go offline before this replica serves anything, not after the replica timeout.
        await reapDeadReplicas();
        await reconcileOwnStreams();
      } catch (err) {
        // stop() does nothing for a hub that never ran: what start opened is closed here.
        await unlisten?.().catch(() => {});
        unlisten = undefined;
        await livenessLock?.release().catch(() => {});
        livenessLock = undefined;
        if (heartbeatDb !== db) await heartbeatDb.close().catch(() => {});
        throw err;
      }
      running = true;
      schedule();
      scheduleHeartbeat();
      log.info("hub: started", { replicaId, revision: latestRevision });
    },
    async stop() {
      if (!running) return;
      running = false;
      clearTimeout(timer);
      clearTimeout(beatTimer);
      await tickRunning;
      await beatRunning;
      await closeStreams(
        () => true,
        new GrpcError(grpc.status.UNAVAILABLE, "server is shutting down; reconnect"),
      );
      await unlisten?.().catch(() => {});
      // Deleting the row also drops any stream rows left behind (ON DELETE CASCADE).
      await db.query("DELETE FROM server_replicas WHERE id = $1", [replicaId]).catch((err) =>
        log.warn("hub: removing the replica row failed", { error: String(err) })
      );
      // Only once the row is gone: a row whose lock is free would be reaped by another replica.
      await livenessLock?.release().catch(() => {});
      livenessLock = undefined;
      if (heartbeatDb !== db) await heartbeatDb.close().catch(() => {});
    },
    serveStream,
    async closeAllStreams(reason) {
      await closeStreams(() => true, new GrpcError(grpc.status.UNAVAILABLE, reason));
    },
    stats: () => ({ streams: streams.size, snapshotBuilds, backpressureEvents }),
  };
}
