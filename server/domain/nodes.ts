/**
 * Nodes: enrolled machines. Listing and reading, notes, certificate revocation, deletion and the metadata
 * request. Revocation is enforced by the server (no CRL): every serial ever issued to the node goes into
 * `revoked_certificates`, which both ports consult on every call, and the node's open streams are told to
 * close. Deleting a node revokes first, so a deleted node's certificate stays refused.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { NODE_STATUS_COUNTS_SQL } from "../db/fleet_totals.ts";
import { isNodeConnected, sendNodeCommand } from "../events/hub_notice.ts";
import { publishLiveHint } from "../events/publish.ts";
import { NODE_COUNTS, nodeComplianceSummary, type StatusCounts } from "./compliance.ts";
import { conflictError, notFoundError } from "../core/errors.ts";
import { ENROLLMENT_TOKEN_TTL_MS, sha256Hex } from "./node_groups.ts";
import { likePattern, type ListOptions, orderBy, type Page, Params, selectPage } from "../db/pagination.ts";

/** Node statuses. */
export const NODE_STATUSES = ["online", "degraded", "offline", "unknown"] as const;
/** A node status. */
export type NodeStatus = (typeof NODE_STATUSES)[number];

/**
 * Certificate expiry buckets, in the order the dashboard draws them. Every node is in exactly one:
 * `expired` (not after now), `within_7_days` (up to 7 days left), `within_30_days` (7–30),
 * `within_90_days` (30–90), `later` (more than 90), `none` (no certificate recorded) and `revoked` (its
 * current certificate is revoked: it will never be renewed, so its expiry date means nothing).
 */
export const EXPIRY_BUCKETS = [
  "expired",
  "within_7_days",
  "within_30_days",
  "within_90_days",
  "later",
  "none",
  "revoked",
] as const;
/** A certificate expiry bucket. */
export type ExpiryBucket = (typeof EXPIRY_BUCKETS)[number];

/**
 * The bucket of node `n`, against the database clock: one expression for the dashboard's counts and the
 * node list's filter, so a dashboard number and the list it links to agree.
 */
export const EXPIRY_BUCKET_SQL = `CASE
    WHEN n.cert_not_after IS NULL THEN 'none'
    -- IN rather than EXISTS: one hashed read of the revocation list, not a probe per node.
    WHEN lower(n.cert_serial) IN (SELECT rc.serial FROM revoked_certificates rc) THEN 'revoked'
    WHEN n.cert_not_after <= now() THEN 'expired'
    WHEN n.cert_not_after <= now() + interval '7 days' THEN 'within_7_days'
    WHEN n.cert_not_after <= now() + interval '30 days' THEN 'within_30_days'
    WHEN n.cert_not_after <= now() + interval '90 days' THEN 'within_90_days'
    ELSE 'later'
  END`;

/** A node in a list. */
export interface NodeSummary {
  id: string;
  name: string;
  status: NodeStatus;
  status_reason: string;
  fqdn: string;
  ip_address: string;
  os_name: string;
  os_version: string;
  desktop_environments: string[];
  agent_version: string;
  last_seen: Date | null;
  cert_not_after: Date | null;
  groups: { id: string; name: string }[];
  created_at: Date;
  /** When the node's oldest open policy stream was opened (null while it has none). */
  connected_since: Date | null;
}

/** Worst compliance status of a node over the policies that reach it (`none`: no policy reaches it). */
export const COMPLIANCE_ROLLUPS = [
  "error",
  "non_compliant",
  "unknown",
  "compliant",
  "inapplicable",
  "none",
] as const;
/** A compliance rollup. */
export type ComplianceRollup = (typeof COMPLIANCE_ROLLUPS)[number];

/** A node in the list, with its compliance rollup. */
export interface NodeListItem extends NodeSummary {
  compliance_rollup: {
    worst: ComplianceRollup;
    /** Policies that reach the node. */
    total: number;
    /** Of those, error or non-compliant. */
    problems: number;
    /** Of those, not reported yet. */
    unknown: number;
  };
}

/** The full node record. */
export interface NodeRecord extends NodeSummary {
  machine_id: string;
  gnome_version: string;
  agent_healthy: boolean;
  agent_health_message: string;
  cert_serial: string | null;
  /** True when the current certificate serial is on the revoked list. */
  cert_revoked: boolean;
  notes: string;
  updated_at: Date;
  /** True while the node has an open policy stream on some replica. */
  connected: boolean;
  /** Latest results of the policies that reach the node, counted per status. */
  compliance: StatusCounts;
}

