/**
 * Metrics listener: every spec family against database fixtures, scraped over real HTTP(S) and parsed with a
 * strict parser (and, when installed, the Prometheus project's own Python OpenMetrics parser); bearer token,
 * TLS, bind failure, failing queries, content negotiation and the process-lifetime counters.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { opensslCertificate } from "../helpers/certificates.ts";
import { dbTest } from "../helpers/db.ts";
import {
  ExpositionParseError,
  parseClassicText,
  type ParsedFamily,
  parseOpenMetrics,
} from "../helpers/openmetrics_parser.ts";
import { ConfigError, resolveConfig } from "../../server/config/config.ts";
import { createLogger } from "../../server/core/log.ts";
import type { ServerContext } from "../../server/context.ts";
import type { Db } from "../../server/db/db.ts";
import { openPglite } from "../../server/db/mod.ts";
import { type MetricsListener, startMetricsListener } from "../../server/metrics/listener.ts";
import { collectDatabaseFamilies } from "../../server/metrics/collector.ts";
import { cpuTime, leastStall } from "../helpers/stall.ts";
import { negotiate, render } from "../../server/metrics/exposition.ts";
import {
  agentPackageDownloads,
  flatpakCatalogRefresh,
  incPolicyStreamsOpen,
  luksEscrowOperations,
  luksRecoveryKeyReveals,
  observePolicyPropagation,
  setPolicyStreamsOpen,
} from "../../server/metrics/counters.ts";

const OM_ACCEPT_PROMETHEUS_2 =
  "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4," +
  "text/plain;version=0.0.4;q=0.3,*/*;q=0.2";

interface Harness {
  ctx: ServerContext;
  lines: string[];
}

/** A ServerContext with only what the metrics listener reads; the CA and certificates are never touched. */
function harness(db: Db, metrics: Partial<ServerContext["config"]["metrics"]> = {}): Harness {
  const config = resolveConfig({}, {});
  // Port 0 (ephemeral) is refused by the config loader, so tests set the address after loading.
  config.metrics = { ...config.metrics, listenAddr: "127.0.0.1:0", ...metrics };
  const lines: string[] = [];
  const ctx: ServerContext = {
    config,
    db,
    log: createLogger("debug", (line) => lines.push(line)),
    audit: { record: async () => {} },
    ca: {} as ServerContext["ca"],
    webCert: { certPem: "", keyPem: "" },
    internalCert: { certPem: "", keyPem: "" },
    version: "test",
    replicaId: "metrics-test",
    totpKey: new Uint8Array(32),
  };
  return { ctx, lines };
}

async function withListener<T>(h: Harness, fn: (l: MetricsListener) => Promise<T>): Promise<T> {
  const listener = await startMetricsListener(h.ctx);
  try {
    return await fn(listener);
  } finally {
    await listener.stop();
  }
}

interface Scrape {
  status: number;
  headers: Headers;
  body: string;
}

