/**
 * Gauges computed from the database at each scrape: one grouped query per metric, never one query per node.
 * Fleet-wide counts (nodes by status, compliance results) come from totals that triggers keep
 * (migrations/0024); the per-node families read only the nodes changed since the last scrape.
 *
 * A query that fails omits only the families it feeds: it runs in its own read-only transaction with a
 * statement timeout, a line starting with `metrics:` is logged, and the other queries still run.
 *
 * Flatpak catalog and disk-encryption tables do not exist yet. Their queries first check the tables with
 * `to_regclass` and report an empty catalog / zero volumes while the tables are missing. The names the
 * queries expect, for the migrations that add them:
 * - `flatpak_repos (id, name text unique, last_success_at timestamptz null)`: `last_success_at` is the last
 *   successful refresh or upload.
 * - `flatpak_catalog_apps (repo_id → flatpak_repos.id, …)`: one row per indexed application.
 * - `luks_volumes (id, …, luks_version, missing_since, rotation_requested_at timestamptz null)` (migration
 *   0008): `rotation_requested_at` is set while a recovery-key rotation is pending and cleared when it
 *   completes; only encrypted (`luks_version > 0`), still-reported (`missing_since IS NULL`) volumes count.
 * - `luks_recovery_keys (volume_id → luks_volumes.id, state text, …)`: `state = 'active'` marks the escrowed
 *   key in force.
 * If those tables end up shaped differently, the query fails and is logged like any other; adjust it here.
 *
 * @module
 */
import type { Db, Queryable } from "../db/db.ts";
import type { Logger } from "../core/log.ts";
import type { MetricFamily, MetricSample } from "./exposition.ts";
import { createNodeSeriesCache, type NodeSeriesCache } from "./node_series.ts";
import { fleetTotals, NODE_STATUS_COUNTS_SQL } from "../db/fleet_totals.ts";

/** Node statuses always present in `svc_nodes_total`. */
export const NODE_STATUSES = ["online", "degraded", "offline", "unknown"] as const;
/** Binding states always present in `svc_policy_bindings_total`. */
export const BINDING_STATES = ["enabled", "disabled"] as const;
/** Compliance statuses always present in `svc_compliance_results_total` (`inapplicable` is never exported). */
export const EXPORTED_COMPLIANCE_STATUSES = ["compliant", "non_compliant", "error", "unknown"] as const;

/** Longest a single scrape query may run before PostgreSQL cancels it. */
const STATEMENT_TIMEOUT = "10s";

type Row = Record<string, unknown>;

/** One query and the families it yields. */
interface Probe {
  /** Families this probe feeds, for the log line when it fails. */
  families: string[];
  /** The probe writes (folds a counter table); every other probe runs read-only. */
  writes?: boolean;
  /** `cache`: the per-node series of this database, kept between scrapes. */
  run(q: Queryable, cache: NodeSeriesCache): Promise<MetricFamily[]>;
}

function gauge(name: string, help: string, samples: MetricSample[]): MetricFamily {
  return { name, help, type: "gauge", samples };
}

/** Samples of a one-label count, with `always` values present (0 when absent) in that order first. */
function countsBy(name: string, label: string, rows: Row[], always: readonly string[]): MetricSample[] {
  const counts = new Map<string, number>(always.map((v) => [v, 0]));
  for (const row of rows) counts.set(String(row.key), Number(row.n));
  return [...counts].map(([value, n]) => ({ name, labels: { [label]: value }, value: n }));
}

async function tablesExist(q: Queryable, tables: readonly string[]): Promise<boolean> {
  const list = tables.map((_, i) => `to_regclass($${i + 1}) IS NOT NULL`).join(" AND ");
  const rows = await q.query<{ ok: boolean }>(`SELECT ${list} AS ok`, tables);
  return rows[0]?.ok === true;
}

