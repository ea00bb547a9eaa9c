/**
 * Trends kept by the server (server/trends/, migrations/0020_trends.sql), on both drivers:
 *
 * - a sample puts the fleet's nodes by worst result and by connection into the hour's point, and the day's
 *   point is the day's latest sample; a second sample of the same hour reads nothing and writes nothing;
 * - several replicas sampling at once (PostgreSQL: separate connection pools) take exactly one sample;
 * - the sample's statements do not grow with the fleet (aggregates over the counters, not a query per node);
 * - points past `trends.hourly_retention_days` / `trends.daily_retention_days` are purged, and the keys are
 *   validated with errors that name them;
 * - `GET /api/v1/trends` returns the points of a range with each part only under its permission, and refuses
 *   ranges it cannot answer, naming the problem;
 * - a policy's rollout gets hourly points from its release, `GET /api/v1/policies/all/{id}/trends` returns
 *   those of the current version with where it stands now, and `GET /api/v1/policies/in-flight` lists recent
 *   releases whose nodes have not all applied them;
 * - `GET /api/v1/compliance/failing-settings` ranks the settings failing on most reached nodes, and the
 *   compliance list's `setting` filter lists exactly those nodes.
 */
import assert from "node:assert/strict";
import type { Db } from "../../server/db/db.ts";
import { openPostgres } from "../../server/db/mod.ts";
import { sampleTrends } from "../../server/trends/sampling.ts";
import { ConfigError, resolveConfig } from "../../server/config/config.ts";
import { dbTest } from "../helpers/db.ts";
import { expectStatus } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

const RETENTION = { hourlyRetentionDays: 14, dailyRetentionDays: 400 };

/** Sets a node's connection as the hub leaves it: status, and when it was last seen (null: never). */
async function connection(db: Db, id: string, status: string, seen: boolean): Promise<void> {
  await db.query("UPDATE nodes SET status = $2, last_seen = CASE WHEN $3 THEN now() END WHERE id = $1", [
    id,
    status,
    seen,
  ]);
}

/** Stores a node's latest result on a policy's current version, with its items. */
async function result(
  db: Db,
  nodeId: string,
  policyId: string,
  status: string,
  items: Array<{ key: string; status: string; schema_id?: string }> = [],
): Promise<void> {
  await db.query(
    `INSERT INTO compliance_results (node_id, policy_id, policy_version, status, items)
     SELECT $1, id, version, $3, $4::text::jsonb FROM policies WHERE id = $2
     ON CONFLICT (node_id, policy_id) DO UPDATE SET status = EXCLUDED.status, items = EXCLUDED.items,
       policy_version = EXCLUDED.policy_version`,
    [
      nodeId,
      policyId,
      status,
      JSON.stringify(
        items.map((i) => ({ schema_id: i.schema_id ?? "", key: i.key, status: i.status, message: "" })),
      ),
    ],
  );
}

/** The stored fleet points of one granularity, oldest first, as plain numbers. */
async function stored(db: Db, granularity: "hour" | "day") {
  return await db.query<Record<string, number | string>>(
    `SELECT to_char(bucket AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24') AS bucket, nodes, compliant, non_compliant,
            error, unknown, without_policies, online, degraded, offline, never_seen
       FROM fleet_trend_points WHERE granularity = $1 ORDER BY bucket`,
    [granularity],
  );
}

