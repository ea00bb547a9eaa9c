/**
 * The dashboard's numbers: nodes by status, agent certificates by time to expiry, compliance by status,
 * policies by state and type, bindings by state. Node and compliance counts come from totals that triggers
 * keep (migrations/0024), certificates from an index range; the others are grouped queries over the whole
 * fleet (never a query or a loop per node), and all sections are read in one repeatable-read snapshot so
 * they agree with each other (the nodes counted by status are the nodes whose certificates are bucketed).
 * Which sections a caller may see is the route's decision; this module only reads what it is asked for.
 */
import type { Db, Queryable } from "../db/db.ts";
import { BINDING_STATES, type BindingState } from "./bindings.ts";
import { type FleetSummary, fleetSummary } from "./compliance.ts";
import { EXPIRY_BUCKETS, type ExpiryBucket, NODE_STATUSES, type NodeStatus } from "./nodes.ts";
import { NODE_STATUS_COUNTS_SQL } from "../db/fleet_totals.ts";
import { POLICY_STATES, type PolicyState } from "./policies.ts";

/** The buckets are the node list's too (its `cert_expiry` filter); re-exported for the dashboard route. */
export { EXPIRY_BUCKETS, type ExpiryBucket };

/** Nodes per status; every status is present. */
export type NodeStatusCounts = Record<NodeStatus, number> & { total: number };

/** Every node in exactly one bucket ({@link EXPIRY_BUCKETS}). */
export type CertificateExpiryCounts = Record<ExpiryBucket, number> & { total: number };

/** Policies per state, and per type with the state split. */
export interface PolicyCounts {
  total: number;
  /** Every state is present. */
  by_state: Record<PolicyState, number>;
  /** One entry per type that has a policy, by type name. */
  by_type: Array<{ type: string; total: number; by_state: Record<PolicyState, number> }>;
}

/** Bindings per state; both states are present. */
export type BindingCounts = Record<BindingState, number> & { total: number };

/** Which sections to read. */
export interface DashboardSections {
  nodes?: boolean;
  certificates?: boolean;
  compliance?: boolean;
  policies?: boolean;
  bindings?: boolean;
}

/** The dashboard; a section is absent unless it was asked for. */
export interface DashboardSummary {
  nodes?: NodeStatusCounts;
  certificates?: CertificateExpiryCounts;
  compliance?: FleetSummary;
  policies?: PolicyCounts;
  bindings?: BindingCounts;
}

/** Reads the requested sections in one consistent snapshot. */
export async function dashboardSummary(db: Db, sections: DashboardSections): Promise<DashboardSummary> {
  return await db.transaction(async (tx) => {
    // Must be the first statement of the transaction; every query below then sees the same snapshot.
    await tx.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
    const summary: DashboardSummary = {};
    // Certificates need the node total, which the status counts give.
    const nodes = sections.nodes || sections.certificates ? await nodeStatusCounts(tx) : undefined;
    if (sections.nodes) summary.nodes = nodes;
    if (sections.certificates) summary.certificates = await certificateExpiryCounts(tx, nodes!.total);
    if (sections.compliance) summary.compliance = await fleetSummary(tx); // the compliance page's reading
    if (sections.policies) summary.policies = await policyCounts(tx);
    if (sections.bindings) summary.bindings = await bindingCounts(tx);
    return summary;
  });
}

/** Nodes per status, from the status totals (migrations/0024): a few rows, whatever the fleet's size. */
export async function nodeStatusCounts(q: Queryable): Promise<NodeStatusCounts> {
  return tally(NODE_STATUSES, await q.query<{ key: NodeStatus; n: number }>(NODE_STATUS_COUNTS_SQL));
}

/**
 * Nodes per certificate expiry bucket, measured against the database clock, as `EXPIRY_BUCKET_SQL`
 * (server/domain/nodes.ts) buckets them, without reading every node: the dated buckets are one range of the
 * expiry index (certificates expiring within 90 days), less the revoked nodes in each (one probe per revoked
 * serial); `none` is an index lookup; `later` is the rest of `total` (the node count, from the same snapshot).
 */
