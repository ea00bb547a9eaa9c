/**
 * Node groups: the unit policies are bound to, their members, and the one-time enrollment tokens that put a
 * new node into a group. Membership edits publish no resync (spec: a node reads its groups when its stream
 * opens). Deleting a group is refused while it still has bindings or members unless forced; a forced delete
 * that removes enabled bindings publishes a resync for the group, as deleting those bindings one by one would.
 */
import { createHash } from "node:crypto";
import { type Queryable, queryOne } from "../db/db.ts";
import { publishResync } from "../events/hub_notice.ts";
import { conflictError, found, invalidError, notFoundError } from "../core/errors.ts";
import {
  likePattern,
  type ListOptions,
  orderBy,
  type Page,
  type PageRequest,
  Params,
  selectPage,
} from "../db/pagination.ts";
import { assertNameFree, lockRow } from "./records.ts";

/** Lifetime of an enrollment token (spec: 5 minutes, single use). */
export const ENROLLMENT_TOKEN_TTL_MS = 5 * 60 * 1000;
/** Longest life an operator may give a token (`svc-server create-token --valid-for`, scripted installs). */
export const MAX_ENROLLMENT_TOKEN_TTL_MS = 24 * 60 * 60 * 1000;

/** The REST node group record. */
export interface NodeGroupRecord {
  id: string;
  name: string;
  description: string;
  node_count: number;
  bindings_count: number;
  enabled_bindings_count: number;
  created_at: Date;
  updated_at: Date;
}

/**
 * SQL: the number of members of the group with id `groupId` (an SQL expression), from the signed deltas that
 * membership statements append (migrations/0022): exact at every commit, a few rows per group.
 */
export function memberCountSql(groupId: string): string {
  return `(SELECT coalesce(sum(s.n), 0)::int FROM node_group_sizes s WHERE s.node_group_id = ${groupId})`;
}

/**
 * Folds each group's size deltas into one row, so reading a size stays a few rows however many enrollments
 * came (the read-model worker runs it now and then). Deltas appended meanwhile are left for the next fold.
 */
export async function foldGroupSizes(q: Queryable): Promise<void> {
  await q.query(
    `WITH folded AS (DELETE FROM node_group_sizes RETURNING node_group_id, n)
     INSERT INTO node_group_sizes (node_group_id, n)
     SELECT f.node_group_id, sum(f.n) FROM folded f
      WHERE EXISTS (SELECT 1 FROM node_groups g WHERE g.id = f.node_group_id)
      GROUP BY 1 HAVING sum(f.n) <> 0`,
  );
}

const COLUMNS = `g.id, g.name, g.description, ${memberCountSql("g.id")} AS node_count,
  (SELECT count(*)::int FROM policy_bindings b WHERE b.node_group_id = g.id) AS bindings_count,
  (SELECT count(*)::int FROM policy_bindings b WHERE b.node_group_id = g.id AND b.state = 'enabled')
    AS enabled_bindings_count,
  g.created_at, g.updated_at`;

/** Public sort names → SQL. */
export const NODE_GROUP_SORT_COLUMNS: Record<string, string> = {
  name: "g.name",
  created_at: "g.created_at",
  updated_at: "g.updated_at",
  node_count: memberCountSql("g.id"),
};

/** Lists node groups, optionally filtered by a name substring. */
export async function listNodeGroups(
  q: Queryable,
  filter: { search?: string },
  options: ListOptions,
): Promise<Page<NodeGroupRecord>> {
  const params = new Params();
  return await selectPage<NodeGroupRecord>(q, {
    columns: COLUMNS,
    from: "node_groups g",
    where: filter.search ? [`g.name ILIKE ${params.add(likePattern(filter.search))} ESCAPE '\\'`] : [],
    params: params.values,
    orderBy: orderBy(options.sort ?? {}, {
      columns: NODE_GROUP_SORT_COLUMNS,
      fallback: "name",
      tiebreak: "g.id",
      nullable: [],
    }),
    page: options.page,
    // Members and bindings are counted for the page's groups only.
    pageKey: "g.id",
  });
}

/** Reads one node group; throws not_found. */
export async function getNodeGroup(
  q: Queryable,
  id: string,
  options: { lock?: boolean } = {},
): Promise<NodeGroupRecord> {
  if (options.lock) await lockRow(q, { table: "node_groups", id, what: `node group ${id}` });
  const row = await queryOne<NodeGroupRecord>(q, `SELECT ${COLUMNS} FROM node_groups g WHERE g.id = $1`, [
    id,
  ]);
  return found(row, `node group ${id}`);
}

/** Creates a node group with a unique name. */
export async function createNodeGroup(
  q: Queryable,
  input: { name: string; description?: string },
): Promise<NodeGroupRecord> {
  await assertNameFree(q, { table: "node_groups", noun: "node group", name: input.name });
  const [row] = await q.query<{ id: string }>(
    "INSERT INTO node_groups (name, description) VALUES ($1, $2) RETURNING id",
    [input.name, input.description ?? ""],
  );
  return await getNodeGroup(q, row.id);
}

/** Renames or re-describes a node group. Publishes nothing: what a node receives does not change. */
export async function updateNodeGroup(
  q: Queryable,
  id: string,
  input: { name?: string; description?: string },
): Promise<NodeGroupRecord> {
  const current = await getNodeGroup(q, id, { lock: true });
  if (input.name !== undefined) {
    await assertNameFree(q, { table: "node_groups", noun: "node group", name: input.name, exceptId: id });
  }
  await q.query(
    "UPDATE node_groups SET name = $2, description = $3, updated_at = now() WHERE id = $1",
    [id, input.name ?? current.name, input.description ?? current.description],
  );
  return await getNodeGroup(q, id);
}

