/**
 * Fleet-wide sums kept as signed deltas (migrations/0024): the compliance totals and the nodes per status. The
 * rules (`domain/compliance.ts`, `domain/nodes.ts`, the dashboard) and the scrape (`metrics/collector.ts`) both
 * read them, and the read-model worker folds them, so they live with the storage they summarize rather than
 * with one of their readers.
 *
 * @module
 */
import type { Queryable } from "./db.ts";

/**
 * SQL: nodes per status, from the signed deltas that node inserts, deletes and status changes append
 * (migrations/0024): a few rows per status however large the fleet, exact at every commit.
 */
export const NODE_STATUS_COUNTS_SQL =
  "SELECT s.status AS key, sum(s.n)::int AS n FROM node_status_sizes s GROUP BY s.status";

/**
 * Folds the node status deltas into one row per status (the read-model worker runs it now and then); deltas
 * appended meanwhile are left for the next fold.
 */
export async function foldNodeStatusSizes(q: Queryable): Promise<void> {
  await q.query(
    `WITH folded AS (DELETE FROM node_status_sizes RETURNING status, n)
     INSERT INTO node_status_sizes (status, n)
     SELECT status, sum(n) FROM folded GROUP BY status HAVING sum(n) <> 0`,
  );
}

/**
 * The whole fleet's counters, summed: the signed deltas that every statement changing
 * `node_compliance_counts` appends (migrations/0024), a few rows however large the fleet. Equals the sum over
 * the counters at every commit. `nodes`: counter rows; `bad`: nodes with an error or non-compliant result;
 * `good`: nodes reached whose every result is compliant or inapplicable; `none`: nodes no policy reaches.
 */
const FLEET_TOTALS_SQL = `SELECT coalesce(sum(t.compliant), 0)::int AS compliant,
    coalesce(sum(t.non_compliant), 0)::int AS non_compliant, coalesce(sum(t.inapplicable), 0)::int AS inapplicable,
    coalesce(sum(t.error), 0)::int AS error, coalesce(sum(t.unknown), 0)::int AS unknown,
    coalesce(sum(t.unreported), 0)::int AS unreported, coalesce(sum(t.nodes), 0)::int AS nodes,
    coalesce(sum(t.bad), 0)::int AS bad, coalesce(sum(t.good), 0)::int AS good,
    coalesce(sum(t.none), 0)::int AS none
  FROM fleet_compliance_sizes t`;

/** The fleet's compliance totals (see {@link FLEET_TOTALS_SQL}). */
export interface FleetTotals {
  compliant: number;
  non_compliant: number;
  inapplicable: number;
  error: number;
  unknown: number;
  unreported: number;
  nodes: number;
  bad: number;
  good: number;
  none: number;
}

/** Reads the fleet's compliance totals, exact at the reader's snapshot. */
export async function fleetTotals(q: Queryable): Promise<FleetTotals> {
  const [row] = await q.query<FleetTotals>(FLEET_TOTALS_SQL);
  return row;
}

/**
 * Folds the fleet totals' delta rows into one, so reading them stays a few rows however many reports came
 * (the read-model worker runs it now and then). Deltas appended meanwhile are left for the next fold.
 */
export async function foldFleetTotals(q: Queryable): Promise<void> {
  await q.query(
    `WITH folded AS (DELETE FROM fleet_compliance_sizes RETURNING *)
     INSERT INTO fleet_compliance_sizes
     SELECT sum(compliant), sum(non_compliant), sum(inapplicable), sum(error), sum(unknown), sum(unreported),
            sum(nodes), sum(bad), sum(good), sum(none)
       FROM folded HAVING count(*) > 0`,
  );
}