domain.domainTest(
  "a sample counts the fleet into the hour's point and the day's point, once per hour",
  async ({ db, server, admin }, t) => {
    const office = await domain.createGroup(admin, "office");
    const browser = await domain.createPolicy(admin, { name: "browser" });
    const screen = await domain.createPolicy(admin, { name: "screen", type: "Dconf" });
    for (const p of [browser, screen]) {
      await domain.setState(admin, p.id, "released");
      await domain.bind(admin, p.id, office, { enabled: true });
    }
    const nodes: Record<string, string> = {};
    for (
      const [name, status, seen, inOffice] of [
        ["a", "online", true, true],
        ["b", "degraded", true, true],
        ["c", "offline", true, true],
        ["d", "unknown", false, true],
        ["e", "offline", false, false],
      ] as const
    ) {
      nodes[name] = await domain.seedNode(db, { name, groups: inOffice ? [office] : [] });
      await connection(db, nodes[name], status, seen);
    }
    await result(db, nodes.a, browser.id, "compliant");
    await result(db, nodes.a, screen.id, "compliant");
    await result(db, nodes.b, browser.id, "error");
    await result(db, nodes.b, screen.id, "non_compliant");
    await result(db, nodes.c, browser.id, "non_compliant");
    await result(db, nodes.c, screen.id, "compliant");

    await t.step(
      "the hour's point: nodes by worst result and by connection; the day's point repeats it",
      async () => {
        const outcome = await sampleTrends(db, { ...RETENTION, at: new Date("2024-03-10T08:30:00Z") });
        assert.equal(outcome.sampled, true);
        assert.equal(outcome.bucket.toISOString(), "2024-03-10T08:00:00.000Z");
        const expected = {
          bucket: "2024-03-10T08",
          nodes: 5,
          compliant: 1,
          non_compliant: 1,
          error: 1,
          unknown: 1,
          without_policies: 1,
          online: 1,
          degraded: 1,
          offline: 1,
          never_seen: 2,
        };
        assert.deepEqual(await stored(db, "hour"), [expected]);
        assert.deepEqual(await stored(db, "day"), [{ ...expected, bucket: "2024-03-10T00" }]);
      },
    );

    await t.step("the same hour again reads and writes nothing", async () => {
      const counted = domain.countingDb(db, { outside: true });
      const again = await sampleTrends(counted.db, { ...RETENTION, at: new Date("2024-03-10T08:59:00Z") });
      assert.equal(again.sampled, false);
      assert.equal(counted.count(), 1, "one primary-key lookup answers that the hour is taken");
      assert.equal((await stored(db, "hour")).length, 1);
    });

    await t.step(
      "a later hour replaces the day's point; a late sample of an earlier hour does not",
      async () => {
        await result(db, nodes.c, browser.id, "compliant");
        assert.equal(
          (await sampleTrends(db, { ...RETENTION, at: new Date("2024-03-10T09:05:00Z") })).sampled,
          true,
        );
        assert.equal(
          (await sampleTrends(db, { ...RETENTION, at: new Date("2024-03-10T07:10:00Z") })).sampled,
          true,
        );
        const hours = await stored(db, "hour");
        assert.deepEqual(hours.map((h) => h.bucket), ["2024-03-10T07", "2024-03-10T08", "2024-03-10T09"]);
        const [day] = await stored(db, "day");
        assert.equal(day.compliant, 2, "the day holds the 09:05 sample, the latest of the day");
        assert.equal(day.non_compliant, 0);
      },
    );

    await t.step(
      "GET /api/v1/trends: the points of the range, each part under its permission",
      async () => {
        const hourly = expectStatus(
          await admin.request(
            "GET",
            "/api/v1/trends?granularity=hour&from=2024-03-10T08:00:00Z&to=2024-03-11T00:00:00Z",
          ),
          200,
        );
        assert.equal(hourly.granularity, "hour");
        assert.deepEqual(hourly.points.map((p: { bucket: string }) => p.bucket), [
          "2024-03-10T08:00:00.000Z",
          "2024-03-10T09:00:00.000Z",
        ]);
        assert.deepEqual(hourly.points[0].compliance, {
          reached: 4,
          compliant: 1,
          non_compliant: 1,
          error: 1,
          unknown: 1,
          without_policies: 1,
          percent_compliant: 25,
        });
        assert.deepEqual(hourly.points[0].nodes, {
          total: 5,
          online: 1,
          degraded: 1,
          offline: 1,
          never_seen: 2,
        });
        assert.equal(hourly.points[1].compliance.percent_compliant, 50);
        const daily = expectStatus(
          await admin.request(
            "GET",
            "/api/v1/trends?granularity=day&from=2024-03-01T00:00:00Z&to=2024-04-01T00:00:00Z",
          ),
          200,
        );
        assert.deepEqual(daily.points.map((p: { bucket: string }) => p.bucket), [
          "2024-03-10T00:00:00.000Z",
        ]);

        const nodeViewer = await server.loginAs({ permissions: ["node:view"] });
        const seen = expectStatus(
          await nodeViewer.request(
            "GET",
            "/api/v1/trends?from=2024-03-10T00:00:00Z&to=2024-03-11T00:00:00Z",
          ),
          200,
        );
        assert.equal(seen.points.length, 3);
        assert.ok(
          seen.points.every((p: object) => "nodes" in p && !("compliance" in p)),
          JSON.stringify(seen),
        );
        const complianceViewer = await server.loginAs({ permissions: ["compliance:view"] });
        const other = expectStatus(
          await complianceViewer.request(
            "GET",
            "/api/v1/trends?from=2024-03-10T00:00:00Z&to=2024-03-11T00:00:00Z",
          ),
          200,
        );
        assert.ok(
          other.points.every((p: object) => "compliance" in p && !("nodes" in p)),
          JSON.stringify(other),
        );
      },
    );

    await t.step("ranges it cannot answer are refused, naming the problem", async () => {
      const refused = async (query: string, pattern: RegExp) => {
        const body = expectStatus(await admin.request("GET", `/api/v1/trends?${query}`), 400);
        assert.match(body.error.message, pattern, query);
      };
      await refused("from=2024-03-11T00:00:00Z&to=2024-03-10T00:00:00Z", /from .* must be before to/);
      await refused(
        "from=2024-01-01T00:00:00Z&to=2024-03-10T00:00:00Z",
        /spans 1656 hours.*granularity=day/,
      );
      await refused("from=yesterday", /from: "yesterday" is not a date or time/);
      await refused("granularity=minute", /granularity/);
      await refused(
        "from=1990-01-01T00:00:00Z&to=2024-03-10T00:00:00Z&granularity=day",
        /narrow the range/,
      );
    });

    await t.step("points past their retention are purged by the next sample", async () => {
      await sampleTrends(db, {
        hourlyRetentionDays: 14,
        dailyRetentionDays: 15,
        at: new Date("2024-03-24T10:00:00Z"),
      });
      assert.deepEqual((await stored(db, "hour")).map((h) => h.bucket), ["2024-03-24T10"]);
      assert.deepEqual((await stored(db, "day")).map((h) => h.bucket), ["2024-03-10T00", "2024-03-24T00"]);
      await sampleTrends(db, {
        hourlyRetentionDays: 14,
        dailyRetentionDays: 15,
        at: new Date("2024-03-26T10:00:00Z"),
      });
      assert.deepEqual((await stored(db, "day")).map((h) => h.bucket), ["2024-03-24T00", "2024-03-26T00"]);
    });
  },
);

