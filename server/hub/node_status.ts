/**
 * Node status, derived from the policy streams recorded in `node_streams` (one row per open stream, on any
 * replica) and from what the agent reports.
 *
 * The rule:
 * - `online`: the node has at least one open stream that has completed its initial sync;
 * - `degraded`: online, but the agent's last heartbeat said it is unhealthy (`healthy = false`), or the
 *   latest compliance result of a policy that still reaches the node is `error`;
 * - `offline`: the last open stream of the node closed (streams on every replica count), the replica
 *   holding it stopped updating its liveness row (or, with the embedded database, the previous server
 *   process holding it is gone), or its certificate was revoked (`certificate revoked`, set by the
 *   revocation itself);
 * - `unknown`: enrolled, never synced.
 *
 * Every change of a node's stream set first locks the node row, then reads `node_streams` in a new
 * statement. Without the lock, a stream closing on one replica while another opens elsewhere could both
 * read "no other stream" and leave an agent that is connected marked offline.
 */
import type { Db, Queryable } from "../db/db.ts";
import { DELIVERS_SQL } from "../domain/reach.ts";
import { publishLiveHint } from "../events/publish.ts";

/**
 * SQL giving `online` or `degraded` for node `n` (with a reason), assuming it is connected. The compliance
 * part counts only results whose policy still reaches the node: a result left from an unbound policy says
 * nothing about the node today. "Reaches" is read from the binding tables, not the reach model, which may lag
 * a large change: an error reported on a policy delivered a moment ago must degrade the node now.
 */
const CONNECTED_STATUS_SQL = `
  SELECT CASE WHEN NOT n.agent_healthy OR e.policy_name IS NOT NULL THEN 'degraded' ELSE 'online' END AS status,
    CASE
      WHEN NOT n.agent_healthy THEN 'agent reports it is unhealthy' ||
        CASE WHEN n.agent_health_message <> '' THEN ': ' || n.agent_health_message ELSE '' END
      WHEN e.policy_name IS NOT NULL THEN 'compliance error on policy "' || e.policy_name || '"'
      ELSE ''
    END AS reason
  FROM nodes n
  LEFT JOIN LATERAL (
    SELECT p.name AS policy_name FROM compliance_results r JOIN policies p ON p.id = r.policy_id
    WHERE r.node_id = n.id AND r.status = 'error' AND ${DELIVERS_SQL}
    ORDER BY p.name LIMIT 1
  ) e ON true
  WHERE n.id = $1`;

async function lockNode(q: Queryable, nodeId: string): Promise<boolean> {
  // NO KEY UPDATE: orders stream changes of the node without waiting for a reach refresh of it (KEY SHARE).
  const rows = await q.query("SELECT 1 FROM nodes WHERE id = $1 FOR NO KEY UPDATE", [nodeId]);
  return rows.length > 0;
}

async function setConnectedStatus(q: Queryable, nodeId: string): Promise<void> {
  const [row] = await q.query<{ status: string; reason: string }>(CONNECTED_STATUS_SQL, [nodeId]);
  if (!row) return;
  const changed = await q.query(
    `UPDATE nodes SET status = $2, status_reason = $3, updated_at = now()
     WHERE id = $1 AND (status <> $2 OR status_reason <> $3) RETURNING id`,
    [nodeId, row.status, row.reason],
  );
  // Consoles hear of a transition, not of every heartbeat.
  if (changed.length > 0) await publishLiveHint(q, { topic: "nodes", ids: [nodeId] });
}

/**
 * Records an open stream (after its initial sync was sent) and marks the node online or degraded.
 * Returns false, recording nothing, when the node no longer exists or the certificate the stream was opened
 * with has been revoked since: revocation takes the node offline and removes its stream rows in its own
 * transaction (under the same node lock), and a stream that finished its initial sync just then must not
 * bring the node back online.
 */
export async function recordStreamOpen(
  db: Db,
  stream: { id: string; nodeId: string; replicaId: string; serial: string },
): Promise<boolean> {
  return await db.transaction(async (tx) => {
    if (!(await lockNode(tx, stream.nodeId))) return false;
    const revoked = await tx.query("SELECT 1 FROM revoked_certificates WHERE serial = $1", [stream.serial]);
    if (revoked.length > 0) return false;
    await tx.query(
      "INSERT INTO node_streams (id, node_id, replica_id) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
      [stream.id, stream.nodeId, stream.replicaId],
    );
    await setConnectedStatus(tx, stream.nodeId);
    return true;
  });
}

/** Forgets a closed stream; marks the node offline when it was the node's last stream on any replica. */
export async function recordStreamClosed(db: Db, stream: { id: string; nodeId: string }): Promise<void> {
  await db.transaction(async (tx) => {
    if (!(await lockNode(tx, stream.nodeId))) return;
    await tx.query("DELETE FROM node_streams WHERE id = $1", [stream.id]);
    await markOfflineIfNoStream(tx, [stream.nodeId], "policy stream closed");
  });
}

/**
 * Marks nodes offline that have no stream left (locks them first, in id order so two replicas reaping the
 * same nodes cannot deadlock). Nodes still connected elsewhere keep their status.
 */
export async function markNodesOffline(db: Db, nodeIds: readonly string[], reason: string): Promise<void> {
  if (nodeIds.length === 0) return;
  await db.transaction(async (tx) => {
    await tx.query("SELECT 1 FROM nodes WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE", [nodeIds]);
    await markOfflineIfNoStream(tx, nodeIds, reason);
  });
}

async function markOfflineIfNoStream(
  tx: Queryable,
  nodeIds: readonly string[],
  reason: string,
): Promise<void> {
  const offline = await tx.query<{ id: string }>(
    `UPDATE nodes n SET status = 'offline', status_reason = $2, updated_at = now()
     WHERE n.id = ANY($1::uuid[]) AND n.status IN ('online', 'degraded')
       AND NOT EXISTS (SELECT 1 FROM node_streams s WHERE s.node_id = n.id)
     RETURNING n.id`,
    [nodeIds, reason],
  );
  if (offline.length > 0) await publishLiveHint(tx, { topic: "nodes", ids: offline.map((r) => r.id) });
}

/**
 * Re-evaluates online versus degraded after a heartbeat or a compliance report. A node that is not
 * connected keeps its status: a report arriving just before the initial sync completes must not flip
 * `unknown` or `offline`.
 */
export async function refreshConnectedStatus(db: Db, nodeId: string): Promise<void> {
  await db.transaction(async (tx) => {
    if (!(await lockNode(tx, nodeId))) return;
    const streams = await tx.query("SELECT 1 FROM node_streams WHERE node_id = $1 LIMIT 1", [nodeId]);
    if (streams.length === 0) return;
    await setConnectedStatus(tx, nodeId);
  });
}
