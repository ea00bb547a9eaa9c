/**
 * How domain code tells the policy hub that something changed, without knowing about streams.
 *
 * A resync is recorded in the database inside the caller's transaction (revision high-water mark + event
 * row) and announced with NOTIFY, which PostgreSQL delivers only on commit, to every replica. A rolled-back
 * change therefore never reaches an agent, and a change made through replica A reaches streams on replica B.
 * It sits beside the live-event notices (publish.ts) below both the domain that sends and the hub that
 * listens, so neither imports the other.
 */
import { notifyIn, type Queryable } from "../db/db.ts";

/** NOTIFY channel carrying hub events (payload: JSON {@link HubNotice}). */
export const HUB_CHANNEL = "svc_hub";

/** What travels on {@link HUB_CHANNEL}. */
export type HubNotice =
  | { kind: "resync"; revision: number; nodeGroupIds: string[] }
  | { kind: "node_command"; nodeId: string; command: NodeCommand };

/** Targeted commands for one node's open streams. */
export type NodeCommand = "metadata_request" | "disk_encryption_task" | "disconnect";

/**
 * Publishes a resync for the given node groups inside transaction `tx`; returns the new revision.
 * An empty list publishes nothing (a change that reaches no group needs no snapshot) and returns 0.
 */
export async function publishResync(tx: Queryable, nodeGroupIds: readonly string[]): Promise<number> {
  const groups = [...new Set(nodeGroupIds)].sort();
  if (groups.length === 0) return 0;
  const [row] = await tx.query<{ revision: number }>(
    "UPDATE hub_state SET revision = revision + 1 WHERE id RETURNING revision",
  );
  await tx.query(
    "INSERT INTO hub_events (revision, kind, node_group_ids) VALUES ($1, 'resync', $2::uuid[])",
    [row.revision, groups],
  );
  const notice: HubNotice = { kind: "resync", revision: row.revision, nodeGroupIds: groups };
  await notifyIn(tx, HUB_CHANNEL, JSON.stringify(notice));
  return row.revision;
}

/** Sends a targeted command to a node's open streams on whichever replica holds them. */
export async function sendNodeCommand(q: Queryable, nodeId: string, command: NodeCommand): Promise<void> {
  const notice: HubNotice = { kind: "node_command", nodeId, command };
  await notifyIn(q, HUB_CHANNEL, JSON.stringify(notice));
}

/** True when the node has at least one open stream on a live replica (e.g. before a METADATA_REQUEST). */
export async function isNodeConnected(q: Queryable, nodeId: string): Promise<boolean> {
  const rows = await q.query("SELECT 1 FROM node_streams WHERE node_id = $1 LIMIT 1", [nodeId]);
  return rows.length > 0;
}