domain.domainTest(
  "a sample costs the same number of statements at 3 nodes and at 60",
  async ({ db, admin }) => {
    const office = await domain.createGroup(admin, "office");
    const policy = await domain.createPolicy(admin, { name: "browser" });
    await domain.setState(admin, policy.id, "released");
    await domain.bind(admin, policy.id, office, { enabled: true });
    const cost = async (at: string) => {
      const counted = domain.countingDb(db, { outside: true });
      assert.equal((await sampleTrends(counted.db, { ...RETENTION, at: new Date(at) })).sampled, true);
      return counted.count();
    };
    for (let i = 0; i < 3; i++) await domain.seedNode(db, { name: `small-${i}`, groups: [office] });
    const small = await cost(new Date(Date.now() + 60_000).toISOString());
    for (let i = 0; i < 57; i++) {
      const id = await domain.seedNode(db, { name: `large-${i}`, groups: [office] });
      await result(db, id, policy.id, i % 2 ? "compliant" : "error");
    }
    const large = await cost(new Date(Date.now() + 3_660_000).toISOString());
    assert.equal(large, small, `statements at 60 nodes (${large}) vs 3 (${small})`);
    const [point] = await db.query<{ rollouts: number }>(
      "SELECT count(*)::int AS rollouts FROM policy_trend_points",
    );
    assert.equal(point.rollouts, 2, "the recent release got a point in each hour");
  },
);

dbTest("replicas sampling at the same moment take exactly one sample", async (db, _t, info) => {
  // Each replica has its own connection pool on PostgreSQL; on PGlite the one database is shared.
  const replicas = info.driver === "postgres"
    ? await Promise.all([openPostgres(info.url, { max: 4 }), openPostgres(info.url, { max: 4 })])
    : [db, db];
  try {
    await domain.seedNode(db, { name: "solo" });
    const at = new Date("2024-05-01T12:00:30Z");
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, (_, i) => sampleTrends(replicas[i % 2], { ...RETENTION, at })),
    );
    assert.equal(outcomes.filter((o) => o.sampled).length, 1, JSON.stringify(outcomes));
    assert.equal((await stored(db, "hour")).length, 1);
    assert.equal((await stored(db, "day")).length, 1);
  } finally {
    if (info.driver === "postgres") { for (const r of replicas) await r.close(); }
  }
});

