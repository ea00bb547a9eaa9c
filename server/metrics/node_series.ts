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
import {
  formatValue,
  type MetricFamily,
  type MetricSample,
  type PrerenderedFamily,
  SAMPLES_PER_CHUNK,
} from "./exposition.ts";

/** Nodes read per query on a full read (the driver decodes a result on the loop in one turn). */
const NODE_PAGE = 1_000;
/** Changes read again although older than the last scrape: a transaction stamps `now()` at its start. */
const MARGIN_SECONDS = 300;
/** A full read at least this often, whatever the checks say. */
const FULL_EVERY_SECONDS = 600;
/** Nodes per block of kept text (a chunk of the streamed scrape each, as exposition.ts cuts the rest). */
const BLOCK = SAMPLES_PER_CHUNK;

/** One node's series, immutable: a change replaces the object, so a scrape's snapshot never moves. */
interface NodeSeries {
  name: string;
  labels: { node: string; fqdn: string };
  /** `labels` rendered, `{node="…",fqdn="…"}`, escaped for both exposition formats. */
  labelText: string;
  notAfter: number | null;
  lastSeen: number | null;
  /** The whole last-seen line (the value does not depend on the scrape's time); null without a heartbeat. */
  seenLine: string | null;
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

const EXPIRY = "svc_node_certificate_expiry_seconds";
const SEEN = "svc_node_last_seen_seconds";
const EXPIRY_HELP = "Seconds until the node's certificate expires; negative once it has expired.";
const SEEN_HELP =
  "Unix time of the node's last heartbeat (sent on connect and on metadata request, not periodically).";

function escape(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll('"', '\\"');
}

function seriesOf(row: Row): NodeSeries {
  const labelText = `{node="${escape(row.name)}",fqdn="${escape(row.fqdn)}"}`;
  return {
    name: row.name,
    labels: { node: row.name, fqdn: row.fqdn },
    labelText,
    notAfter: row.not_after,
    lastSeen: row.seen,
    seenLine: row.seen === null ? null : `${SEEN}${labelText} ${formatValue(row.seen)}\n`,
  };
}

/**
 * A per-node family as a scrape's snapshot: its lines are written out from the series' kept text
 * ({@link PrerenderedFamily.renderLines}), and its `samples` objects are only made when something reads them
 * (tests, a merge). The rendering is a method, not data: a copy of the family (`{ ...family }`) is a plain
 * family again, rendered sample by sample.
 */
class NodeFamily implements PrerenderedFamily {
  readonly type = "gauge" as const;
  #samples?: MetricSample[];

  constructor(
    readonly name: string,
    readonly help: string,
    /** The family's sample lines, one string per block of nodes. */
    private readonly blocks: readonly string[],
    private readonly sample: () => MetricSample[],
  ) {}

  get samples(): MetricSample[] {
    return this.#samples ??= this.sample();
  }

