/**
 * The per-node gauge families (`svc_node_certificate_expiry_seconds`, `svc_node_last_seen_seconds`), kept
 * between scrapes instead of read and formatted whole at each one.
 *
 * At 100,000 nodes a scrape holds 200,000 such series: reading every node a page at a time took 300-900 ms
 * (bench/rest.ts, a loaded 2-core machine) and formatting their labels as much again. Here the node's name and
 * address are escaped into a label string once, and a scrape reads only the nodes changed since the last one
 * (`updated_at`, which every change of a node sets), with a margin for transactions that committed late. The
 * whole set is read again when nodes came or went (their number or the newest creation time moved), when many
 * changed, and every ten minutes besides. The expiry is computed at each scrape from the database's clock, as before.
 */
import { setImmediate } from "node:timers";
import type { Queryable } from "../db/db.ts";
import type { MetricFamily, MetricSample } from "./exposition.ts";

/** Nodes read per query on a full read (the driver decodes a result on the loop in one turn). */
const NODE_PAGE = 1_000;
/** Changes read again although older than the last scrape: a transaction stamps `now()` at its start. */
const MARGIN_SECONDS = 300;
/** A full read at least this often, whatever the checks say. */
const FULL_EVERY_SECONDS = 600;

interface NodeSeries {
  name: string;
  labels: { node: string; fqdn: string };
  /** `labels` rendered, `{node="…",fqdn="…"}`, escaped for both exposition formats. */
  labelText: string;
  notAfter: number | null;
  lastSeen: number | null;
}

interface Row {
  id: string;
  name: string;
  fqdn: string;
  not_after: number | null;
  seen: number | null;
}

const COLUMNS = `id, name, fqdn, extract(epoch FROM cert_not_after)::float8 AS not_after,
  floor(extract(epoch FROM last_seen))::float8 AS seen`;

function escape(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll('"', '\\"');
}

/** The per-node series of one database, between scrapes. */
export interface NodeSeriesCache {
  /** The two families as of now, reading what changed since the last call. */
  families(q: Queryable): Promise<MetricFamily[]>;
}

/** A cache for one database handle. */
export function createNodeSeriesCache(): NodeSeriesCache {
  let byId = new Map<string, NodeSeries>();
  let sorted: NodeSeries[] = [];
  let fingerprint = "";
  let lastRead = 0;
  let lastFull = 0;

  /** Stores a node's row; false when that changed its place in name order (a new node, or a new name). */
  const put = (row: Row): boolean => {
    const labels = { node: row.name, fqdn: row.fqdn };
    const labelText = `{node="${escape(row.name)}",fqdn="${escape(row.fqdn)}"}`;
    const series = { name: row.name, labels, labelText, notAfter: row.not_after, lastSeen: row.seen };
    const known = byId.get(row.id);
    if (known) {
      // In place: `sorted` holds the same objects.
      const kept = known.name === row.name;
      Object.assign(known, series);
      return kept;
    }
    byId.set(row.id, series);
    return false;
  };

  /** Every node, a page at a time in the database's name order (the series come out in it). */
  async function readAll(q: Queryable): Promise<void> {
    byId = new Map();
    for (let after: string | null = null;;) {
      // A page per query: the driver decodes a result on the loop in one turn (10,000 rows held it 6-11 ms).
      const rows: Row[] = await q.query<Row>(
        `SELECT ${COLUMNS} FROM nodes ${
          after === null ? "" : "WHERE name > $1"
        } ORDER BY name LIMIT ${NODE_PAGE}`,
        after === null ? [] : [after],
      );
      for (const row of rows) put(row);
      if (rows.length < NODE_PAGE) break;
      after = rows[rows.length - 1].name;
    }
    sorted = [...byId.values()];
  }

  /**
   * The nodes changed since `since`, stored; false when that is more than a page (a full read costs the same
   * then) or a node was renamed (its place in name order moved).
   */
  async function readChanged(q: Queryable, since: number): Promise<boolean> {
    // No order and no index: one pass over the table, which a sorted index walk with this filter was not.
    const rows = await q.query<Row>(
      `SELECT ${COLUMNS} FROM nodes WHERE updated_at >= to_timestamp($1) LIMIT ${NODE_PAGE + 1}`,
      [since],
    );
    if (rows.length > NODE_PAGE) return false;
    let kept = true;
    for (const row of rows) kept = put(row) && kept;
    return kept;
  }

  return {
    async families(q) {
      // Nodes came or went when their number moved, or when both happened: a new node is the newest.
      const [state] = await q.query<{ n: number; newest: number | null; now: number }>(
        `SELECT count(*)::int AS n, extract(epoch FROM max(created_at))::float8 AS newest,
                extract(epoch FROM now())::float8 AS now FROM nodes`,
      );
      const print = `${state.n}/${state.newest}`;
      if (print !== fingerprint || state.now - lastFull >= FULL_EVERY_SECONDS || byId.size === 0) {
        await readAll(q);
        lastFull = state.now;
      } else if (!await readChanged(q, lastRead - MARGIN_SECONDS)) {
        await readAll(q);
      }
      fingerprint = print;
      lastRead = state.now;
      const expiry: MetricSample[] = [];
      const seen: MetricSample[] = [];
      for (const [i, s] of sorted.entries()) {
        // A turn of the loop now and then: 200,000 samples at once would hold it.
        if (i > 0 && i % NODE_PAGE === 0) await new Promise((resolve) => setImmediate(resolve));
        // A node without a certificate or without a heartbeat yet has no value to report.
        if (s.notAfter !== null) {
          expiry.push({
            name: "svc_node_certificate_expiry_seconds",
            labels: s.labels,
            labelText: s.labelText,
            value: Math.round(s.notAfter - state.now),
          });
        }
        if (s.lastSeen !== null) {
          seen.push({
            name: "svc_node_last_seen_seconds",
            labels: s.labels,
            labelText: s.labelText,
            value: s.lastSeen,
          });
        }
      }
      return [
        {
          name: "svc_node_certificate_expiry_seconds",
          help: "Seconds until the node's certificate expires; negative once it has expired.",
          type: "gauge",
          samples: expiry,
        },
        {
          name: "svc_node_last_seen_seconds",
          help:
            "Unix time of the node's last heartbeat (sent on connect and on metadata request, not periodically).",
          type: "gauge",
          samples: seen,
        },
      ];
    },
  };
}