/** SQL of the worst status of node `n` over the policies that reach it, from its counters `c`. */
const WORST_SQL = `(CASE
    WHEN ${NODE_COUNTS.total} = 0 THEN 'none'
    WHEN c.error > 0 THEN 'error'
    WHEN c.non_compliant > 0 THEN 'non_compliant'
    WHEN ${NODE_COUNTS.unknown} > 0 THEN 'unknown'
    WHEN c.compliant > 0 THEN 'compliant'
    ELSE 'inapplicable' END)`;

const ROLLUP_SQL = `jsonb_build_object('worst', ${WORST_SQL}, 'total', ${NODE_COUNTS.total},
  'problems', ${NODE_COUNTS.problems}, 'unknown', ${NODE_COUNTS.unknown})`;

/** `sql` over the node's compliance counters `c` (one primary-key read per node it is computed for). */
function fromCounters(sql: string): string {
  return `(SELECT ${sql} FROM node_compliance_counts c WHERE c.node_id = n.id)`;
}

const GROUPS_SQL = `coalesce((SELECT json_agg(json_build_object('id', g.id, 'name', g.name) ORDER BY g.name)
  FROM node_group_members m JOIN node_groups g ON g.id = m.node_group_id WHERE m.node_id = n.id), '[]'::json)`;

const SUMMARY_COLUMNS =
  `n.id, n.name, n.status, n.status_reason, n.fqdn, n.ip_address, n.os_name, n.os_version,
  n.desktop_environments, n.agent_version, n.last_seen, n.cert_not_after, ${GROUPS_SQL} AS groups, n.created_at,
  (SELECT min(s.opened_at) FROM node_streams s WHERE s.node_id = n.id) AS connected_since`;

/** Public sort names → SQL. */
export const NODE_SORT_COLUMNS: Record<string, string> = {
  name: "n.name",
  status: "n.status",
  os: "n.os_name",
  agent_version: "n.agent_version",
  last_seen: "n.last_seen",
  cert_not_after: "n.cert_not_after",
  created_at: "n.created_at",
};

/** Filters of the node list. */
export interface NodeFilter {
  status?: NodeStatus;
  /** A node group id, or `none` for nodes in no group. */
  group?: string;
  /** Exact operating system name. */
  os?: string;
  /** Exact agent version. */
  agentVersion?: string;
  /** Exact desktop environment, e.g. `GNOME`. */
  desktop?: string;
  /** Case-insensitive substring of name, FQDN, IP address or machine id. */
  search?: string;
  /** Worst compliance status over the policies that reach the node. */
  compliance?: ComplianceRollup;
  /** Certificate expiry bucket (the dashboard's). */
  certExpiry?: ExpiryBucket;
}

/** The SQL conditions on nodes `n` of a node list filter (values go into `params`). */
export function nodeFilterWhere(filter: NodeFilter, params: Params): string[] {
  const where: string[] = [];
  if (filter.status) where.push(`n.status = ${params.add(filter.status)}`);
  if (filter.group === "none") {
    where.push("NOT EXISTS (SELECT 1 FROM node_group_members m WHERE m.node_id = n.id)");
  } else if (filter.group) {
    where.push(
      `EXISTS (SELECT 1 FROM node_group_members m WHERE m.node_id = n.id AND m.node_group_id = ${
        params.add(filter.group)
      })`,
    );
  }
  if (filter.os) where.push(`n.os_name = ${params.add(filter.os)}`);
  if (filter.agentVersion) where.push(`n.agent_version = ${params.add(filter.agentVersion)}`);
  if (filter.desktop) where.push(`${params.add(filter.desktop)} = ANY(n.desktop_environments)`);
  if (filter.search) {
    const like = params.add(likePattern(filter.search));
    // One match over the four fields joined by a unit separator (a control character, which a name, address or
    // machine id never holds, so no match spans two fields): a quarter of the per-row work of four ILIKEs.
    where.push(
      `(n.name || E'\\x1f' || n.fqdn || E'\\x1f' || n.ip_address || E'\\x1f' || n.machine_id) ILIKE ${like} ESCAPE '\\'`,
    );
  }
  if (filter.compliance) where.push(`${fromCounters(WORST_SQL)} = ${params.add(filter.compliance)}`);
  if (filter.certExpiry) where.push(`${EXPIRY_BUCKET_SQL} = ${params.add(filter.certExpiry)}`);
  return where;
}