/**
 * Deletes a node group. Without `force` it is refused while bindings or members remain (the message says
 * how many). With `force` the bindings and memberships go with it; if any binding was enabled, a resync is
 * published for the group so the affected streams drop the policies now rather than at their next reconnect.
 */
export async function deleteNodeGroup(
  q: Queryable,
  id: string,
  options: { force?: boolean } = {},
): Promise<NodeGroupRecord> {
  const current = await getNodeGroup(q, id, { lock: true });
  if (!options.force && (current.bindings_count > 0 || current.node_count > 0)) {
    throw conflictError(
      `cannot delete node group "${current.name}": it still has ${current.bindings_count} binding(s) and ${current.node_count} member(s); remove them first or delete with force=true`,
    );
  }
  await q.query("DELETE FROM node_groups WHERE id = $1", [id]);
  if (current.enabled_bindings_count > 0) await publishResync(q, [id]);
  return current;
}

/** A member of a node group. */
export interface NodeGroupMember {
  node_id: string;
  name: string;
  fqdn: string;
  status: string;
  added_at: Date;
}

/** Lists the members of a node group. */
export async function listMembers(
  q: Queryable,
  groupId: string,
  options: { page: PageRequest },
): Promise<Page<NodeGroupMember>> {
  await getNodeGroup(q, groupId);
  return await selectPage<NodeGroupMember>(q, {
    columns: "n.id AS node_id, n.name, n.fqdn, n.status, m.created_at AS added_at",
    from: "node_group_members m JOIN nodes n ON n.id = m.node_id",
    where: ["m.node_group_id = $1"],
    params: [groupId],
    orderBy: "ORDER BY n.name, n.id",
    page: options.page,
  });
}

/**
 * Adds nodes to a group (already-present members are kept, not an error). Publishes no resync: the spec has
 * membership reach an agent at its next reconnect. Returns the ids actually added.
 */
export async function addMembers(
  q: Queryable,
  groupId: string,
  nodeIds: readonly string[],
): Promise<string[]> {
  await getNodeGroup(q, groupId);
  const unique = [...new Set(nodeIds)];
  const found = await q.query<{ id: string }>("SELECT id FROM nodes WHERE id = ANY($1::uuid[])", [unique]);
  const known = new Set(found.map((r) => r.id));
  const missing = unique.map((id, i) => ({ id, i })).filter(({ id }) => !known.has(id));
  if (missing.length > 0) {
    const fields = missing.map(({ id, i }) => ({
      field: `node_ids[${i}]`,
      message: `node ${id} does not exist`,
    }));
    throw invalidError(`${fields[0].field}: ${fields[0].message}`, fields);
  }
  const added = await q.query<{ node_id: string }>(
    `INSERT INTO node_group_members (node_id, node_group_id) SELECT unnest($1::uuid[]), $2
     ON CONFLICT DO NOTHING RETURNING node_id`,
    [unique, groupId],
  );
  return added.map((r) => r.node_id);
}

/** Removes a node from a group; throws not_found when it is not a member. Publishes no resync. */
export async function removeMember(q: Queryable, groupId: string, nodeId: string): Promise<void> {
  await getNodeGroup(q, groupId);
  const rows = await q.query(
    "DELETE FROM node_group_members WHERE node_group_id = $1 AND node_id = $2 RETURNING node_id",
    [groupId, nodeId],
  );
  if (rows.length === 0) throw notFoundError(`node ${nodeId} in node group ${groupId}`);
}

/** A freshly created enrollment token: the plaintext exists only in this value. */
export interface EnrollmentToken {
  token: string;
  node_group_id: string;
  expires_at: Date;
}

/**
 * Creates a one-time enrollment token for a node group: 32 random bytes, base64url. Only its SHA-256 (hex) is
 * stored; the plaintext is returned once. Expired tokens are purged on the way.
 */
export async function createEnrollmentToken(
  q: Queryable,
  groupId: string,
  options: { createdBy: string; now?: Date; ttlMs?: number },
): Promise<EnrollmentToken> {
  await getNodeGroup(q, groupId);
  const now = options.now ?? new Date();
  const token = encodeBase64Url(crypto.getRandomValues(new Uint8Array(32)));
  const ttl = Math.min(options.ttlMs ?? ENROLLMENT_TOKEN_TTL_MS, MAX_ENROLLMENT_TOKEN_TTL_MS);
  const expiresAt = new Date(now.getTime() + ttl);
  await q.query("DELETE FROM enrollment_tokens WHERE expires_at < $1", [now]);
  await q.query(
    "INSERT INTO enrollment_tokens (token_hash, node_group_id, expires_at, created_by) VALUES ($1, $2, $3, $4)",
    [sha256Hex(token), groupId, expiresAt, options.createdBy],
  );
  return { token, node_group_id: groupId, expires_at: expiresAt };
}

/**
 * Lowercase hex SHA-256 of a token's UTF-8 text, the form stored in `enrollment_tokens.token_hash`.
 * Synchronous (node:crypto): a WebCrypto digest is an asynchronous operation costing several times the hash
 * itself, paid on every enrollment and API-token request.
 */
export function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

function encodeBase64Url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
