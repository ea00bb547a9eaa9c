/**
 * Actions on many nodes at once (the node list's bulk actions): the nodes a list filter matches, and one
 * node's share of a bulk move to a group, re-enrollment or deletion. Each per-node function changes one node
 * in the caller's transaction (the route runs each in a savepoint of its own, so one node's refusal leaves
 * the others done) and returns what it did in names, for the audit row of that node.
 */
import type { Queryable } from "../db/db.ts";
import { queryOne } from "../db/db.ts";
import { publishLiveHint } from "../events/publish.ts";
import { forbiddenError, found, notFoundError } from "../core/errors.ts";
import { Params } from "../db/pagination.ts";
import {
  createReEnrollmentToken,
  type NodeFilter,
  nodeFilterWhere,
  type ReEnrollmentToken,
  revokeNode,
} from "./nodes.ts";

/** The most nodes one bulk request may name (and "select all matching" may select). */
export const MAX_BULK_NODES = 1000;

/** The nodes a list filter matches, by name, at most {@link MAX_BULK_NODES}, with the full count. */
export async function matchingNodes(
  q: Queryable,
  filter: NodeFilter,
): Promise<{ items: Array<{ id: string; name: string }>; total: number }> {
  const params = new Params();
  const where = nodeFilterWhere(filter, params);
  const sql = where.length ? ` WHERE ${where.join(" AND ")}` : "";
  const items = await q.query<{ id: string; name: string }>(
    `SELECT n.id, n.name FROM nodes n${sql} ORDER BY n.name, n.id LIMIT ${MAX_BULK_NODES}`,
    params.values,
  );
  const [count] = await q.query<{ total: number }>(
    `SELECT count(*)::int AS total FROM nodes n${sql}`,
    params.values,
  );
  return { items, total: count.total };
}

/** The name of node `id` (not_found otherwise), for per-node results of a bulk action. */
export async function nodeName(q: Queryable, id: string): Promise<string> {
  const row = await queryOne<{ name: string }>(q, "SELECT name FROM nodes WHERE id = $1", [id]);
  return found(row, `node ${id}`).name;
}

/** What a move did to one node. */
export interface NodeMove {
  name: string;
  /** The target group's name. */
  joined: string;
  /** Whether the node was already in the target group. */
  alreadyMember: boolean;
  /** Names of the groups it left. */
  left: string[];
}

/**
 * Puts node `nodeId` into group `groupId` and, unless `keepOtherGroups`, takes it out of every other group.
 * Publishes no resync (spec: Events 2): the agent reads its groups when its stream next opens.
 */
export async function moveNodeToGroup(
  q: Queryable,
  nodeId: string,
  groupId: string,
  options: { keepOtherGroups?: boolean } = {},
): Promise<NodeMove> {
  const node = await queryOne<{ name: string }>(q, "SELECT name FROM nodes WHERE id = $1 FOR UPDATE", [
    nodeId,
  ]);
  if (!node) throw notFoundError(`node ${nodeId}`);
  const group = found(
    await queryOne<{ name: string }>(q, "SELECT name FROM node_groups WHERE id = $1", [groupId]),
    `node group ${groupId}`,
  );
  const left = options.keepOtherGroups ? [] : await q.query<{ name: string }>(
    `DELETE FROM node_group_members m USING node_groups g
     WHERE m.node_id = $1 AND m.node_group_id <> $2 AND g.id = m.node_group_id RETURNING g.name`,
    [nodeId, groupId],
  );
  const added = await q.query(
    `INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)
     ON CONFLICT DO NOTHING RETURNING node_id`,
    [nodeId, groupId],
  );
  await publishLiveHint(q, { topic: "nodes", ids: [nodeId] });
  return {
    name: node.name,
    joined: group.name,
    alreadyMember: added.length === 0,
    left: left.map((g) => g.name).sort(),
  };
}

/** What re-enrolling one node did. */
export interface NodeReEnrollment extends ReEnrollmentToken {
  /** Serials revoked first (none when the certificate was revoked already). */
  revoked_serials: string[];
}

/**
 * Re-enrolls node `nodeId`: revokes its certificates when they are still valid (its stream closes), then
 * issues its single-use re-enrollment token (valid 5 minutes).
 */
export async function prepareReEnrollment(
  q: Queryable,
  nodeId: string,
  options: { createdBy: string; mayRevoke: boolean },
): Promise<NodeReEnrollment> {
  const node = await queryOne<{ valid: boolean }>(
    q,
    `SELECT n.cert_serial IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM revoked_certificates rc WHERE rc.serial = lower(n.cert_serial)) AS valid
     FROM nodes n WHERE n.id = $1`,
    [nodeId],
  );
  if (!node) throw notFoundError(`node ${nodeId}`);
  if (node.valid && !options.mayRevoke) {
    throw forbiddenError(
      "its certificate is still valid and re-enrolling revokes it first: permission node:revoke is required",
    );
  }
  const revoked = node.valid ? await revokeNode(q, nodeId, { reason: "re-enrollment" }) : [];
  const token = await createReEnrollmentToken(q, nodeId, { createdBy: options.createdBy });
  return { ...token, revoked_serials: revoked };
}
