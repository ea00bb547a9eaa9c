/**
 * The dashboard's numbers: nodes by status, agent certificates by time to expiry, compliance by status,
 * policies by state and type, bindings by state. Each section is one or two grouped queries over the whole
 * fleet (never a query or a loop per node), and all sections are read in one repeatable-read snapshot so
 * they agree with each other (the nodes counted by status are the nodes whose certificates are bucketed).
 * Which sections a caller may see is the route's decision; this module only reads what it is asked for.
 */
import type { Db, Queryable } from "../db/db.ts";
import { BINDING_STATES, type BindingState } from "./bindings.ts";
import { type FleetSummary, fleetSummary } from "./compliance.ts";
import {
  EXPIRY_BUCKET_SQL,
  EXPIRY_BUCKETS,
  type ExpiryBucket,
  NODE_STATUSES,
  type NodeStatus,
} from "./nodes.ts";
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
    if (sections.nodes && sections.certificates) {
      // Both from one pass over the nodes (at 100,000 nodes each pass is most of the dashboard's time).
      const rows = await tx.query<{ status: NodeStatus; bucket: ExpiryBucket; n: number }>(
        `SELECT n.status, ${EXPIRY_BUCKET_SQL} AS bucket, count(*)::int AS n FROM nodes n GROUP BY 1, 2`,
      );
      summary.nodes = tally(NODE_STATUSES, rows.map((r) => ({ key: r.status, n: r.n })));
      summary.certificates = tally(EXPIRY_BUCKETS, rows.map((r) => ({ key: r.bucket, n: r.n })));
    } else if (sections.nodes) summary.nodes = await nodeStatusCounts(tx);
    else if (sections.certificates) summary.certificates = await certificateExpiryCounts(tx);
    if (sections.compliance) summary.compliance = await fleetSummary(tx); // the compliance page's reading
    if (sections.policies) summary.policies = await policyCounts(tx);
    if (sections.bindings) summary.bindings = await bindingCounts(tx);
    return summary;
  });
}

/** Nodes per status. */
export async function nodeStatusCounts(q: Queryable): Promise<NodeStatusCounts> {
  const rows = await q.query<{ key: NodeStatus; n: number }>(
    "SELECT status AS key, count(*)::int AS n FROM nodes GROUP BY status",
  );
  return tally(NODE_STATUSES, rows);
}

/** Nodes per certificate expiry bucket, measured against the database clock. */
export async function certificateExpiryCounts(q: Queryable): Promise<CertificateExpiryCounts> {
  const rows = await q.query<{ key: ExpiryBucket; n: number }>(
    `SELECT ${EXPIRY_BUCKET_SQL} AS key, count(*)::int AS n FROM nodes n GROUP BY 1`,
  );
  return tally(EXPIRY_BUCKETS, rows);
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