export async function certificateExpiryCounts(
  q: Queryable,
  total?: number,
): Promise<CertificateExpiryCounts> {
  total ??= (await nodeStatusCounts(q)).total;
  // Each dated bucket is a range of the index, counted alone: a count over an index range evaluates nothing
  // per entry (one pass testing each entry against the four ranges cost 4 times as long at 100,000 nodes).
  const ranges = [
    ["expired", null, "now()"],
    ["within_7_days", "now()", "now() + interval '7 days'"],
    ["within_30_days", "now() + interval '7 days'", "now() + interval '30 days'"],
    ["within_90_days", "now() + interval '30 days'", "now() + interval '90 days'"],
  ] as const;
  const within = (t: string, from: string | null, to: string) =>
    `${from === null ? "" : `${t} > ${from} AND `}${t} <= ${to}`;
  type Dated = Record<(typeof ranges)[number][0], number>;
  const [row] = await q.query<{ none: number; dated: Dated; revoked: Dated & { n: number } }>(
    `SELECT (SELECT count(*)::int FROM nodes WHERE cert_not_after IS NULL) AS none,
            jsonb_build_object(${
      ranges.map(([key, from, to]) =>
        `'${key}', (SELECT count(*)::int FROM nodes WHERE ${within("cert_not_after", from, to)})`
      ).join(", ")
    }) AS dated,
            (SELECT to_jsonb(d) FROM (SELECT count(*)::int AS n, ${
      ranges.map(([key, from, to]) =>
        `count(*) FILTER (WHERE ${within("n.cert_not_after", from, to)})::int AS ${key}`
      )
        .join(", ")
    }
                                        FROM nodes n
                                       WHERE n.cert_not_after IS NOT NULL
                                         AND lower(n.cert_serial) IN (SELECT rc.serial FROM revoked_certificates rc)) d)
              AS revoked`,
  );
  const counts = { ...zeros(EXPIRY_BUCKETS), total };
  for (const [key] of ranges) counts[key] = row.dated[key] - row.revoked[key];
  counts.none = row.none;
  counts.revoked = row.revoked.n;
  counts.later = total - EXPIRY_BUCKETS.reduce((sum, key) => key === "later" ? sum : sum + counts[key], 0);
  return counts;
}

/** Policies per state and type. */
export async function policyCounts(q: Queryable): Promise<PolicyCounts> {
  const rows = await q.query<{ state: PolicyState; type: string; n: number }>(
    "SELECT state, type, count(*)::int AS n FROM policies GROUP BY state, type ORDER BY type, state",
  );
  const byState = zeros(POLICY_STATES);
  const byType = new Map<string, PolicyCounts["by_type"][number]>();
  for (const row of rows) {
    byState[row.state] += row.n;
    let entry = byType.get(row.type);
    if (!entry) {
      entry = { type: row.type, total: 0, by_state: zeros(POLICY_STATES) };
      byType.set(row.type, entry);
    }
    entry.by_state[row.state] += row.n;
    entry.total += row.n;
  }
  return {
    total: rows.reduce((sum, row) => sum + row.n, 0),
    by_state: byState,
    by_type: [...byType.values()],
  };
}

/** Bindings per state. */
export async function bindingCounts(q: Queryable): Promise<BindingCounts> {
  const rows = await q.query<{ key: BindingState; n: number }>(
    "SELECT state AS key, count(*)::int AS n FROM policy_bindings GROUP BY state",
  );
  return tally(BINDING_STATES, rows);
}

function zeros<K extends string>(keys: readonly K[]): Record<K, number> {
  return Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
}

/** Counts per key (every key present, zero when no row) plus their total. */
function tally<K extends string>(
  keys: readonly K[],
  rows: readonly { key: K; n: number }[],
): Record<K, number> & { total: number } {
  const counts: Record<string, number> = { ...zeros(keys), total: 0 };
  for (const row of rows) {
    counts[row.key] += row.n;
    counts.total += row.n;
  }
  return counts as Record<K, number> & { total: number };
}