  renderLines(): Iterable<string> {
    return this.blocks;
  }
}

/** What tells whether nodes came or went, and the time a scrape is taken at. */
export interface FleetState {
  /** Number of nodes. */
  n: number;
  /** The newest node's creation time (epoch seconds); null without nodes. */
  newest: number | null;
  /** The database's `now()`, epoch seconds. */
  now: number;
}

/** The per-node series of one database, between scrapes. */
export interface NodeSeriesCache {
  /**
   * The two families as of now, reading what changed since the last call. `fleet` is the nodes' number and
   * newest creation time and the database's time, read by the caller in its pass over the nodes.
   */
  families(q: Queryable, fleet: FleetState): Promise<MetricFamily[]>;
}

/** A cache for one database handle. */
export function createNodeSeriesCache(): NodeSeriesCache {
  let byId = new Map<string, number>();
  /** The series in name order; `byId` gives each node's place. */
  let sorted: NodeSeries[] = [];
  /** Per block of {@link BLOCK} places, its last-seen lines joined; undefined once one of them changed. */
  let seenBlocks: (string | undefined)[] = [];
  let fingerprint = "";
  let lastRead = 0;
  let lastFull = 0;

  /** Stores a known node's new row; false when it is not known or was renamed (its place in name order moved). */
  const put = (row: Row): boolean => {
    const at = byId.get(row.id);
    if (at === undefined || sorted[at].name !== row.name) return false;
    sorted[at] = seriesOf(row);
    seenBlocks[Math.floor(at / BLOCK)] = undefined;
    return true;
  };

  /** Every node, a page at a time in the database's name order (the series come out in it). */
  async function readAll(q: Queryable): Promise<void> {
    const ids = new Map<string, number>();
    const series: NodeSeries[] = [];
    for (let after: string | null = null;;) {
      // A page per query: the driver decodes a result on the loop in one turn (10,000 rows held it 6-11 ms).
      const rows: Row[] = await q.query<Row>(
        `SELECT ${COLUMNS} FROM nodes ${
          after === null ? "" : "WHERE name > $1"
        } ORDER BY name LIMIT ${NODE_PAGE}`,
        after === null ? [] : [after],
      );
      for (const row of rows) {
        ids.set(row.id, series.length);
        series.push(seriesOf(row));
      }
      if (rows.length < NODE_PAGE) break;
      after = rows[rows.length - 1].name;
    }
    byId = ids;
    sorted = series;
    seenBlocks = [];
  }

  /**
   * The nodes changed since `since`, stored; false when that is more than a page (a full read costs the same
   * then), or a node is new or was renamed.
   */
  async function readChanged(q: Queryable, since: number): Promise<boolean> {
    // A range of the updated_at index (migration 0023): the few rows changed, not a pass over every node.
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
    async families(q, state) {
      // Nodes came or went when their number moved, or when both happened: a new node is the newest.
      const print = `${state.n}/${state.newest}`;
      if (print !== fingerprint || state.now - lastFull >= FULL_EVERY_SECONDS || byId.size === 0) {
        await readAll(q);
        lastFull = state.now;
      } else if (!await readChanged(q, lastRead - MARGIN_SECONDS)) {
        await readAll(q);
        lastFull = state.now;
      }
      fingerprint = print;
      lastRead = state.now;
      // This scrape's series: later changes replace entries of `sorted`, never of this copy.
      const snapshot = sorted.slice();
      const now = state.now;
      const expiryBlocks: string[] = [];
      const seen: string[] = [];
      for (let b = 0; b * BLOCK < snapshot.length; b++) {
        // A turn of the loop now and then: 200,000 lines at once would hold it.
        if (b > 0 && b % 2 === 0) await new Promise((resolve) => setImmediate(resolve));
        const block = snapshot.slice(b * BLOCK, (b + 1) * BLOCK);
        // The expiry is counted from this scrape's database time, so its lines are written each time.
        const expiry: string[] = [];
        for (const s of block) {
          // A node without a certificate or without a heartbeat yet has no value to report.
          if (s.notAfter !== null) {
            expiry.push(`${EXPIRY}${s.labelText} ${formatValue(Math.round(s.notAfter - now))}\n`);
          }
        }
        // Joined, not appended: one flat string, which the encoder then copies in one pass.
        expiryBlocks.push(expiry.join(""));
        let lines = seenBlocks[b];
        if (lines === undefined) {
          lines = block.map((s) => s.seenLine ?? "").join("");
          seenBlocks[b] = lines;
        }
        seen.push(lines);
      }
      return [
        new NodeFamily(
          EXPIRY,
          EXPIRY_HELP,
          expiryBlocks,
          () =>
            snapshot.filter((s) => s.notAfter !== null).map((s) => ({
              name: EXPIRY,
              labels: s.labels,
              labelText: s.labelText,
              value: Math.round(s.notAfter! - now),
            })),
        ),
        new NodeFamily(SEEN, SEEN_HELP, seen, () =>
          snapshot.filter((s) => s.lastSeen !== null).map((s) => ({
            name: SEEN,
            labels: s.labels,
            labelText: s.labelText,
            value: s.lastSeen!,
          }))),
      ];
    },
  };
}