domain.domainTest(
  "a rollout's hourly points, where it stands now, and the releases in flight",
  async ({ db, server, admin }, t) => {
    const office = await domain.createGroup(admin, "office");
    const policy = await domain.createPolicy(admin, { name: "browser" });
    const ids: string[] = [];
    for (const name of ["a", "b", "c"]) ids.push(await domain.seedNode(db, { name, groups: [office] }));
    const trend = async () =>
      expectStatus(await admin.request("GET", `/api/v1/policies/all/${policy.id}/trends`), 200);
    const inFlight = async (hours?: number) =>
      expectStatus(
        await admin.request("GET", `/api/v1/policies/in-flight${hours ? `?hours=${hours}` : ""}`),
        200,
      );

    await t.step("a draft has no rollout", async () => {
      const before = await trend();
      assert.equal(before.started_at, null);
      assert.deepEqual(before.points, []);
      assert.deepEqual(await inFlight(), []);
    });

    await domain.setState(admin, policy.id, "released");
    await domain.bind(admin, policy.id, office, { enabled: true });
    const first = new Date(Date.now() + 60_000);
    await t.step("every hour of the rollout gets a point of its reached nodes by state", async () => {
      await sampleTrends(db, { ...RETENTION, at: first });
      await result(db, ids[0], policy.id, "compliant");
      await result(db, ids[1], policy.id, "error");
      await sampleTrends(db, { ...RETENTION, at: new Date(first.getTime() + 3_600_000) });
      const now = await trend();
      assert.equal(now.version, policy.version);
      assert.ok(now.started_at, "released: the rollout has a start");
      const counts = now.points.map((
        p: Record<string, number>,
      ) => [p.reached, p.pending, p.compliant, p.error]);
      assert.deepEqual(counts, [[3, 3, 0, 0], [3, 1, 1, 1]]);
      assert.deepEqual(now.current, {
        pending: 1,
        error: 1,
        non_compliant: 0,
        compliant: 1,
        inapplicable: 0,
        total: 3,
      });
    });

    await t.step("a release is in flight while its reached nodes have not all applied it", async () => {
      const [release] = await inFlight();
      assert.equal(release.policy_id, policy.id);
      assert.equal(release.policy_name, "browser");
      assert.equal(release.version, policy.version);
      assert.equal(release.counts.compliant, 1);
      await result(db, ids[1], policy.id, "compliant");
      await result(db, ids[2], policy.id, "inapplicable");
      assert.deepEqual(await inFlight(), [], "every reached node applied it (or it does not apply)");
    });

    await t.step(
      "a new version starts a new rollout; releases older than the window are not in flight",
      async () => {
        await db.query("UPDATE policies SET version = version + 1 WHERE id = $1", [policy.id]);
        const next = await trend();
        assert.equal(next.version, policy.version + 1);
        assert.deepEqual(next.points, [], "the previous version's points are not this rollout's");
        assert.equal(next.current.pending, 3);
        assert.equal((await inFlight())[0]?.version, policy.version + 1);
        await db.query("UPDATE policy_rollouts SET started_at = now() - interval '100 hours'");
        assert.deepEqual(await inFlight(), []);
        assert.equal((await inFlight(200)).length, 1);
        expectStatus(await admin.request("GET", "/api/v1/policies/in-flight?hours=721"), 400);
      },
    );

    await t.step("both routes need compliance:view", async () => {
      const nodeViewer = await server.loginAs({ permissions: ["node:view"] });
      expectStatus(await nodeViewer.request("GET", `/api/v1/policies/all/${policy.id}/trends`), 403);
      expectStatus(await nodeViewer.request("GET", "/api/v1/policies/in-flight"), 403);
      expectStatus(
        await admin.request("GET", "/api/v1/policies/all/00000000-0000-4000-8000-000000000000/trends"),
        404,
      );
    });
  },
);