const PROBES: readonly Probe[] = [
  {
    // The counts by status from the status totals (migrations/0024), and whether nodes came or went since the
    // last scrape (their number, the newest creation time: one index probe), which the per-node series need.
    // One statement, so one snapshot: the number and the newest time agree.
    families: ["svc_nodes_total", "svc_node_certificate_expiry_seconds", "svc_node_last_seen_seconds"],
    async run(q, cache) {
      const rows = await q.query<{ key: string | null; n: number; newest: number | null; now: number }>(
        `SELECT s.key, coalesce(s.n, 0)::int AS n,
                (SELECT extract(epoch FROM max(created_at))::float8 FROM nodes) AS newest,
                extract(epoch FROM now())::float8 AS now
           FROM (SELECT 1) one
           LEFT JOIN (${NODE_STATUS_COUNTS_SQL} HAVING sum(s.n) <> 0) s ON true
          ORDER BY s.key`,
      );
      const counted = rows.filter((r) => r.key !== null);
      const newest = counted.reduce<number | null>(
        (max, r) => r.newest !== null && (max === null || r.newest > max) ? r.newest : max,
        null,
      );
      const fleet = { n: counted.reduce((sum, r) => sum + r.n, 0), newest, now: rows[0].now };
      const name = "svc_nodes_total";
      return [
        gauge(name, "Nodes by status.", countsBy(name, "status", counted, NODE_STATUSES)),
        ...await cache.families(q, fleet),
      ];
    },
  },
  {
    families: ["svc_policies_total"],
    async run(q) {
      const rows = await q.query<{ state: string; type: string; n: number }>(
        "SELECT state, type, count(*) AS n FROM policies GROUP BY state, type ORDER BY state, type",
      );
      const name = "svc_policies_total";
      return [
        gauge(
          name,
          "Policies by state and type (only combinations that exist).",
          rows.map((r) => ({ name, labels: { state: r.state, type: r.type }, value: Number(r.n) })),
        ),
      ];
    },
  },
  {
    families: ["svc_policy_bindings_total"],
    async run(q) {
      const rows = await q.query(
        "SELECT state AS key, count(*) AS n FROM policy_bindings GROUP BY state ORDER BY state",
      );
      const name = "svc_policy_bindings_total";
      return [gauge(name, "Policy bindings by state.", countsBy(name, "state", rows, BINDING_STATES))];
    },
  },
  {
    families: ["svc_compliance_results_total"],
    async run(q) {
      // Only results of policies still assigned to the node (enabled binding on one of its groups) count:
      // an unbound policy's last result is history, and counting it would keep alerts firing forever. The
      // per-node counters hold exactly those, and their fleet totals (the REST compliance views read them
      // too, so metrics and UI agree) are a few rows however many nodes report.
      const sums = await fleetTotals(q);
      const rows = EXPORTED_COMPLIANCE_STATUSES.map((key) => ({ key, n: sums[key] }));
      const name = "svc_compliance_results_total";
      return [
        gauge(
          name,
          "Latest compliance result per node and assigned policy, by status; inapplicable results are not counted.",
          countsBy(name, "status", rows, EXPORTED_COMPLIANCE_STATUSES),
        ),
      ];
    },
  },
  {
    families: ["svc_read_model_pending_changes", "svc_read_model_lag_seconds"],
    async run(q) {
      const backlog = await readModelBacklog(q);
      const labels = { model: "policy_reach" };
      return [
        gauge(
          "svc_read_model_pending_changes",
          "Binding and policy changes whose reach refresh is queued or under way (server/domain/reach.ts).",
          [{ name: "svc_read_model_pending_changes", labels, value: backlog.pending }],
        ),
        gauge(
          "svc_read_model_lag_seconds",
          "Seconds since the oldest change still queued for the read model committed; 0 when it is current.",
          [{ name: "svc_read_model_lag_seconds", labels, value: backlog.lagSeconds }],
        ),
      ];
    },
  },
  {
    families: ["svc_users_total"],
    async run(q) {
      const rows = await q.query<{ source: string; enabled: boolean; n: number }>(
        "SELECT source, enabled, count(*) AS n FROM users GROUP BY source, enabled ORDER BY source, enabled DESC",
      );
      const name = "svc_users_total";
      return [
        gauge(
          name,
          "Users by authentication source and enabled flag.",
          rows.map((r) => ({
            name,
            labels: { source: r.source, enabled: String(r.enabled) },
            value: Number(r.n),
          })),
        ),
      ];
    },
  },
  {
    // Not a count over the audit log (a million rows is a second of work at every scrape): triggers keep signed
    // deltas per action in audit_action_counts (migration 0010); they are folded here into one row per action.
    families: ["svc_audit_events_total"],
    writes: true,
    async run(q) {
      await q.query(
        `WITH folded AS (DELETE FROM audit_action_counts RETURNING action, n)
         INSERT INTO audit_action_counts (action, n)
         SELECT action, sum(n) FROM folded GROUP BY action HAVING sum(n) <> 0`,
      );
      const rows = await q.query<{ action: string; n: number }>(
        `SELECT action, sum(n)::float8 AS n FROM audit_action_counts
          GROUP BY action HAVING sum(n) > 0 ORDER BY action`,
      );
      const name = "svc_audit_events_total";
      return [
        gauge(
          name,
          "Rows in the audit log per action (drops when retention purges old rows).",
          rows.map((r) => ({ name, labels: { action: r.action }, value: Number(r.n) })),
        ),
      ];
    },
  },
  {
    families: ["svc_flatpak_catalog_apps_total", "svc_flatpak_catalog_last_success_timestamp"],
    async run(q) {
      const rows = await tablesExist(q, ["flatpak_repos", "flatpak_catalog_apps"])
        ? await q.query<{ repo: string; apps: number; last: number }>(
          `SELECT r.name AS repo,
                  (SELECT count(*) FROM flatpak_catalog_apps a WHERE a.repo_id = r.id) AS apps,
                  coalesce(floor(extract(epoch FROM r.last_success_at)), 0)::float8 AS last
             FROM flatpak_repos r ORDER BY r.name`,
        )
        : [];
      return [
        gauge(
          "svc_flatpak_catalog_apps_total",
          "Applications indexed in the Flatpak catalog per repository.",
          rows.map((r) => ({
            name: "svc_flatpak_catalog_apps_total",
            labels: { repo: r.repo },
            value: Number(r.apps),
          })),
        ),
        gauge(
          "svc_flatpak_catalog_last_success_timestamp",
          "Unix time of the last successful catalog refresh or upload per repository; 0 if never.",
          rows.map((r) => ({
            name: "svc_flatpak_catalog_last_success_timestamp",
            labels: { repo: r.repo },
            value: Number(r.last),
          })),
        ),
      ];
    },
  },
  {
    // Disk-encryption figures are fleet-wide counts only: never a node name, volume id or key material.
    families: ["svc_luks_volumes_total"],
    async run(q) {
      const rows = await tablesExist(q, ["luks_volumes", "luks_recovery_keys"])
        ? await q.query(
          `SELECT escrowed::text AS key, count(*) AS n
             FROM (SELECT EXISTS (SELECT 1 FROM luks_recovery_keys k
                                   WHERE k.volume_id = v.id AND k.state = 'active') AS escrowed
                     FROM luks_volumes v WHERE v.luks_version > 0 AND v.missing_since IS NULL) s
            GROUP BY escrowed`,
        )
        : [];
      const name = "svc_luks_volumes_total";
      return [
        gauge(
          name,
          "Encrypted volumes reported by agents, by whether an active recovery key is escrowed.",
          countsBy(name, "escrowed", rows, ["true", "false"]),
        ),
      ];
    },
  },
  {
    families: ["svc_luks_recovery_keys_overdue_total"],
    async run(q) {
      const rows = await tablesExist(q, ["luks_volumes"])
        ? await q.query<{ n: number }>(
          `SELECT count(*) AS n FROM luks_volumes
            WHERE rotation_requested_at IS NOT NULL AND luks_version > 0 AND missing_since IS NULL`,
        )
        : [{ n: 0 }];
      const name = "svc_luks_recovery_keys_overdue_total";
      return [
        gauge(name, "Encrypted volumes with a pending recovery-key rotation request not yet completed.", [
          { name, labels: {}, value: Number(rows[0].n) },
        ]),
      ];
    },
  },
];