async function get(
  url: string,
  headers: Record<string, string> = {},
  client?: Deno.HttpClient,
): Promise<Scrape> {
  const res = await fetch(url, { headers, redirect: "manual", client });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

async function scrapeOpenMetrics(addr: string, headers: Record<string, string> = {}) {
  const res = await get(`http://${addr}/metrics`, { accept: OM_ACCEPT_PROMETHEUS_2, ...headers });
  assert.equal(res.status, 200, res.body);
  assert.equal(res.headers.get("content-type"), "application/openmetrics-text; version=1.0.0; charset=utf-8");
  return { ...res, families: parseOpenMetrics(res.body) };
}

function family(families: Map<string, ParsedFamily>, name: string, type: string): ParsedFamily {
  const f = families.get(name);
  assert.ok(f, `family ${name} missing; have ${[...families.keys()].join(", ")}`);
  assert.equal(f.type, type, `${name} type`);
  assert.ok(f.help && f.help.length > 5, `${name} has a HELP text`);
  return f;
}

/** The family's samples as `{labels as k=v,…} → value`, for exact comparisons. */
function series(f: ParsedFamily): Record<string, number> {
  return Object.fromEntries(
    f.samples.map((s) => [Object.entries(s.labels).map(([k, v]) => `${k}=${v}`).join(","), s.value]),
  );
}

function labelNames(f: ParsedFamily): string[] {
  return [...new Set(f.samples.flatMap((s) => Object.keys(s.labels)))].sort();
}

/** Every family computed from the database. */
const DATABASE_FAMILIES = [
  "svc_nodes_total",
  "svc_node_certificate_expiry_seconds",
  "svc_node_last_seen_seconds",
  "svc_policies_total",
  "svc_policy_bindings_total",
  "svc_compliance_results_total",
  "svc_users_total",
  "svc_audit_events_total",
  "svc_flatpak_catalog_apps_total",
  "svc_flatpak_catalog_last_success_timestamp",
  "svc_luks_volumes_total",
  "svc_luks_recovery_keys_overdue_total",
];

// ---- Fixtures -------------------------------------------------------------------------------------------

const LAST_SEEN = "2026-03-04T05:06:07.890Z";
const LAST_SEEN_EPOCH = Math.floor(Date.parse(LAST_SEEN) / 1000);
const WEIRD_FQDN = 'we"ird\\host\nname';

async function insertFixtures(db: Db): Promise<void> {
  const [g1] = await db.query<{ id: string }>(
    "INSERT INTO node_groups (name) VALUES ('office') RETURNING id",
  );
  const [g2] = await db.query<{ id: string }>("INSERT INTO node_groups (name) VALUES ('lab') RETURNING id");
  const node = async (
    name: string,
    status: string,
    fqdn: string,
    certDays: number | null,
    seen: string | null,
  ) => {
    const [row] = await db.query<{ id: string }>(
      `INSERT INTO nodes (name, status, fqdn, cert_not_after, last_seen)
       VALUES ($1, $2, $3, CASE WHEN $4::float8 IS NULL THEN NULL ELSE now() + make_interval(days => $4::int) END,
               $5::timestamptz)
       RETURNING id`,
      [name, status, fqdn, certDays, seen],
    );
    return row.id;
  };
  const online = await node("ws-online", "online", "ws-online.example.org", 30, LAST_SEEN);
  const degraded = await node("ws-degraded", "degraded", WEIRD_FQDN, 60, LAST_SEEN);
  const offline = await node("ws-offline", "offline", "", -2, LAST_SEEN);
  const unknown1 = await node("ws-unknown-1", "unknown", "u1.example.org", null, null);
  await node("ws-unknown-2", "unknown", "u2.example.org", null, null);
  for (const n of [online, degraded, offline]) {
    await db.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [n, g1.id]);
  }
  await db.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [
    unknown1,
    g2.id,
  ]);

  const policy = async (name: string, type: string, state: string) => {
    const [row] = await db.query<{ id: string }>(
      "INSERT INTO policies (name, type, content, state) VALUES ($1, $2, '{}', $3) RETURNING id",
      [name, type, state],
    );
    return row.id;
  };
  const dconfA = await policy("dconf a", "Dconf", "released");
  const dconfB = await policy("dconf b", "Dconf", "released");
  await policy("dconf draft", "Dconf", "draft");
  await policy("firefox draft", "Firefox", "draft");
  const polkit = await policy("polkit old", "Polkit", "archived");
  const bind = (p: string, g: string, state: string) =>
    db.query("INSERT INTO policy_bindings (policy_id, node_group_id, state) VALUES ($1, $2, $3)", [
      p,
      g,
      state,
    ]);
  await bind(dconfA, g1.id, "enabled");
  await bind(dconfB, g1.id, "enabled");
  await bind(polkit, g2.id, "disabled");
  // An archived policy is delivered to nobody, even through an enabled binding: its results are history.
  await bind(polkit, g1.id, "enabled");

  const result = (n: string, p: string, status: string) =>
    db.query("INSERT INTO compliance_results (node_id, policy_id, status) VALUES ($1, $2, $3)", [
      n,
      p,
      status,
    ]);
  await result(online, dconfA, "compliant");
  await result(offline, dconfA, "compliant");
  await result(online, dconfB, "inapplicable");
  await result(degraded, dconfA, "non_compliant");
  await result(degraded, dconfB, "error");
  // Stale: ws-unknown-1 is in "lab", where neither policy is bound (enabled); these must not count.
  await result(unknown1, dconfA, "non_compliant");
  await result(unknown1, polkit, "unknown");
  await result(online, polkit, "error");

  const user = (name: string, source: string, enabled: boolean) =>
    db.query("INSERT INTO users (username, source, enabled) VALUES ($1, $2, $3)", [name, source, enabled]);
  await user("admin", "local", true);
  await user("bob", "local", false);
  await user("carol", "ldap", true);
  await user("dave", "ldap", true);

  for (const [action, n] of [["policy.create", 3], ["user.login", 2]] as const) {
    for (let i = 0; i < n; i++) {
      await db.query("INSERT INTO audit_logs (action, outcome) VALUES ($1, 'success')", [action]);
    }
  }
}

/** Rows in the Flatpak catalogue tables (migration 0007) and the disk-encryption tables (migration 0008). */
async function insertCatalogueAndLuksRows(db: Db): Promise<void> {
  // The Flatpak catalogue tables come from migration 0007.
  const [flathub] = await db.query<{ id: string }>(
    "INSERT INTO flatpak_repos (name, source, last_success_at) VALUES ('flathub', 'url', $1) RETURNING id",
    [LAST_SEEN],
  );
  await db.query("INSERT INTO flatpak_repos (name, source) VALUES ('local-mirror', 'upload')");
  for (const app of ["org.gnome.Calculator", "org.mozilla.firefox", "org.libreoffice.LibreOffice"]) {
    await db.query("INSERT INTO flatpak_catalog_apps (repo_id, app_id) VALUES ($1, $2)", [flathub.id, app]);
  }
  const nodes = await db.query<{ id: string }>("SELECT id FROM nodes ORDER BY name");
  const volume = async (nodeId: string, keyState: string | null, rotationPending: boolean) => {
    // The disk-encryption tables come from migration 0008; sealed key bytes do not matter to the gauges.
    const [v] = await db.query<{ id: string }>(
      `INSERT INTO luks_volumes (node_id, node_name, identity, luks_uuid, luks_version, rotation_requested_at)
       VALUES ($1, 'n', $2, $2, 2, $3) RETURNING id`,
      [nodeId, crypto.randomUUID(), rotationPending ? new Date() : null],
    );
    if (keyState) {
      await db.query(
        `INSERT INTO luks_recovery_keys (volume_id, state, kek_id, wrapped_data_key, ciphertext)
         VALUES ($1, $2, 'k', '\\x00', '\\x00')`,
        [v.id, keyState],
      );
    }
  };
  await volume(nodes[0].id, "active", false);
  await volume(nodes[1].id, "active", true);
  await volume(nodes[2].id, "destroyed", true);
  await volume(nodes[3].id, null, false);
}