/** Lists nodes, filtered, sorted and paginated. */
export async function listNodes(
  q: Queryable,
  filter: NodeFilter,
  options: ListOptions,
): Promise<Page<NodeListItem>> {
  const params = new Params();
  const narrowed = nodeFilterWhere({ ...filter, search: undefined }, params);
  const searched = filter.search ? nodeFilterWhere({ search: filter.search }, params) : [];
  const where = [...narrowed, ...searched];
  const sortOptions = {
    columns: NODE_SORT_COLUMNS,
    fallback: "name",
    tiebreak: "n.name, n.id",
    nullable: ["last_seen", "cert_not_after"],
  };
  return await selectPage<NodeListItem>(q, {
    columns: `${SUMMARY_COLUMNS}, ${fromCounters(ROLLUP_SQL)} AS compliance_rollup`,
    from: "nodes n",
    where,
    params: params.values,
    orderBy: orderBy(options.sort ?? {}, sortOptions),
    // The total of an unfiltered or status-only list is the status totals' (a few rows, exact at every commit),
    // not a count over 50,000 index entries; knowing it, a page past the middle is read from the far end.
    total: await statusOnlyTotal(q, filter),
    reverseOrderBy: orderBy(options.sort ?? {}, { ...sortOptions, reverse: true }),
    page: options.page,
    pageKey: "n.id",
    // A search's matches may sit anywhere in the sort's order, and the planner, walking the sort column's index
    // and testing each node, read 40,000 nodes for page 1 of "node-04" at 100,000. Behind the fence (OFFSET 0)
    // the matches are found first (the trigram index, migration 0023) and only they are sorted.
    // The other conditions are tested on the matches, outside the fence (inside too, each match would be
    // rechecked twice).
    keyFrom: filter.search ? `(SELECT * FROM nodes n WHERE ${searched.join(" AND ")} OFFSET 0) n` : undefined,
    keyWhere: filter.search ? narrowed : undefined,
    // The index only proposes candidates (10,366 for the 10,000 nodes matching "node-04" at 100,000): each is
    // rechecked against its text, ~30 ms for these. Counted with the page, they are rechecked once, not twice.
    countWithPage: Boolean(filter.search),
  });
}

/**
 * The number of nodes a filter matches when it filters by status alone (or not at all), from the status
 * totals; undefined for any other filter (the list then counts its matches).
 */
async function statusOnlyTotal(q: Queryable, filter: NodeFilter): Promise<number | undefined> {
  const narrowed = Object.entries(filter).some(([key, value]) => key !== "status" && value);
  if (narrowed) return undefined;
  const counts = await q.query<{ key: NodeStatus; n: number }>(NODE_STATUS_COUNTS_SQL);
  return counts.reduce((sum, row) => (!filter.status || row.key === filter.status ? sum + row.n : sum), 0);
}

/** Distinct values for the list's filter drop-downs. */
export async function nodeFilterOptions(
  q: Queryable,
): Promise<{ os: string[]; agent_versions: string[]; desktops: string[] }> {
  const os = await q.query<{ v: string }>(
    "SELECT DISTINCT os_name AS v FROM nodes WHERE os_name <> '' ORDER BY 1",
  );
  const versions = await q.query<{ v: string }>(
    "SELECT DISTINCT agent_version AS v FROM nodes WHERE agent_version <> '' ORDER BY 1",
  );
  const desktops = await q.query<{ v: string }>(
    "SELECT DISTINCT unnest(desktop_environments) AS v FROM nodes ORDER BY 1",
  );
  return {
    os: os.map((r) => r.v),
    agent_versions: versions.map((r) => r.v),
    desktops: desktops.map((r) => r.v),
  };
}

/** Reads one node with its groups, certificate, heartbeat facts and compliance summary. */
export async function getNode(q: Queryable, id: string): Promise<NodeRecord> {
  const row = await queryOne<Omit<NodeRecord, "connected" | "compliance">>(
    q,
    `SELECT ${SUMMARY_COLUMNS}, n.machine_id, n.gnome_version, n.agent_healthy, n.agent_health_message,
       n.cert_serial, n.notes, n.updated_at,
       EXISTS (SELECT 1 FROM revoked_certificates rc WHERE rc.serial = lower(n.cert_serial)) AS cert_revoked
     FROM nodes n WHERE n.id = $1`,
    [id],
  );
  if (!row) throw notFoundError(`node ${id}`);
  return { ...row, connected: await isNodeConnected(q, id), compliance: await nodeComplianceSummary(q, id) };
}

