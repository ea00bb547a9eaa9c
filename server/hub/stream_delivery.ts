/**
 * The hub's streams on this replica: serving one `SubscribePolicyUpdates` stream (initial sync, then
 * snapshots and commands), bringing the affected streams to a new revision when a resync arrives, routing a
 * node's commands, and the stream rows that tell other replicas which node is connected where. The
 * delivery guarantees are those of server/hub/hub.ts.
 */
import * as grpc from "@grpc/grpc-js";
import { create, toBinary } from "@bufbuild/protobuf";
import type { Db } from "../db/mod.ts";
import type { Logger } from "../core/log.ts";
import { GrpcError, type ServerStreamCall } from "../../shared/grpc/adapter.ts";
import {
  EventType,
  PolicyUpdateSchema,
  type SubscribePolicyUpdatesRequestSchema,
} from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { incPolicyStreamsOpen, observePolicyPropagation } from "../metrics/counters.ts";
import type { NodeCommand } from "../events/hub_notice.ts";
import type { Snapshot } from "./snapshot.ts";
import type { SnapshotCache } from "./snapshot_cache.ts";
import { decideInitialSync, encodeReplay } from "./initial_sync.ts";
import { recordStreamClosed, recordStreamOpen } from "./node_status.ts";

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

/** One open stream and where its delivery stands. */
export interface StreamState {
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
export interface Publication {
  at?: number;
  completions: number[];
}

export /** Why a stream of a revoked or deleted node is ended. */
const REVOKED_MESSAGE = "the certificate of this node was revoked or the node was deleted; enroll again";

const COMMAND_EVENTS: Partial<Record<NodeCommand, EventType>> = {
  metadata_request: EventType.METADATA_REQUEST,
  disk_encryption_task: EventType.DISK_ENCRYPTION_TASK,
};

/** The streams of one hub. */
export interface StreamDelivery {
  /** Open streams by id. */
  streams: ReadonlyMap<string, StreamState>;
  /** Serves one policy stream (see `Hub.serveStream`). */
  serveStream(call: PolicyStreamCall, sub: StreamSubscriber): Promise<void>;
  /**
   * Brings the streams of the affected groups (all for `"all"`) to `revision`; the publication their
   * completions are timed against, or undefined when no stream is affected.
   */
  resync(revision: number, affected: ReadonlySet<string> | "all"): Publication | undefined;
  /** Routes a targeted command to the node's open streams. */
  onCommand(nodeId: string, command: NodeCommand): void;
  /** Ends the streams `filter` picks with `error`; resolves when their bookkeeping is written. */
  closeStreams(filter: (s: StreamState) => boolean, error: GrpcError): Promise<void[]>;
  /** Writes that found a stream's buffer full. */
  backpressureEvents(): number;
  /** Streams opened plus messages written, so far: grows whenever streams come or snapshots go out. */
  activity(): number;
}

/**
 * Creates the stream delivery of replica `replicaId`. `isRunning` says whether the hub serves streams;
 * `registerReplica` writes the replica's liveness row again (a stream row needs it).
 */
export function createStreamDelivery(deps: {
  db: Db;
  log: Logger;
  replicaId: string;
  snapshots: SnapshotCache;
  isRunning: () => boolean;
  registerReplica: () => Promise<void>;
}): StreamDelivery {
  const { db, log, replicaId, snapshots, isRunning, registerReplica } = deps;
  const streams = new Map<string, StreamState>();
  const byNode = new Map<string, Set<StreamState>>();
  let backpressureEvents = 0;
  let activity = 0;

  function write(s: StreamState, bytes: Uint8Array): void {
    if (s.closed) return;
    activity++;
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
        const snapshot = await snapshots.get(s.groupKey, s.groupIds ?? [], want);
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

  function resync(revision: number, affected: ReadonlySet<string> | "all"): Publication | undefined {
    // A stream whose groups are still being read counts as affected: one extra snapshot beats a missed one.
    const targets = [...streams.values()].filter((s) =>
      !s.closed && revision > s.wantRevision &&
      (affected === "all" || s.groupIds === undefined || s.groupIds.some((g) => affected.has(g)))
    );
    if (targets.length === 0) return undefined;
    const publication: Publication = { completions: [] };
    for (const s of targets) {
      s.wantRevision = revision;
      s.pendingSince ??= publication;
      void pump(s);
    }
    return publication;
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

  function serveStream(call: PolicyStreamCall, sub: StreamSubscriber): Promise<void> {
    if (!isRunning()) {
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
      activity++;
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
      writeSnapshot(s, await snapshots.get(s.groupKey, groupIds, 0), 0);
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

  return {
    streams,
    serveStream,
    resync,
    onCommand,
    closeStreams,
    backpressureEvents: () => backpressureEvents,
    activity: () => activity,
  };
}