// ---- Database-backed scrape ----------------------------------------------------------------------------

dbTest("metrics: every spec family with its type, labels and always-present values", async (db, t) => {
  await insertFixtures(db);
  const h = harness(db);
  await withListener(h, async (listener) => {
    const addr = listener.addr;
    assert.ok(addr, h.lines.join("\n"));
    const { families, body } = await scrapeOpenMetrics(addr);
    assert.ok(body.endsWith("# EOF\n"));

    await t.step("nodes by status, all four always present", () => {
      const f = family(families, "svc_nodes_total", "gauge");
      assert.deepEqual(series(f), {
        "status=online": 1,
        "status=degraded": 1,
        "status=offline": 1,
        "status=unknown": 2,
      });
    });

    await t.step("certificate expiry and last seen per node, with escaped fqdn", () => {
      const expiry = family(families, "svc_node_certificate_expiry_seconds", "gauge");
      assert.deepEqual(labelNames(expiry), ["fqdn", "node"]);
      const byNode = Object.fromEntries(expiry.samples.map((s) => [s.labels.node, s]));
      // Nodes without a certificate have no expiry series.
      assert.deepEqual(Object.keys(byNode).sort(), ["ws-degraded", "ws-offline", "ws-online"]);
      assert.ok(Math.abs(byNode["ws-online"].value - 30 * 86400) < 120, String(byNode["ws-online"].value));
      assert.ok(Math.abs(byNode["ws-offline"].value + 2 * 86400) < 120, "expired certificate is negative");
      assert.equal(byNode["ws-online"].labels.fqdn, "ws-online.example.org");
      assert.equal(byNode["ws-degraded"].labels.fqdn, WEIRD_FQDN, "quote, backslash and newline round-trip");
      const seen = family(families, "svc_node_last_seen_seconds", "gauge");
      assert.deepEqual(labelNames(seen), ["fqdn", "node"]);
      assert.deepEqual(seen.samples.map((s) => [s.labels.node, s.value]).sort(), [
        ["ws-degraded", LAST_SEEN_EPOCH],
        ["ws-offline", LAST_SEEN_EPOCH],
        ["ws-online", LAST_SEEN_EPOCH],
      ]);
    });

    await t.step("policies: only existing state × type combinations", () => {
      const f = family(families, "svc_policies_total", "gauge");
      assert.deepEqual(series(f), {
        "state=archived,type=Polkit": 1,
        "state=draft,type=Dconf": 1,
        "state=draft,type=Firefox": 1,
        "state=released,type=Dconf": 2,
      });
    });

    await t.step("bindings: enabled and disabled", () => {
      assert.deepEqual(series(family(families, "svc_policy_bindings_total", "gauge")), {
        "state=enabled": 3,
        "state=disabled": 1,
      });
    });

    await t.step("compliance: four statuses, never inapplicable, only assigned policies", () => {
      assert.deepEqual(series(family(families, "svc_compliance_results_total", "gauge")), {
        "status=compliant": 2,
        "status=non_compliant": 1,
        "status=error": 1,
        "status=unknown": 0,
      });
    });

    await t.step("users by source and enabled", () => {
      assert.deepEqual(series(family(families, "svc_users_total", "gauge")), {
        "source=ldap,enabled=true": 2,
        "source=local,enabled=true": 1,
        "source=local,enabled=false": 1,
      });
    });

    await t.step("audit events per action, no series for absent actions", () => {
      assert.deepEqual(series(family(families, "svc_audit_events_total", "gauge")), {
        "action=policy.create": 3,
        "action=user.login": 2,
      });
    });

    await t.step("flatpak and disk-encryption gauges before their tables exist", () => {
      assert.deepEqual(family(families, "svc_flatpak_catalog_apps_total", "gauge").samples, []);
      assert.deepEqual(family(families, "svc_flatpak_catalog_last_success_timestamp", "gauge").samples, []);
      assert.deepEqual(series(family(families, "svc_luks_volumes_total", "gauge")), {
        "escrowed=true": 0,
        "escrowed=false": 0,
      });
      assert.deepEqual(series(family(families, "svc_luks_recovery_keys_overdue_total", "gauge")), { "": 0 });
    });

    await t.step("svc_database_up is 1 while the database answers", () => {
      assert.deepEqual(series(family(families, "svc_database_up", "gauge")), { "": 1 });
    });

    await t.step("counters, histogram and streams gauge are exposed", () => {
      for (
        const name of [
          "svc_agent_package_downloads",
          "svc_flatpak_catalog_refresh",
          "svc_luks_escrow_operations",
        ]
      ) {
        family(families, name, "counter");
      }
      assert.deepEqual(labelNames(family(families, "svc_luks_escrow_operations", "counter")), [
        "op",
        "outcome",
      ]);
      assert.equal(family(families, "svc_luks_escrow_operations", "counter").samples.length, 8);
      assert.deepEqual(labelNames(family(families, "svc_luks_recovery_key_reveals", "counter")), []);
      family(families, "svc_policy_propagation_seconds", "histogram");
      family(families, "svc_policy_streams_open", "gauge");
    });

    await t.step("process and Deno/V8 runtime families", () => {
      for (const name of ["process_cpu_user_seconds", "process_cpu_system_seconds", "process_cpu_seconds"]) {
        assert.ok(family(families, name, "counter").samples[0].value >= 0);
      }
      const start = family(families, "process_start_time_seconds", "gauge").samples[0].value;
      assert.ok(Math.abs(start - (Date.now() / 1000 - performance.now() / 1000)) < 60, `start time ${start}`);
      assert.ok(family(families, "process_resident_memory_bytes", "gauge").samples[0].value > 1e6);
      assert.ok(family(families, "process_open_fds", "gauge").samples[0].value > 0);
      family(families, "process_max_fds", "gauge");
      const info = family(families, "deno_info", "gauge").samples[0];
      assert.deepEqual(info.labels, {
        version: Deno.version.deno,
        v8: Deno.version.v8,
        typescript: Deno.version.typescript,
      });
      assert.ok(family(families, "v8_heap_used_bytes", "gauge").samples[0].value > 0);
      assert.ok(
        family(families, "v8_heap_space_used_bytes", "gauge").samples.some((s) => s.labels.space === "old"),
      );
      family(families, "deno_event_loop_lag_seconds", "histogram");
      assert.ok(
        ![...families.keys()].some((n) => n.startsWith("nodejs_")),
        "no misleading nodejs_* families",
      );
    });

    await t.step("the classic text format carries the same series", async () => {
      const res = await get(`http://${addr}/metrics`, { "accept-encoding": "identity" });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
      assert.ok(!res.body.includes("# EOF"));
      const text = parseClassicText(res.body);
      assert.deepEqual(
        series(family(text, "svc_nodes_total", "gauge")),
        series(families.get("svc_nodes_total")!),
      );
      assert.equal(family(text, "svc_agent_package_downloads_total", "counter").samples.length, 16);
      const hist = family(text, "svc_policy_propagation_seconds", "histogram");
      assert.ok(hist.samples.some((s) => s.labels.le === "1"), "classic bounds are plain numbers");
    });

    await t.step(
      "flatpak and disk-encryption gauges from their tables, without node names",
      async () => {
        await insertCatalogueAndLuksRows(db);
        const { families: after } = await scrapeOpenMetrics(addr);
        assert.deepEqual(series(family(after, "svc_flatpak_catalog_apps_total", "gauge")), {
          "repo=flathub": 3,
          "repo=local-mirror": 0,
        });
        assert.deepEqual(series(family(after, "svc_flatpak_catalog_last_success_timestamp", "gauge")), {
          "repo=flathub": LAST_SEEN_EPOCH,
          "repo=local-mirror": 0,
        });
        assert.deepEqual(series(family(after, "svc_luks_volumes_total", "gauge")), {
          "escrowed=true": 2,
          "escrowed=false": 2,
        });
        assert.deepEqual(series(family(after, "svc_luks_recovery_keys_overdue_total", "gauge")), { "": 2 });
        const nodeNames = (await db.query<{ name: string }>("SELECT name FROM nodes")).map((r) => r.name);
        for (const [name, f] of after) {
          if (!name.startsWith("svc_luks")) continue;
          for (const s of f.samples) {
            for (const k of Object.keys(s.labels)) {
              assert.ok(["escrowed", "op", "outcome"].includes(k), `${name}: ${k}`);
            }
            for (const v of Object.values(s.labels)) {
              assert.ok(!nodeNames.includes(v), `${name} carries a node name`);
            }
          }
        }
      },
    );

    await t.step("a failing query omits only its metric and logs a metrics: line", async () => {
      await db.query("ALTER TABLE audit_action_counts RENAME TO audit_action_counts_moved");
      h.lines.length = 0;
      const res = await scrapeOpenMetrics(addr);
      assert.ok(!res.families.has("svc_audit_events_total"), "broken metric omitted");
      for (
        const name of [
          ...DATABASE_FAMILIES.filter((n) => n !== "svc_audit_events_total"),
          "svc_agent_package_downloads",
        ]
      ) {
        assert.ok(res.families.has(name), `${name} still present`);
      }
      const logged = h.lines.filter((l) => / ERROR metrics: /.test(l));
      assert.equal(logged.length, 1, h.lines.join("\n"));
      assert.match(logged[0], /metrics: query for svc_audit_events_total failed/);
      await db.query("ALTER TABLE audit_action_counts_moved RENAME TO audit_action_counts");
    });
  });
});