/** Updates the free-text notes of a node (its name is its certificate identity and never changes here). */
export async function updateNodeNotes(q: Queryable, id: string, notes: string): Promise<NodeRecord> {
  const rows = await q.query("UPDATE nodes SET notes = $2, updated_at = now() WHERE id = $1 RETURNING id", [
    id,
    notes,
  ]);
  if (rows.length === 0) throw notFoundError(`node ${id}`);
  return await getNode(q, id);
}

/**
 * Revokes every certificate serial issued to the node (and its current serial, should it be missing from
 * `node_certificates`), marks the node offline ("certificate revoked") without any stream, and tells its
 * open streams to disconnect. Returns the serials newly revoked.
 * Throws a conflict when the node has no certificate at all.
 */
export async function revokeNode(
  q: Queryable,
  id: string,
  options: { reason?: string } = {},
): Promise<string[]> {
  const node = await queryOne<{ id: string; cert_serial: string | null }>(
    q,
    "SELECT id, cert_serial FROM nodes WHERE id = $1 FOR UPDATE",
    [id],
  );
  if (!node) throw notFoundError(`node ${id}`);
  const serials = await nodeSerials(q, id, node.cert_serial);
  if (serials.length === 0) throw conflictError("node has no certificate to revoke");
  const revoked = await q.query<{ serial: string }>(
    `INSERT INTO revoked_certificates (serial, node_id, reason) SELECT unnest($1::text[]), $2, $3
     ON CONFLICT (serial) DO NOTHING RETURNING serial`,
    [serials, id, options.reason || "revoked by an administrator"],
  );
  // Offline now, not when the stream's close is recorded: the stream may sit on a replica that is gone,
  // and the UI must never show a revoked node online. The hub refuses to record a stream for a revoked
  // serial, so nothing brings it back.
  await q.query("DELETE FROM node_streams WHERE node_id = $1", [id]);
  await q.query(
    `UPDATE nodes SET status = 'offline', status_reason = 'certificate revoked', updated_at = now()
     WHERE id = $1`,
    [id],
  );
  await sendNodeCommand(q, id, "disconnect");
  await publishLiveHint(q, { topic: "nodes", ids: [id] });
  return revoked.map((r) => r.serial).sort();
}

/**
 * Deletes a node after revoking all its certificates; its stream rows go with it (ON DELETE CASCADE) and
 * its open streams are told to disconnect.
 */
export async function deleteNode(q: Queryable, id: string): Promise<{ id: string; name: string }> {
  const node = await queryOne<{ id: string; name: string; cert_serial: string | null }>(
    q,
    "SELECT id, name, cert_serial FROM nodes WHERE id = $1 FOR UPDATE",
    [id],
  );
  if (!node) throw notFoundError(`node ${id}`);
  const serials = await nodeSerials(q, id, node.cert_serial);
  await q.query(
    `INSERT INTO revoked_certificates (serial, node_id, reason) SELECT unnest($1::text[]), $2, 'node deleted'
     ON CONFLICT (serial) DO NOTHING`,
    [serials, id],
  );
  await q.query("DELETE FROM nodes WHERE id = $1", [id]);
  await sendNodeCommand(q, id, "disconnect");
  await publishLiveHint(q, { topic: "nodes", ids: [id] });
  return { id: node.id, name: node.name };
}

/**
 * Asks the connected agent for a fresh heartbeat (METADATA_REQUEST). Refused with a conflict
 * "agent not connected" when the node has no open stream.
 */
export async function requestNodeMetadata(q: Queryable, id: string): Promise<{ id: string; name: string }> {
  const node = await queryOne<{ id: string; name: string }>(q, "SELECT id, name FROM nodes WHERE id = $1", [
    id,
  ]);
  if (!node) throw notFoundError(`node ${id}`);
  if (!(await isNodeConnected(q, id))) {
    throw conflictError(
      "agent not connected: the node has no open policy stream; try again when it is online",
    );
  }
  await sendNodeCommand(q, id, "metadata_request");
  return node;
}

async function nodeSerials(q: Queryable, id: string, current: string | null): Promise<string[]> {
  const rows = await q.query<{ serial: string }>("SELECT serial FROM node_certificates WHERE node_id = $1", [
    id,
  ]);
  const serials = new Set(rows.map((r) => r.serial));
  const normalized = current?.toLowerCase();
  if (normalized && /^[0-9a-f]+$/.test(normalized)) serials.add(normalized);
  return [...serials].sort();
}