domain.domainTest(
  "the settings failing on most nodes, each landing on the compliance list of exactly those nodes",
  async ({ db, admin }) => {
    const office = await domain.createGroup(admin, "office");
    const browser = await domain.createPolicy(admin, { name: "browser" });
    const screen = await domain.createPolicy(admin, { name: "screen", type: "Dconf" });
    for (const p of [browser, screen]) {
      await domain.setState(admin, p.id, "released");
      await domain.bind(admin, p.id, office, { enabled: true });
    }
    const [a, b, c] = [
      await domain.seedNode(db, { name: "a", groups: [office] }),
      await domain.seedNode(db, { name: "b", groups: [office] }),
      await domain.seedNode(db, { name: "c", groups: [office] }),
    ];
    const outside = await domain.seedNode(db, { name: "outside" });
    await result(db, a, browser.id, "error", [
      { key: "DisableTelemetry", status: "error" },
      { key: "Homepage", status: "compliant" },
    ]);
    await result(db, b, browser.id, "non_compliant", [
      { key: "DisableTelemetry", status: "non_compliant" },
      { key: "Proxy", status: "non_compliant" },
    ]);
    await result(db, c, browser.id, "non_compliant", [{ key: "Proxy", status: "non_compliant" }]);
    const lockDelay = { schema_id: "org.gnome.desktop.screensaver", key: "lock-delay" };
    await result(db, a, screen.id, "error", [{ ...lockDelay, status: "error" }]);
    // A result of a policy that no longer reaches the node describes nothing it is asked to do.
    await result(db, outside, browser.id, "error", [{ key: "Proxy", status: "error" }]);

    const top = expectStatus(await admin.request("GET", "/api/v1/compliance/failing-settings"), 200);
    assert.deepEqual(
      top.map((
        s: Record<string, unknown>,
      ) => [s.policy_name, s.schema_id, s.key, s.nodes, s.error, s.non_compliant]),
      [
        ["browser", "", "DisableTelemetry", 2, 1, 1],
        ["browser", "", "Proxy", 2, 0, 2],
        ["screen", lockDelay.schema_id, "lock-delay", 1, 1, 0],
      ],
    );
    assert.equal(
      expectStatus(await admin.request("GET", "/api/v1/compliance/failing-settings?limit=1"), 200).length,
      1,
    );

    const listed = async (query: string) => {
      const page = expectStatus(
        await admin.request("GET", `/api/v1/compliance?include_unreported=true&${query}`),
        200,
      );
      return page.items.map((r: { node_name: string }) => r.node_name).sort();
    };
    assert.deepEqual(await listed(`policy_id=${browser.id}&setting=DisableTelemetry`), ["a", "b"]);
    assert.deepEqual(await listed(`policy_id=${browser.id}&setting=Proxy`), ["b", "c"]);
    assert.deepEqual(
      await listed(`setting=lock-delay&setting_schema=${lockDelay.schema_id}`),
      ["a"],
    );
    assert.deepEqual(await listed("setting=lock-delay"), [], "a dconf key is named with its schema");
    const refused = expectStatus(await admin.request("GET", "/api/v1/compliance?setting_schema=x"), 400);
    assert.match(refused.error.message, /setting_schema .* give the setting key too/);
  },
);

Deno.test("trend retention keys are validated, naming the key and the fix", () => {
  assert.deepEqual(resolveConfig({}, {}).trends, { hourlyRetentionDays: 14, dailyRetentionDays: 400 });
  assert.deepEqual(
    resolveConfig({ "trends.hourly_retention_days": 30 }, { SVC_TRENDS_DAILY_RETENTION_DAYS: "730" }).trends,
    { hourlyRetentionDays: 30, dailyRetentionDays: 730 },
  );
  assert.throws(
    () => resolveConfig({ "trends.daily_retention_days": 7 }, {}),
    (err: Error) =>
      err instanceof ConfigError &&
      /trends\.daily_retention_days \(7\) is shorter than trends\.hourly_retention_days \(14\).*raise trends\.daily_retention_days/
        .test(err.message),
  );
  assert.throws(
    () => resolveConfig({ "trends.hourly_retention_days": 0 }, {}),
    /trends\.hourly_retention_days: 0 is below the minimum 1/,
  );
  assert.throws(
    () => resolveConfig({}, { SVC_TRENDS_HOURLY_RETENTION_DAYS: "two weeks" }),
    /SVC_TRENDS_HOURLY_RETENTION_DAYS: "two weeks" is not a whole number/,
  );
});