dbTest(
  "metrics: concurrent scrapes all succeed and keep at most one database query in flight",
  async (db) => {
    // The real database, instrumented to count the transactions scrapes open and how many overlap.
    let transactions = 0;
    let inFlight = 0;
    let maxInFlight = 0;
    const counted: Db = {
      driver: db.driver,
      query: (sql, params) => db.query(sql, params),
      async transaction(fn) {
        transactions++;
        maxInFlight = Math.max(maxInFlight, ++inFlight);
        try {
          return await db.transaction(fn);
        } finally {
          inFlight--;
        }
      },
      listen: (channel, handler) => db.listen(channel, handler),
      notify: (channel, payload) => db.notify(channel, payload),
      unitOfWork: (fn) => db.unitOfWork(fn),
      close: () => Promise.resolve(),
    };
    const h = harness(counted);
    await withListener(h, async (listener) => {
      await scrapeOpenMetrics(listener.addr!);
      assert.ok(transactions >= 8 && transactions <= 12, `a handful of queries per scrape: ${transactions}`);
      const all = await Promise.all(Array.from({ length: 8 }, () => scrapeOpenMetrics(listener.addr!)));
      assert.equal(maxInFlight, 1, "scrapes that overlap share one collection");
      for (const s of all) {
        assert.deepEqual(
          series(s.families.get("svc_nodes_total")!),
          series(all[0].families.get("svc_nodes_total")!),
        );
      }
    });
  },
);

