/**
 * Trends in the console (issue 33), in a real browser (Debian's Chromium) against an in-process server whose
 * database holds hourly and daily samples taken by the server's own sampler:
 *
 * - the dashboard draws the share of nodes compliant, nodes by worst result and nodes by connection as SVG
 *   charts whose lines break where an hour was not sampled; each chart's data table is reached and opened
 *   from the keyboard and holds every point; "Last 90 days" switches to the daily points;
 * - the settings failing on most nodes are in "Needs attention", each a link to the compliance list of
 *   exactly the nodes where it fails;
 * - the policy page draws the rollout over time (its hourly points, then now);
 * - a release in flight is a progress bar that moves when nodes report (a live hint, polling off) and leaves
 *   once every reached node applied it;
 * - text keeps 4.5:1 and chart lines and bar segments 3:1 against their background in the light and the dark
 *   theme (computed colours), and axe-core finds nothing at all on any of these screens.
 *
 * Screenshots go to `test-artifacts/trends/`.
 */
import assert from "node:assert/strict";
import type { Page } from "puppeteer-core";
import { resolveConfig } from "../../server/config/config.ts";
import { startServer } from "../../server/server.ts";
import { createLogger } from "../../server/core/log.ts";
import type { Db } from "../../server/db/db.ts";
import { sampleTrends } from "../../server/trends/sampling.ts";
import { publishLiveHint } from "../../server/events/publish.ts";
import { localServerSettings } from "../helpers/process.ts";
import { freshDb } from "../helpers/db.ts";
import { axeViolations, haveChromium, launchChromium } from "../helpers/browser.ts";
import { openConsoleLoggedIn } from "../helpers/console_login.ts";
import { contrastOf, graphicContrastOf } from "../helpers/contrast.ts";

const ADMIN_PASSWORD = "Admin-Passw0rd-for-trends-tests";
const SHOTS = new URL("../../test-artifacts/trends/", import.meta.url);
const HOUR = 3_600_000;
const RETENTION = { hourlyRetentionDays: 14, dailyRetentionDays: 400 };
if (!haveChromium) console.log("skipped: the trends browser test needs Debian's chromium");

// deno-lint-ignore no-explicit-any
declare const document: any;
// deno-lint-ignore no-explicit-any
declare const localStorage: any;
// deno-lint-ignore no-explicit-any
type El = any;

/** The latest result of a node on the policy's current version, with its one item. */
async function report(db: Db, node: string, policy: string, status: string): Promise<void> {
  await db.query(
    `INSERT INTO compliance_results (node_id, policy_id, policy_version, status, items)
     SELECT $1, id, version, $3,
            jsonb_build_array(jsonb_build_object('schema_id', '', 'key', 'DisableTelemetry', 'status', $3::text,
              'message', ''))
       FROM policies WHERE id = $2
     ON CONFLICT (node_id, policy_id) DO UPDATE SET status = EXCLUDED.status, items = EXCLUDED.items`,
    [node, policy, status],
  );
}

/**
 * A released Firefox policy bound to four nodes, released six hours ago; samples three days and two days ago,
 * then five, four, three and one hour ago (none two hours ago: a gap), the results changing in between.
 */
