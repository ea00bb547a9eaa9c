/**
 * Issue 22's smaller pieces: `server.policy_workers` resolution, the merge of policy workers' metrics into one
 * scrape, and the per-action audit counts the metrics gauge reads instead of counting the audit log.
 */
import assert from "node:assert/strict";
import { ConfigError, resolveConfig } from "../../server/config/config.ts";
import { mergeWorkerFamilies } from "../../server/metrics/workers.ts";
import type { MetricFamily } from "../../server/metrics/exposition.ts";
import { collectDatabaseFamilies } from "../../server/metrics/collector.ts";
import { createLogger } from "../../server/core/log.ts";
import { dbTest } from "../helpers/db.ts";
import type { Db } from "../../server/db/db.ts";

const PG = "postgres://svc@db.example/svc";

Deno.test("server.policy_workers: one per CPU on PostgreSQL, 1 embedded, more than 1 embedded refused", () => {
  assert.equal(resolveConfig({}, {}).server.policyWorkers, 1);
  assert.equal(resolveConfig({ "server.policy_workers": 1 }, {}).server.policyWorkers, 1);
  assert.equal(
    resolveConfig({ "database.url": PG }, {}).server.policyWorkers,
    Math.max(1, navigator.hardwareConcurrency),
  );
  assert.equal(resolveConfig({ "database.url": PG, "server.policy_workers": 3 }, {}).server.policyWorkers, 3);
  assert.equal(
    resolveConfig({ "database.url": PG }, { SVC_SERVER_POLICY_WORKERS: "2" }).server.policyWorkers,
    2,
  );
  assert.throws(
    () => resolveConfig({ "server.policy_workers": 2 }, {}),
    (err: unknown) =>
      err instanceof ConfigError && /server\.policy_workers is 2/.test(err.message) &&
      /embedded database/.test(err.message) && /set server\.policy_workers to 1/.test(err.message),
  );
  assert.throws(() => resolveConfig({ "database.url": PG, "server.policy_workers": 257 }, {}), ConfigError);
  assert.throws(() => resolveConfig({ "database.url": PG, "server.policy_workers": -1 }, {}), ConfigError);
});

Deno.test("worker metrics: stream families come from the workers with a worker label; process_* gain theirs", () => {
  const gauge = (name: string, value: number): MetricFamily => ({
    name,
    help: name,
    type: "gauge",
    samples: [{ name, labels: {}, value }],
  });
  const histogram: MetricFamily = {
    name: "svc_policy_propagation_seconds",
    help: "h",
    type: "histogram",
    samples: [{ name: "svc_policy_propagation_seconds_bucket", labels: { le: "0.1" }, value: 0 }],
  };
  const own = [
    gauge("svc_nodes_total", 5),
    gauge("svc_policy_streams_open", 0),
    histogram,
    gauge("process_open_fds", 9),
  ];
  const merged = mergeWorkerFamilies(own, [
    {
      worker: "1",
      families: [
        gauge("svc_policy_streams_open", 3),
        gauge("process_open_fds", 20),
        gauge("svc_nodes_total", 99),
        {
          ...histogram,
          samples: [{ name: "svc_policy_propagation_seconds_bucket", labels: { le: "0.1" }, value: 4 }],
        },
      ],
    },
    { worker: "2", families: [gauge("svc_policy_streams_open", 7)] },
  ]);
  const byName = new Map(merged.map((f) => [f.name, f.samples.map((s) => [s.labels, s.value])]));
  assert.deepEqual(byName.get("svc_nodes_total"), [[{}, 5]], "database gauges are the main process's alone");
  assert.deepEqual(byName.get("svc_policy_streams_open"), [[{ worker: "1" }, 3], [{ worker: "2" }, 7]]);
  assert.deepEqual(byName.get("svc_policy_propagation_seconds"), [[{ worker: "1", le: "0.1" }, 4]]);
  assert.deepEqual(byName.get("process_open_fds"), [[{}, 9], [{ worker: "1" }, 20]]);
  assert.deepEqual(merged.map((f) => f.name), own.map((f) => f.name), "same families, same order");
});

async function auditGauge(db: Db): Promise<Record<string, number>> {
  const families = await collectDatabaseFamilies(db, createLogger("error"));
  const family = families.find((f) => f.name === "svc_audit_events_total");
  assert.ok(family, "svc_audit_events_total present");
  return Object.fromEntries(family.samples.map((s) => [s.labels.action, s.value]));
}

async function audit(db: Db, action: string, count: number): Promise<void> {
  await db.query(
    "INSERT INTO audit_logs (action, outcome) SELECT $1, 'success' FROM generate_series(1, $2::int)",
    [action, count],
  );
}

dbTest(
  "audit events gauge follows inserts, purges and truncation without counting the audit log",
  async (db) => {
    await db.query("TRUNCATE audit_logs");
    assert.deepEqual(await auditGauge(db), {});
    await audit(db, "policy.create", 3);
    await audit(db, "auth.login", 2);
    await db.transaction(async (tx) => {
      await tx.query("INSERT INTO audit_logs (action, outcome) VALUES ('policy.create', 'success')");
      await tx.query("INSERT INTO audit_logs (action, outcome) VALUES ('auth.login', 'failure')");
    });
    assert.deepEqual(await auditGauge(db), { "auth.login": 3, "policy.create": 4 });
    // Folded into one row per action by the scrape, and stable across scrapes.
    const [{ rows }] = await db.query<{ rows: number }>(
      "SELECT count(*)::int AS rows FROM audit_action_counts",
    );
    assert.equal(rows, 2);
    assert.deepEqual(await auditGauge(db), { "auth.login": 3, "policy.create": 4 });

    // A rolled-back insert counts nothing; a retention-style purge lowers the counts; an emptied action goes.
    await assert.rejects(db.transaction(async (tx) => {
      await tx.query("INSERT INTO audit_logs (action, outcome) VALUES ('policy.create', 'success')");
      throw new Error("roll back");
    }));
    await db.query("DELETE FROM audit_logs WHERE action = 'auth.login'");
    await db.query("DELETE FROM audit_logs WHERE id IN (SELECT id FROM audit_logs ORDER BY id LIMIT 1)");
    assert.deepEqual(await auditGauge(db), { "policy.create": 3 });
    const [{ truth }] = await db.query<{ truth: number }>("SELECT count(*)::int AS truth FROM audit_logs");
    assert.equal(truth, 3);

    await db.query("TRUNCATE audit_logs");
    assert.deepEqual(await auditGauge(db), {});
    await audit(db, "node.enroll", 1);
    assert.deepEqual(await auditGauge(db), { "node.enroll": 1 });
  },
);

dbTest("audit events gauge: concurrent scrapes folding at once keep the counts exact", async (db) => {
  await db.query("TRUNCATE audit_logs");
  for (let i = 0; i < 20; i++) await audit(db, i % 2 ? "a.one" : "a.two", 5);
  const results = await Promise.all(Array.from({ length: 6 }, async (_, i) => {
    if (i % 2) await audit(db, "a.three", 1);
    return await auditGauge(db);
  }));
  for (const r of results) {
    assert.equal(r["a.one"], 50);
    assert.equal(r["a.two"], 50);
  }
  assert.deepEqual(await auditGauge(db), { "a.one": 50, "a.three": 3, "a.two": 50 });
});