/** The reach model's backlog: changes queued for the workers, and how long the oldest has waited. */
export interface ReadModelBacklog {
  pending: number;
  /** Seconds since the oldest pending change committed; 0 when nothing waits. */
  lagSeconds: number;
}

/** Reads the reach model's backlog (`reach_refresh_queue`, migration 0022). */
export async function readModelBacklog(q: Queryable): Promise<ReadModelBacklog> {
  const [row] = await q.query<{ pending: number; lag: number }>(
    `SELECT count(*)::int AS pending,
            coalesce(extract(epoch FROM clock_timestamp() - min(enqueued_at)), 0)::float8 AS lag
       FROM reach_refresh_queue`,
  );
  return { pending: row.pending, lagSeconds: row.lag };
}

/** The per-node series of each database handle, between scrapes. */
const nodeSeries = new WeakMap<Db, NodeSeriesCache>();

/** `svc_database_up`: whether the database answered at this scrape (always present, for alerting). */
function databaseUp(up: boolean): MetricFamily {
  return gauge("svc_database_up", "1 when the database answered at this scrape, 0 when it did not.", [
    { name: "svc_database_up", labels: {}, value: up ? 1 : 0 },
  ]);
}

/**
 * Runs every scrape query and returns the families that could be computed, and `svc_database_up`. Never
 * throws: a failing query omits its families, an unreachable database omits them all (only
 * `svc_database_up 0` remains), each with a `metrics:` log line.
 */
export async function collectDatabaseFamilies(db: Db, log: Logger): Promise<MetricFamily[]> {
  try {
    await db.query("SELECT 1");
  } catch (err) {
    log.error("metrics: database unavailable; database metrics omitted from this scrape", {
      error: errorText(err),
    });
    return [databaseUp(false)];
  }
  const families: MetricFamily[] = [databaseUp(true)];
  let cache = nodeSeries.get(db);
  if (!cache) nodeSeries.set(db, cache = createNodeSeriesCache());
  // One short read-only transaction per query, run one after another so a scrape holds at most one pooled
  // connection. Not one transaction with savepoints: postgres.js fails a whole transaction once any
  // statement in it failed, even when the error was caught and rolled back to a savepoint.
  for (const probe of PROBES) {
    try {
      families.push(
        ...await db.transaction(async (tx) => {
          if (!probe.writes) await tx.query("SET TRANSACTION READ ONLY");
          await tx.query(`SET LOCAL statement_timeout = '${STATEMENT_TIMEOUT}'`);
          return await probe.run(tx, cache);
        }),
      );
    } catch (err) {
      log.error(`metrics: query for ${probe.families.join(", ")} failed; omitted from this scrape`, {
        error: errorText(err),
      });
    }
  }
  return families;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