async function seed(db: Db): Promise<{ policy: string; nodes: string[] }> {
  const [group] = await db.query<{ id: string }>(
    "INSERT INTO node_groups (name) VALUES ('office') RETURNING id",
  );
  const [policy] = await db.query<{ id: string }>(
    `INSERT INTO policies (name, type, content, state)
     VALUES ('Browser hardening', 'Firefox', '{"DisableTelemetry":true}', 'released') RETURNING id`,
  );
  await db.query("INSERT INTO policy_bindings (policy_id, node_group_id, state) VALUES ($1, $2, 'enabled')", [
    policy.id,
    group.id,
  ]);
  const nodes: string[] = [];
  for (const [name, seen] of [["pc-1", true], ["pc-2", true], ["pc-3", false], ["pc-4", false]] as const) {
    // Seeded nodes have no policy stream: only statuses the hub leaves alone (offline, unknown).
    const [node] = await db.query<{ id: string }>(
      `INSERT INTO nodes (name, status, last_seen) VALUES ($1, $2, CASE WHEN $3 THEN now() END) RETURNING id`,
      [name, seen ? "offline" : "unknown", seen],
    );
    await db.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [
      node.id,
      group.id,
    ]);
    nodes.push(node.id);
  }
  await db.query("UPDATE policy_rollouts SET started_at = now() - interval '6 hours'");
  const now = Date.now();
  const sample = (ago: number) => sampleTrends(db, { ...RETENTION, at: new Date(now - ago) });
  await sample(72 * HOUR);
  await sample(48 * HOUR);
  await sample(5 * HOUR);
  await report(db, nodes[0], policy.id, "compliant");
  await sample(4 * HOUR);
  await report(db, nodes[1], policy.id, "error");
  await sample(3 * HOUR);
  await sample(1 * HOUR);
  return { policy: policy.id, nodes };
}

/** The rows of a chart's data table (newest first), as cell texts. */
async function tableRows(page: Page, chart: string): Promise<string[][]> {
  return await page.$eval(
    `svc-time-chart[chart-title="${chart}"] .chart-data table`,
    (table: El) =>
      [...table.querySelectorAll("tbody tr")].map((tr: El) =>
        [...tr.children].map((c: El) => c.textContent.trim())
      ),
  );
}

/** Text under 4.5:1 and graphics under 3:1 under `root`, in the current theme. */
async function poorContrast(page: Page, root: string, graphics: string): Promise<unknown[]> {
  const texts = await contrastOf(page, root);
  assert.ok(texts.length > 3, `text measured under ${root}`);
  const shapes = await graphicContrastOf(page, graphics);
  assert.ok(shapes.length > 0, `graphics measured: ${graphics}`);
  return [...texts.filter((t) => !(t.ratio >= 4.5)), ...shapes.filter((s) => !(s.ratio >= 3))];
}