let closedDbPromise: Promise<Db> | undefined;
/** A database handle that is already closed: every query fails. */
function closedDb(): Promise<Db> {
  closedDbPromise ??= openPglite().then(async (db) => {
    await db.close();
    return db;
  });
  return closedDbPromise;
}

Deno.test("metrics: an unreachable database omits the database families, the scrape still succeeds", async () => {
  const h = harness(await closedDb());
  await withListener(h, async (listener) => {
    const { families } = await scrapeOpenMetrics(listener.addr!);
    for (const name of DATABASE_FAMILIES) assert.ok(!families.has(name), name);
    assert.deepEqual(
      series(family(families, "svc_database_up", "gauge")),
      { "": 0 },
      "the alertable gauge stays",
    );
    family(families, "svc_agent_package_downloads", "counter");
    family(families, "process_cpu_seconds", "counter");
    const logged = h.lines.filter((l) => / ERROR metrics: /.test(l));
    assert.equal(logged.length, 1, "one line, not one per query");
    assert.match(logged[0], /metrics: database unavailable/);
  });
});

Deno.test("metrics: the event-loop lag histogram sees a blocked loop", async () => {
  const h = harness(await closedDb());
  await withListener(h, async (listener) => {
    const slow = (families: Map<string, ParsedFamily>) =>
      family(families, "deno_event_loop_lag_seconds", "histogram").samples.find((s) =>
        s.name === "deno_event_loop_lag_seconds_count"
      )!.value -
      family(families, "deno_event_loop_lag_seconds", "histogram").samples.find((s) =>
        s.name === "deno_event_loop_lag_seconds_bucket" && s.labels.le === "0.25"
      )!.value;
    const before = slow((await scrapeOpenMetrics(listener.addr!)).families);
    // Deliberately hold the event loop (bounded) so the sampler's next timer fires at least 0.3 s late.
    const until = performance.now() + 800;
    while (performance.now() < until) { /* busy */ }
    await new Promise((r) => setTimeout(r, 600));
    const after = slow((await scrapeOpenMetrics(listener.addr!)).families);
    assert.ok(after - before >= 1, `samples slower than 0.25 s: before ${before}, after ${after}`);
  });
});

// ---- HTTP behaviour (no database queries needed beyond an empty schema) ---------------------------------

dbTest("metrics: bearer token is required and compared exactly", async (db) => {
  const token = "s3cret-metrics-token";
  const h = harness(db, { bearerToken: token });
  await withListener(h, async (listener) => {
    const base = `http://${listener.addr}`;
    for (
      const [what, authorization] of [
        ["no header", undefined],
        ["wrong token", "Bearer wrong-token"],
        ["token with a suffix", `Bearer ${token}x`],
        ["token prefix", `Bearer ${token.slice(0, -1)}`],
        ["empty bearer", "Bearer "],
        ["basic scheme", `Basic ${btoa(`x:${token}`)}`],
        ["token without scheme", token],
      ] as const
    ) {
      for (const path of ["/metrics", "/", "/nope"]) {
        const res = await get(base + path, authorization ? { authorization } : {});
        assert.equal(res.status, 401, `${what} on ${path}`);
        assert.equal(res.body, "Unauthorized\n");
        assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer realm=/);
      }
    }
    const ok = await get(`${base}/metrics`, {
      authorization: `Bearer ${token}`,
      accept: OM_ACCEPT_PROMETHEUS_2,
    });
    assert.equal(ok.status, 200);
    parseOpenMetrics(ok.body);
    // The scheme name is case-insensitive (RFC 9110); the token is not.
    assert.equal((await get(`${base}/metrics`, { authorization: `bearer ${token}` })).status, 200);
    assert.equal(
      (await get(`${base}/metrics`, { authorization: `Bearer ${token.toUpperCase()}` })).status,
      401,
    );
  });
});