/** A re-enrollment token, returned once in plaintext (only its SHA-256 is stored). */
export interface ReEnrollmentToken {
  token: string;
  node_id: string;
  node_name: string;
  expires_at: Date;
}

/**
 * Issues a single-use token bound to a revoked node: enrolling with it under the node's name gives the
 * same node record a new certificate ({@link reEnrollNode}). Refused with a conflict while the node's
 * certificate is still valid (revoke it first).
 */
export async function createReEnrollmentToken(
  q: Queryable,
  id: string,
  options: { createdBy: string; now?: Date },
): Promise<ReEnrollmentToken> {
  const node = await queryOne<{ id: string; name: string; cert_revoked: boolean }>(
    q,
    `SELECT n.id, n.name,
       n.cert_serial IS NULL OR EXISTS (SELECT 1 FROM revoked_certificates rc WHERE rc.serial = lower(n.cert_serial))
         AS cert_revoked
     FROM nodes n WHERE n.id = $1 FOR UPDATE`,
    [id],
  );
  if (!node) throw notFoundError(`node ${id}`);
  if (!node.cert_revoked) {
    throw conflictError(
      `node "${node.name}" still has a valid certificate: revoke it first, then re-enroll (re-enrollment ` +
        "replaces a revoked certificate)",
    );
  }
  const now = options.now ?? new Date();
  const token = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))
    .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  const expiresAt = new Date(now.getTime() + ENROLLMENT_TOKEN_TTL_MS);
  await q.query("DELETE FROM enrollment_tokens WHERE expires_at < $1", [now]);
  await q.query(
    "INSERT INTO enrollment_tokens (token_hash, node_id, expires_at, created_by) VALUES ($1, $2, $3, $4)",
    [sha256Hex(token), id, expiresAt, options.createdBy],
  );
  return { token, node_id: id, node_name: node.name, expires_at: expiresAt };
}

/**
 * Gives the node a re-enrollment token was bound to its new certificate, inside the caller's transaction:
 * every earlier serial stays (or becomes) revoked, the record keeps its id, groups, compliance history and
 * audit trail, and its certificate, status and agent health start over. Returns the name of the node's
 * first group ("" when it has none).
 *
 * @throws {DomainError} not found when the node was deleted meanwhile; conflict when `nodeName` is not the
 * node the token was issued for.
 */
export async function reEnrollNode(
  q: Queryable,
  params: {
    nodeId: string;
    nodeName: string;
    cert: { serial: string; notBefore: Date; notAfter: Date };
  },
): Promise<{ groupName: string }> {
  const node = await queryOne<{ name: string; cert_serial: string | null }>(
    q,
    "SELECT name, cert_serial FROM nodes WHERE id = $1 FOR UPDATE",
    [params.nodeId],
  );
  if (!node) throw notFoundError("the node of this re-enrollment token (it was deleted); create a new token");
  if (node.name !== params.nodeName) {
    throw conflictError(
      `this re-enrollment token is for node "${node.name}", not "${params.nodeName}"; set agent.client_id ` +
        `to "${node.name}" or create a token for the right node`,
    );
  }
  const serials = await nodeSerials(q, params.nodeId, node.cert_serial);
  await q.query(
    `INSERT INTO revoked_certificates (serial, node_id, reason) SELECT unnest($1::text[]), $2, 'node re-enrolled'
     ON CONFLICT (serial) DO NOTHING`,
    [serials, params.nodeId],
  );
  const { serial, notBefore, notAfter } = params.cert;
  await q.query(
    "INSERT INTO node_certificates (serial, node_id, not_before, not_after) VALUES ($1, $2, $3, $4)",
    [serial, params.nodeId, notBefore, notAfter],
  );
  await q.query(
    `UPDATE nodes SET cert_serial = $2, cert_not_after = $3, status = 'unknown',
       status_reason = 're-enrolled; waiting for the agent', agent_healthy = true, agent_health_message = '',
       updated_at = now()
     WHERE id = $1`,
    [params.nodeId, serial, notAfter],
  );
  await publishLiveHint(q, { topic: "nodes", ids: [params.nodeId] });
  const [group] = await q.query<{ name: string }>(
    `SELECT g.name FROM node_group_members m JOIN node_groups g ON g.id = m.node_group_id
     WHERE m.node_id = $1 ORDER BY g.name LIMIT 1`,
    [params.nodeId],
  );
  return { groupName: group?.name ?? "" };
}