Deno.test({
  name: "trends: charts with data tables, failing settings, the rollout over time and live release progress",
  ignore: !haveChromium,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const dataDir = await Deno.makeTempDir({ prefix: "svc-trends-ui-" });
    const config = resolveConfig(
      localServerSettings(dataDir, {
        "security.admin_password": ADMIN_PASSWORD,
        "security.jwt_secret": "trends-ui-test-jwt-secret-0123456789abcdef012345",
      }),
      {},
    );
    const database = await freshDb("pglite");
    const db = database.db;
    // Seeded before the server starts, so the sampler's own sample of this hour sees the same fleet.
    const { policy, nodes } = await seed(db);
    const server = await startServer(config, { db, log: createLogger("warn") });
    const chromium = await launchChromium();
    try {
      const deadline = Date.now() + 120_000;
      while ((await db.query("SELECT 1 FROM fleet_trend_points WHERE granularity = 'hour'")).length < 5) {
        assert.ok(Date.now() < deadline, "the server's sampler took this hour's sample");
        await new Promise((r) => setTimeout(r, 200));
      }
      const base = `https://localhost:${server.ports.web}`;
      const page = await chromium.browser.newPage();
      page.setDefaultTimeout(120_000);
      await page.setViewport({ width: 1440, height: 900 });
      await openConsoleLoggedIn(page, base, { username: "admin", password: ADMIN_PASSWORD });
      await Deno.mkdir(SHOTS, { recursive: true });
      const share = 'svc-time-chart[chart-title="Share of nodes compliant"]';

      await t.step("the dashboard draws the trends, breaking lines where an hour is missing", async () => {
        await page.waitForSelector(`${share} svg.time-plot`);
        // Five hourly points (5, 4, 3 and 1 hour ago, and this hour's): two runs around the gap.
        assert.equal(await page.$$eval(`${share} polyline.series-line`, (ls: El[]) => ls.length), 2);
        const label = await page.$eval(`${share} svg.time-plot`, (s: El) => s.getAttribute("aria-label"));
        assert.match(label, /^Share of nodes compliant, from .* to .*\. Latest \(.*\): Compliant 25%$/);
        for (const title of ["Nodes by worst result", "Nodes by connection"]) {
          assert.ok(await page.$(`svc-time-chart[chart-title="${title}"] polygon.series-area`), title);
        }
        const legend = await page.$eval(
          'svc-time-chart[chart-title="Nodes by connection"] .time-legend',
          (l: El) => l.textContent.replace(/\s+/g, " ").trim(),
        );
        assert.match(legend, /Offline 2 .*Never seen 2/);
      });

      await t.step("a chart's data table is reached and opened from the keyboard", async () => {
        const summary = `${share} details.chart-data summary`;
        let reached = false;
        for (let i = 0; i < 200 && !reached; i++) {
          await page.keyboard.press("Tab");
          reached = await page.$eval(summary, (s: El) => s === document.activeElement);
        }
        assert.ok(reached, "Tab reaches the data table's disclosure");
        await page.keyboard.press("Enter");
        await page.waitForSelector(`${share} details.chart-data[open] table`, { visible: true });
        const table = await page.$eval(`${share} details.chart-data table`, (tb: El) => ({
          caption: tb.querySelector("caption").textContent.trim(),
          heads: [...tb.querySelectorAll("thead th")].map((th: El) => [th.textContent.trim(), th.scope]),
          rowHeads: [...tb.querySelectorAll("tbody th")].map((th: El) => th.scope),
        }));
        assert.equal(table.caption, "Share of nodes compliant");
        assert.deepEqual(table.heads, [["Time", "col"], ["Compliant", "col"]]);
        assert.deepEqual(table.rowHeads, ["row", "row", "row", "row", "row"]);
        assert.deepEqual((await tableRows(page, "Share of nodes compliant")).map((r) => r[1]), [
          "25%",
          "25%",
          "25%",
          "25%",
          "0%",
        ]);
        const worst = await tableRows(page, "Nodes by worst result");
        assert.deepEqual(
          worst.at(-1)!.slice(1),
          ["0", "4", "0", "0"],
          "5 hours ago: all four not reported yet",
        );
        assert.deepEqual(worst[0].slice(1), ["1", "2", "0", "1"], "now: compliant, not reported, error");
        await page.screenshot({ path: new URL("dashboard-light.png", SHOTS).pathname, fullPage: true });
        assert.deepEqual(await axeViolations(page), [], "axe on the dashboard with a data table open");
      });

      await t.step("text, lines and bars are readable in the light and the dark theme", async () => {
        for (const theme of ["light", "dark"]) {
          await page.evaluate((th: string) => localStorage.setItem("svc-theme", th), theme);
          await page.reload({ waitUntil: "domcontentloaded" });
          await page.waitForSelector(`${share} svg.time-plot`);
          await page.waitForSelector("svc-release-progress .release-bar");
          assert.deepEqual(
            await poorContrast(
              page,
              "svc-fleet-trends",
              "svc-fleet-trends .series-line, svc-fleet-trends .series-point",
            ),
            [],
            `trends in the ${theme} theme`,
          );
          assert.deepEqual(
            await poorContrast(page, "svc-release-progress", "svc-release-progress .release-segment"),
            [],
            `releases in flight in the ${theme} theme`,
          );
          await page.screenshot({ path: new URL(`dashboard-${theme}.png`, SHOTS).pathname, fullPage: true });
          assert.deepEqual(await axeViolations(page), [], `axe on the dashboard (${theme})`);
        }
        await page.evaluate(() => localStorage.setItem("svc-theme", "light"));
        await page.reload({ waitUntil: "domcontentloaded" });
      });

      await t.step("'Last 90 days' shows the daily points", async () => {
        await page.waitForSelector(`${share} svg.time-plot`);
        await page.click('svc-fleet-trends sl-radio-button[value="days"]');
        await page.waitForFunction(
          (s: string) => document.querySelector(s)?.stepMs === 86_400_000,
          { polling: 250 },
          share,
        );
        const days = await db.query("SELECT 1 FROM fleet_trend_points WHERE granularity = 'day'");
        await page.waitForFunction(
          (s: string, n: number) => document.querySelectorAll(`${s} .chart-data tbody tr`).length === n,
          { polling: 250 },
          share,
          days.length,
        );
        assert.ok(days.length >= 3, "three days or more were sampled");
      });

      await t.step("the failing setting needs attention and lands on the nodes where it fails", async () => {
        const link = await page.waitForSelector("svc-dashboard-page .attention-list li.failing-setting a");
        const { href, text } = await link!.evaluate((a: El) => ({
          href: a.getAttribute("href"),
          text: a.textContent.replace(/\s+/g, " ").trim(),
        }));
        assert.equal(href, `/compliance?policy_id=${policy}&setting=DisableTelemetry`);
        assert.match(text, /^Setting Turn off telemetry of Browser hardening fails on 1 node$/);
        await link!.click();
        await page.waitForFunction(() => {
          const rows = document.querySelectorAll("svc-compliance-page table tbody tr");
          return rows.length === 1 && rows[0].textContent.includes("pc-2");
        }, { polling: 250 });
        assert.deepEqual(await axeViolations(page), [], "axe on the filtered compliance list");
      });

      await t.step("the policy page draws the rollout over time", async () => {
        await page.goto(`${base}/policies/${policy}/edit`, { waitUntil: "domcontentloaded" });
        const chart = 'svc-rollout-trend svc-time-chart[chart-title^="Rollout of version"]';
        // Beside the rollout panel, not in it: the panel's table of nodes stays the only table there.
        await page.waitForSelector("svc-policy-rollout tbody tr");
        assert.equal(await page.$("svc-policy-rollout svc-rollout-trend"), null);
        await page.waitForSelector(`${chart} svg.time-plot`);
        await page.click(`${chart} details.chart-data summary`);
        const rows = await tableRows(page, await page.$eval(chart, (c: El) => c.chartTitle));
        // Hourly points 5, 4, 3 and 1 hour ago and this hour's, then now: applied, inapplicable, pending,
        // non-compliant, error.
        assert.equal(rows.length, 6, JSON.stringify(rows));
        assert.deepEqual(rows.at(-1)!.slice(1), ["0", "0", "4", "0", "0"]);
        assert.deepEqual(rows[0].slice(1), ["1", "0", "2", "0", "1"]);
        await page.screenshot({ path: new URL("policy-rollout.png", SHOTS).pathname, fullPage: true });
        assert.deepEqual(await axeViolations(page), [], "axe on the policy page");
      });

      await t.step(
        "a release in flight moves on a live hint and leaves once applied everywhere",
        async () => {
          await page.goto(`${base}/`, { waitUntil: "domcontentloaded" });
          const bar = `svc-release-progress li[data-policy="${policy}"] .release-bar`;
          await page.waitForSelector(bar);
          assert.equal(await page.$eval(bar, (b: El) => b.getAttribute("aria-valuenow")), "1");
          assert.equal(await page.$eval(bar, (b: El) => b.getAttribute("aria-valuemax")), "4");
          assert.match(
            await page.$eval(bar, (b: El) => b.getAttribute("aria-valuetext")),
            /^1 of 4 nodes applied: 1 applied, 1 error, 2 pending$/,
          );
          // Only the server's hint may refresh the page from here on.
          await page.waitForSelector("svc-dashboard-page .live-status");
          await page.evaluate(() => document.querySelector("svc-dashboard-page").autoRefreshMs = 1e12);
          await report(db, nodes[2], policy, "compliant");
          await report(db, nodes[3], policy, "compliant");
          await publishLiveHint(db, { topic: "compliance", ids: [nodes[2], nodes[3]] });
          await page.waitForFunction(
            (s: string) => document.querySelector(s)?.getAttribute("aria-valuenow") === "3",
            { polling: 250 },
            bar,
          );
          await report(db, nodes[1], policy, "compliant");
          await publishLiveHint(db, { topic: "compliance", ids: [nodes[1]] });
          await page.waitForSelector("svc-release-progress .releases-none");
          assert.equal(await page.$(bar), null);
        },
      );
    } finally {
      await chromium.close();
      await server.stop();
      await database.dispose();
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    }
  },
});
