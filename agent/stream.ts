/**
 * One policy stream session: subscribe with the last revision seen, turn each wire message into
 * a sync-engine event, answer targeted commands, and report when the stream became healthy
 * (delivered a complete snapshot, a delta, or said that the agent's revision is current).
 *
 * The revision is advanced only by a complete snapshot or a delta event, never by a message in
 * the middle of a snapshot: a stream cut mid-snapshot then reconnects with the old revision and
 * receives the whole snapshot again (the staging set is reset on every connect too).
 *
 * @module
 */

import { EventType, type Policy, type PolicyUpdate } from "./gen/svc/policy/v1/policy_pb.ts";
import type { PolicyClient } from "./client.ts";
import type { Logger } from "./log.ts";
import type { PolicyEvent, SyncEngine } from "./sync/engine.ts";
import type { CachedPolicy } from "./sync/types.ts";

/** Response header of a subscription the server has nothing to send for (the revision is current). */
export const UP_TO_DATE_HEADER = "svc-up-to-date";

/** The cache entry of a wire policy. */
export function toCachedPolicy(policy: Policy): CachedPolicy {
  return {
    id: policy.id,
    name: policy.name,
    type: policy.type,
    version: policy.version,
    priority: policy.priority,
    content: policy.content,
    typed: policy.typedContent.case === undefined
      ? undefined
      : { case: policy.typedContent.case, value: policy.typedContent.value },
  };
}

const KINDS: Partial<Record<EventType, PolicyEvent["kind"]>> = {
  [EventType.SNAPSHOT]: "SNAPSHOT",
  [EventType.CREATED]: "CREATED",
  [EventType.UPDATED]: "UPDATED",
  [EventType.DELETED]: "DELETED",
};

/** The engine event of a wire message, or undefined for commands and unknown kinds. */
export function toPolicyEvent(update: PolicyUpdate): PolicyEvent | undefined {
  const kind = KINDS[update.type];
  if (!kind) return undefined;
  return {
    kind,
    policy: update.policy ? toCachedPolicy(update.policy) : undefined,
    snapshotComplete: update.snapshotComplete,
  };
}

/** Options of {@linkcode runStreamSession}. */
export interface StreamSessionOptions {
  client: PolicyClient;
  clientId: string;
  /** Revision to resume from (0 asks for a full snapshot). */
  lastRevision: bigint;
  engine: SyncEngine;
  logger: Logger;
  signal: AbortSignal;
  /** A METADATA_REQUEST arrived: send a heartbeat. */
  onMetadataRequest: () => void;
  /** A DISK_ENCRYPTION_TASK arrived. */
  onDiskEncryptionTask?: () => void;
  /**
   * The stream answered the subscription: a complete snapshot, a delta, or response headers saying the
   * agent's revision is current (`svc-up-to-date`, sent by the server's hub when it has nothing to send).
   */
  onInSync: (how: "snapshot" | "delta" | "up to date") => void;
  /** The revision advanced. */
  onRevision: (revision: bigint) => void;
  /** The server answered the subscription (response headers or a first message): it is alive. */
  onAnswer?: () => void;
}

/**
 * Runs the stream until it ends, breaks or `signal` aborts. Resolves when the server ends the
 * stream; rejects with the stream error otherwise.
 */
export async function runStreamSession(options: StreamSessionOptions): Promise<void> {
  const { engine, logger } = options;
  const stream = options.client.subscribePolicyUpdates(
    { clientId: options.clientId, lastKnownRevision: options.lastRevision },
    { signal: options.signal },
  );
  stream.call.on("metadata", (headers) => {
    options.onAnswer?.();
    if (headers.get(UP_TO_DATE_HEADER).length > 0) options.onInSync("up to date");
  });
  for await (const update of stream) {
    options.onAnswer?.();
    switch (update.type) {
      case EventType.METADATA_REQUEST:
        logger.info("metadata requested by the server");
        options.onMetadataRequest();
        continue;
      case EventType.DISK_ENCRYPTION_TASK:
        logger.info("disk encryption task announced by the server");
        options.onDiskEncryptionTask?.();
        continue;
    }
    const event = toPolicyEvent(update);
    if (!event) {
      logger.warn("unknown stream event ignored", { type: update.type });
      continue;
    }
    engine.handleEvent(event);
    if (event.kind !== "SNAPSHOT" || event.snapshotComplete) options.onRevision(update.revision);
    if (event.kind !== "SNAPSHOT") options.onInSync("delta");
    else if (event.snapshotComplete) options.onInSync("snapshot");
  }
}