dbTest("metrics: routes, methods, content negotiation and gzip", async (db) => {
  const h = harness(db);
  await withListener(h, async (listener) => {
    const base = `http://${listener.addr}`;
    const root = await get(`${base}/`);
    assert.equal(root.status, 302);
    assert.equal(root.headers.get("location"), "/metrics");
    for (const path of ["/metrics/", "/metricsx", "/api/v1/health", "/favicon.ico"]) {
      assert.equal((await get(base + path)).status, 404, path);
    }
    const post = await fetch(`${base}/metrics`, { method: "POST", body: "x" });
    await post.body?.cancel();
    assert.equal(post.status, 405);
    assert.equal(post.headers.get("allow"), "GET, HEAD");
    const head = await fetch(`${base}/metrics`, {
      method: "HEAD",
      headers: { accept: OM_ACCEPT_PROMETHEUS_2 },
    });
    assert.equal(head.status, 200);
    assert.match(head.headers.get("content-type") ?? "", /^application\/openmetrics-text; version=1\.0\.0/);
    await head.body?.cancel();

    // Prometheus 3 asks for OpenMetrics with escaping parameters; curl sends */*.
    const p3 = await get(`${base}/metrics`, {
      accept: "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6," +
        "application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4," +
        "text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
    });
    assert.match(p3.headers.get("content-type") ?? "", /^application\/openmetrics-text/);
    parseOpenMetrics(p3.body);
    const curl = await get(`${base}/metrics`, { accept: "*/*" });
    assert.match(curl.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
    parseClassicText(curl.body);

    const gz = await fetch(`${base}/metrics`, {
      headers: { "accept-encoding": "gzip", accept: OM_ACCEPT_PROMETHEUS_2 },
    });
    assert.equal(gz.headers.get("content-encoding"), "gzip");
    parseOpenMetrics(await gz.text()); // fetch inflates transparently
    const plain = await fetch(`${base}/metrics`, { headers: { "accept-encoding": "gzip;q=0, *" } });
    assert.equal(plain.headers.get("content-encoding"), null);
    await plain.body?.cancel();
  });
});

Deno.test("metrics: content negotiation follows the Accept header's qualities", () => {
  const om = "openmetrics";
  const text = "text";
  const cases: Array<[string | null, string, string?]> = [
    [null, text],
    ["", text],
    ["*/*", text],
    ["application/json", text],
    [OM_ACCEPT_PROMETHEUS_2, om, "1.0.0"],
    ["application/openmetrics-text", om, "1.0.0"],
    ["application/openmetrics-text; version=0.0.1", om, "0.0.1"],
    ["application/openmetrics-text;version=2.0.0,text/plain;q=0.1", text],
    ["text/plain;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5", text],
    ["text/plain;q=0.5,application/openmetrics-text;q=0.9", om, "1.0.0"],
    ["application/openmetrics-text;q=0,*/*;q=0.1", text],
    ['Application/OpenMetrics-Text; Version="1.0.0"', om, "1.0.0"],
  ];
  for (const [accept, format, version] of cases) {
    const got = negotiate(accept);
    assert.equal(got.format, format, `Accept: ${accept}`);
    if (version) {
      assert.equal(got.contentType, `application/openmetrics-text; version=${version}; charset=utf-8`);
    }
  }
});

dbTest("metrics: HTTPS when a certificate and key are configured", async (db) => {
  const dir = await Deno.makeTempDir({ prefix: "svc-metrics-tls-" });
  try {
    const { certFile, keyFile } = await opensslCertificate(dir, {
      name: "metrics",
      subject: "/CN=localhost",
      extensions: [
        "subjectAltName=IP:127.0.0.1,DNS:localhost",
        // rustls refuses a CA certificate as the server's own certificate.
        "basicConstraints=critical,CA:FALSE",
      ],
    });
    const h = harness(db, { tlsCertFile: certFile, tlsKeyFile: keyFile });
    await withListener(h, async (listener) => {
      assert.ok(listener.addr, h.lines.join("\n"));
      const client = Deno.createHttpClient({ caCerts: [await Deno.readTextFile(certFile)] });
      try {
        const res = await get(`https://${listener.addr}/metrics`, { accept: OM_ACCEPT_PROMETHEUS_2 }, client);
        assert.equal(res.status, 200);
        family(parseOpenMetrics(res.body), "svc_nodes_total", "gauge");
      } finally {
        client.close();
      }
      // Plain HTTP to the TLS port gets no metrics.
      await assert.rejects(fetch(`http://${listener.addr}/metrics`).then((r) => r.text()));
      assert.ok(h.lines.some((l) => l.includes(`metrics: listening on https://${listener.addr}/metrics`)));
    });

    const missing = harness(db, { tlsCertFile: join(dir, "absent.crt"), tlsKeyFile: keyFile });
    const failed = await startMetricsListener(missing.ctx);
    assert.equal(failed.addr, null);
    assert.ok(missing.lines.some((l) => / ERROR metrics: cannot listen on .*metrics\.tls_cert_file/.test(l)));
    await failed.stop();
    // A certificate given as the key is unusable: logged, no listener, no crash.
    const swapped = harness(db, { tlsCertFile: certFile, tlsKeyFile: certFile });
    const refused = await startMetricsListener(swapped.ctx);
    assert.equal(refused.addr, null);
    assert.ok(
      swapped.lines.some((l) => / ERROR metrics: cannot listen on .*No keys found/.test(l)),
      swapped.lines.join("\n"),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

dbTest("metrics: a taken port is logged and the listener resolves without an address", async (db) => {
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const h = harness(db, { listenAddr: `127.0.0.1:${taken.addr.port}` });
    const listener = await startMetricsListener(h.ctx);
    assert.equal(listener.addr, null);
    await listener.stop();
    const line = h.lines.find((l) => l.includes(" ERROR metrics: cannot listen on "));
    assert.ok(line, h.lines.join("\n"));
    assert.match(
      line,
      new RegExp(`cannot listen on 127\\.0\\.0\\.1:${taken.addr.port}; continuing without metrics`),
    );
    // The process goes on: another listener starts normally afterwards.
    const other = harness(db);
    await withListener(other, async (l) => {
      assert.ok(l.addr);
      assert.equal((await get(`http://${l.addr}/metrics`)).status, 200);
    });
  } finally {
    taken.close();
  }
});

Deno.test("metrics: TLS certificate without key (or key without certificate) stops the server at config time", () => {
  for (
    const env of [
      { SVC_METRICS_TLS_CERT_FILE: "/etc/svc/metrics.crt" },
      { SVC_METRICS_TLS_KEY_FILE: "/etc/svc/metrics.key" },
    ] as Record<string, string>[]
  ) {
    assert.throws(() => resolveConfig({}, env), (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.match(err.message, /metrics\.tls_cert_file/);
      assert.match(err.message, /metrics\.tls_key_file/);
      assert.match(err.message, /both must be set or neither/);
      return true;
    });
  }
  assert.throws(() => resolveConfig({ "metrics.tls_key_file": "/k" }, {}), ConfigError);
});

// ---- Process-lifetime instruments -------------------------------------------------------------------------

dbTest(
  "metrics: package download counter labels, escrow and reveal counters, propagation histogram",
  async (db) => {
    const h = harness(db);
    await withListener(h, async (listener) => {
      const value = (families: Map<string, ParsedFamily>, sample: string, labels: Record<string, string>) =>
        [...families.values()].flatMap((f) => f.samples).find((s) =>
          s.name === sample && JSON.stringify(s.labels) === JSON.stringify(labels)
        )?.value;
      const before = (await scrapeOpenMetrics(listener.addr!)).families;
      const downloads = family(before, "svc_agent_package_downloads", "counter");
      assert.deepEqual(labelNames(downloads), ["arch", "format"]);
      const combos = downloads.samples.map((s) => `${s.labels.format}/${s.labels.arch}`).sort();
      const expected = ["deb", "rpm", "apk", "arch"].flatMap((f) =>
        ["amd64", "arm64", "ppc64le", "unknown"].map((a) => `${f}/${a}`)
      ).sort();
      assert.deepEqual(combos, expected, "all format × arch series exist from the start");

      agentPackageDownloads.inc({ format: "rpm", arch: "unknown" });
      agentPackageDownloads.inc({ format: "rpm", arch: "unknown" });
      agentPackageDownloads.inc({ format: "deb", arch: "amd64" });
      luksEscrowOperations.inc({ op: "escrow", outcome: "error" });
      luksRecoveryKeyReveals.inc();
      flatpakCatalogRefresh.inc({ repo: "flathub", outcome: "unchanged" });
      observePolicyPropagation(0.003);
      observePolicyPropagation(-1); // clock step: ignored
      observePolicyPropagation(Number.NaN);
      setPolicyStreamsOpen(5);
      incPolicyStreamsOpen(-2);

      const after = (await scrapeOpenMetrics(listener.addr!)).families;
      const delta = (name: string, labels: Record<string, string>) =>
        value(after, name, labels)! - (value(before, name, labels) ?? 0);
      const dl = "svc_agent_package_downloads_total";
      assert.equal(delta(dl, { format: "rpm", arch: "unknown" }), 2);
      assert.equal(delta(dl, { format: "deb", arch: "amd64" }), 1);
      assert.equal(delta(dl, { format: "deb", arch: "arm64" }), 0);
      assert.equal(delta("svc_luks_escrow_operations_total", { op: "escrow", outcome: "error" }), 1);
      assert.equal(delta("svc_luks_escrow_operations_total", { op: "escrow", outcome: "ok" }), 0);
      assert.equal(delta("svc_luks_recovery_key_reveals_total", {}), 1);
      assert.equal(delta("svc_flatpak_catalog_refresh_total", { repo: "flathub", outcome: "unchanged" }), 1);
      assert.equal(delta("svc_policy_propagation_seconds_count", {}), 1);
      assert.equal(delta("svc_policy_propagation_seconds_bucket", { le: "0.0025" }), 0);
      assert.equal(delta("svc_policy_propagation_seconds_bucket", { le: "0.005" }), 1);
      assert.equal(value(after, "svc_policy_streams_open", {}), 3);
      setPolicyStreamsOpen(0);
    });
  },
);

// ---- The parsers used above reject what they should --------------------------------------------------------

Deno.test("metrics: the strict OpenMetrics parser rejects malformed expositions", () => {
  const ok = "# HELP a_total A.\n# TYPE a_total gauge\na_total 1\n# TYPE c counter\nc_total 2\n# EOF\n";
  parseOpenMetrics(ok);
  const bad: Array<[string, string]> = [
    ["missing EOF", "# TYPE a gauge\na 1\n"],
    ["text after EOF", "# TYPE a gauge\na 1\n# EOF\na 2\n"],
    ["blank line", "# TYPE a gauge\n\na 1\n# EOF\n"],
    ["stray comment", "# hello\n# TYPE a gauge\na 1\n# EOF\n"],
    ["interleaved family", '# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na{x="1"} 2\n# EOF\n'],
    ["metadata after samples", "# TYPE a gauge\na 1\n# HELP a late\n# EOF\n"],
    ["counter sample without _total", "# TYPE c counter\nc 1\n# EOF\n"],
    ["negative counter", "# TYPE c counter\nc_total -1\n# EOF\n"],
    ["bad escape", '# TYPE a gauge\na{x="\\t"} 1\n# EOF\n'],
    ["duplicate label", '# TYPE a gauge\na{x="1",x="2"} 1\n# EOF\n'],
    ["duplicate series", "# TYPE a gauge\na 1\na 2\n# EOF\n"],
    ["bad value", "# TYPE a gauge\na one\n# EOF\n"],
    [
      "unsorted buckets",
      '# TYPE h histogram\nh_bucket{le="2.0"} 1\nh_bucket{le="1.0"} 1\nh_bucket{le="+Inf"} 1\nh_count 1\nh_sum 1\n# EOF\n',
    ],
    ["count mismatch", '# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_count 1\nh_sum 1\n# EOF\n'],
    ["no +Inf bucket", '# TYPE h histogram\nh_bucket{le="1.0"} 1\nh_count 1\nh_sum 1\n# EOF\n'],
    [
      "non-canonical le",
      '# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 1\nh_count 1\nh_sum 1\n# EOF\n',
    ],
  ];
  for (const [what, text] of bad) assert.throws(() => parseOpenMetrics(text), ExpositionParseError, what);
  assert.throws(() => parseClassicText("# TYPE a gauge\na 1\n# TYPE a gauge\n"), ExpositionParseError);
});

// ---- Cross-check with the Prometheus project's own parsers, when installed --------------------------------

const PYTHON = "/usr/bin/python3";
const PY_CHECK = `
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om
from prometheus_client.parser import text_string_to_metric_families as classic
parse = om if sys.argv[1] == "openmetrics" else classic
families = list(parse(sys.stdin.read()))
print(len(families))
`;
const havePythonParser = await new Deno.Command(PYTHON, {
  args: ["-c", "import prometheus_client.openmetrics.parser"],
  stdout: "null",
  stderr: "null",
}).output().then((o) => o.success, () => false);
if (!havePythonParser) {
  console.warn(
    "metrics_test: python3-prometheus-client is not installed; the reference-parser check is skipped",
  );
}

dbTest("metrics: the Prometheus client_python parsers accept both formats", async (db) => {
  await insertFixtures(db);
  const h = harness(db);
  await withListener(h, async (listener) => {
    for (const [format, accept] of [["openmetrics", OM_ACCEPT_PROMETHEUS_2], ["text", "text/plain"]]) {
      const res = await get(`http://${listener.addr}/metrics`, { accept });
      const child = new Deno.Command(PYTHON, {
        args: ["-c", PY_CHECK, format],
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const writer = child.stdin.getWriter();
      await writer.write(new TextEncoder().encode(res.body));
      await writer.close();
      const out = await child.output();
      assert.ok(out.success, `${format}: ${new TextDecoder().decode(out.stderr)}`);
      const mine = format === "openmetrics" ? parseOpenMetrics(res.body) : parseClassicText(res.body);
      assert.equal(Number(new TextDecoder().decode(out.stdout).trim()), mine.size, `${format} family count`);
    }
  });
}, { ignore: !havePythonParser });

/**
 * On PostgreSQL only: on the embedded database the 10,000-row query itself runs on the server's thread
 * (PGlite is WASM in-process), which no chunking of the rendering can spread out.
 */
dbTest(
  "a fleet-sized scrape (10,000 nodes) is rendered a chunk at a time, never holding the loop",
  async (db) => {
    await db.query(
      `INSERT INTO nodes (name, status, fqdn, cert_serial, cert_not_after, last_seen)
     SELECT format('fleet-%s', lpad(i::text, 5, '0')), 'online', format('fleet-%s.example.org', i),
            to_hex(1000000 + i), now() + (i % 90) * interval '1 day', now() - (i % 500) * interval '1 minute'
       FROM generate_series(1, 10000) i`,
    );
    const h = harness(db);
    await withListener(h, async (listener) => {
      // The yardstick: rendering the whole scrape in one piece on this thread (best of three, warm), its labels
      // formatted per sample (the per-node families keep theirs rendered between scrapes, which no chunking
      // of the rest could match).
      const families = (await collectDatabaseFamilies(db, h.ctx.log)).map((f) => ({
        ...f,
        samples: f.samples.map((s) => ({ ...s, labelText: undefined })),
      }));
      const renderMs = Math.min(...[0, 1, 2].map(() => cpuTime(() => render(families, "text"))));
      const out = await Deno.makeTempFile({ prefix: "svc-scrape-" });
      try {
        for (const accept of ["text/plain", OM_ACCEPT_PROMETHEUS_2]) {
          const { passed, stalls } = await leastStall({
            // The scraper is its own process (curl, asking for gzip as Prometheus does): a client in this
            // process would spend this thread's time receiving 1.8 MB, counted as the server's stall.
            step: async () => {
              const args = ["-sS", "--compressed", "-H", `accept: ${accept}`, "-o", out];
              const curl = await new Deno.Command("curl", {
                args: [...args, `http://${listener.addr}/metrics`],
              })
                .output();
              assert.equal(curl.code, 0, new TextDecoder().decode(curl.stderr));
            },
            boundMs: renderMs / 2,
          });
          const bound = `bound ${(renderMs / 2).toFixed(0)} ms`;
          assert.ok(
            passed,
            `${accept}: worst stalls ${stalls}; ${bound} = half of rendering it in one piece on this thread`,
          );
          const lines = (await Deno.readTextFile(out)).split("\n");
          assert.equal(lines.filter((l) => l.startsWith("svc_node_last_seen_seconds{")).length, 10_000);
          assert.ok(
            lines.some((l) => l.startsWith('svc_node_certificate_expiry_seconds{node="fleet-10000",')),
          );
          if (accept !== "text/plain") assert.equal(lines.at(-2), "# EOF");
        }
      } finally {
        await Deno.remove(out);
      }
    });
  },
  { drivers: ["postgres"] },
);
