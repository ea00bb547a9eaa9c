/**
 * The list pages in a real browser (Debian's Chromium, puppeteer-core) against an in-process server with a
 * seeded fleet:
 *
 * - every number of the dashboard links to a list whose total is that number (nodes by status and by
 *   certificate expiry, compliance by status, policies by state and type, bindings by state);
 * - on a phone (390×844) no list page is wider than the screen, the filters fold behind one "Filters" button
 *   that counts the active filters and opens them, and axe-core finds no serious or critical violation,
 *   folded or open;
 * - the users table shows each user's roles.
 *
 * Screenshots go to `test-artifacts/list-pages/`.
 */
import assert from "node:assert/strict";
import type { Page } from "puppeteer-core";
import { DRIVERS } from "../helpers/db.ts";
import type { Db } from "../../server/db/db.ts";
import { browserTestSkipped, screenshot, seriousAxeViolations } from "../helpers/browser.ts";
import { callApiOk as call, startConsoleServer, withConsole } from "../helpers/console_login.ts";

const DRIVER = DRIVERS[DRIVERS.length - 1];
const SKIP = browserTestSkipped("the list page browser test");

// Functions passed to page.evaluate run in the browser; the test is type-checked without the DOM library.
// deno-lint-ignore no-explicit-any
declare const document: any;
// deno-lint-ignore no-explicit-any
type El = any;
// deno-lint-ignore no-explicit-any
declare const getComputedStyle: any;

/** The total the list page shows once loaded: its pager's, or 0 for its empty state. */
async function listTotal(page: Page, tag: string): Promise<number> {
  const handle = await page.waitForFunction(
    (t: string) => {
      const host = document.querySelector(t);
      if (!host || host.loading || !host.loadedAt) return null;
      if (host.querySelector(".empty-state")) return { total: 0 };
      const pager = host.querySelector("svc-pager");
      return pager ? { total: pager.total } : null;
    },
    { timeout: 30_000 },
    tag,
  );
  return ((await handle.jsonValue()) as { total: number }).total;
}

const LIST_TAGS: Record<string, string> = {
  "/nodes": "svc-nodes-page",
  "/compliance": "svc-compliance-page",
  "/policies": "svc-policies-page",
  "/policy-bindings": "svc-policy-bindings-page",
};

/** Runs `fn` with a server on a fresh database and a console page logged in as the admin. */
async function withListConsole(fn: (page: Page, base: string, db: Db) => Promise<void>): Promise<void> {
  const server = await startConsoleServer({ database: DRIVER });
  await withConsole(
    server,
    { viewport: { width: 1280, height: 900 }, timeoutMs: 30_000, failureShot: "list-pages" },
    async ({ page }) => await fn(page, server.web, server.database!.db),
  );
}

Deno.test({
  name: `list pages: dashboard numbers land on their rows, phone layout, filters fold (${DRIVER})`,
  ignore: SKIP,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await withListConsole(async (page, base, db) => {
      // The fleet: two groups, policies in every state, one enabled binding, nodes of every status and
      // certificate bucket (some in the bound group, so compliance has pending pairs).
      const office = await call(page, "POST", "/api/v1/node-groups", { name: "office" });
      const lab = await call(page, "POST", "/api/v1/node-groups", { name: "lab" });
      const policy = async (name: string, type: string, content: unknown, state: string) => {
        const p = await call(page, "POST", "/api/v1/policies/all", {
          name,
          type,
          content: JSON.stringify(content),
        });
        if (state !== "draft") {
          await call(page, "PUT", `/api/v1/policies/all/${p.id}/state`, { state: "released" });
        }
        if (state === "archived") await call(page, "PUT", `/api/v1/policies/all/${p.id}/state`, { state });
        return p;
      };
      const firefox = await policy("Browser hardening", "Firefox", { DisableTelemetry: true }, "released");
      await policy("Firefox draft", "Firefox", { DisableTelemetry: false }, "draft");
      await policy("Chrome old", "Chrome", { HomepageLocation: "https://old.example" }, "archived");
      await policy("Chrome new", "Chrome", { HomepageLocation: "https://new.example" }, "released");
      const enabled = await call(page, "POST", "/api/v1/policy-bindings", {
        policy_id: firefox.id,
        node_group_id: office.id,
      });
      await call(page, "PUT", `/api/v1/policy-bindings/${enabled.id}`, { state: "enabled" });
      await call(page, "POST", "/api/v1/policy-bindings", { policy_id: firefox.id, node_group_id: lab.id });

      // Seeded nodes have no policy stream, so the hub would turn "online" or "degraded" into "offline"
      // at any moment (between reading the dashboard and its list); only statuses it leaves alone are used.
      const nodes: Array<[string, string, string | null, string]> = [
        ["n-later", "offline", "200 days", office.id],
        ["n-month", "unknown", "20 days", office.id],
        ["n-week", "offline", "5 days", office.id],
        ["n-expired", "offline", "-1 days", lab.id],
        ["n-none", "unknown", null, lab.id],
        ["n-quarter", "offline", "60 days", ""],
      ];
      for (const [name, status, expiry, group] of nodes) {
        const [row] = await db.query<{ id: string }>(
          `INSERT INTO nodes (name, status, os_name, cert_serial, cert_not_after)
           VALUES ($1, $2, 'Debian GNU/Linux', $3, now() + $4::interval) RETURNING id`,
          [name, status, expiry ? `${name}-serial` : null, expiry],
        );
        if (group) {
          await db.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [
            row.id,
            group,
          ]);
        }
      }

      // Every dashboard number, and the list its link opens.
      await page.goto(`${base}/`, { waitUntil: "load" });
      await page.waitForSelector("svc-dashboard-page svc-bar-chart");
      const numbers = await page.evaluate(() =>
        [...document.querySelectorAll("svc-dashboard-page .charts li a")].map((a: El) => ({
          href: a.getAttribute("href"),
          value: Number(a.closest("li").querySelector("strong").textContent),
        }))
      ) as Array<{ href: string; value: number }>;
      const kinds = new Set(numbers.map((n) => n.href.replace(/=.*/, "")));
      assert.deepEqual(
        [...kinds].sort(),
        [
          "/compliance?status",
          "/nodes?cert_expiry",
          "/nodes?status",
          "/policies?state",
          "/policies?type",
          "/policy-bindings?state",
        ],
        "every chart's numbers are links",
      );
      assert.ok(numbers.some((n) => n.value > 1), "the fleet is not trivially empty");
      for (const { href, value } of numbers) {
        await page.goto(`${base}${href}`, { waitUntil: "load" });
        const total = await listTotal(page, LIST_TAGS[href.replace(/\?.*/, "")]);
        assert.equal(total, value, `${href} lists ${total} rows; the dashboard says ${value}`);
      }

      // At desktop width the filters are open and the button is hidden.
      await page.goto(`${base}/nodes?status=offline&os=Debian%20GNU%2FLinux`, { waitUntil: "load" });
      await listTotal(page, "svc-nodes-page");
      assert.equal(
        await page.$eval("svc-nodes-page .list-filters .toolbar", (e: El) => e.checkVisibility()),
        true,
      );
      assert.equal(await page.$eval("svc-nodes-page .filters-toggle", (e: El) => e.checkVisibility()), false);

      // The users table shows roles.
      await page.goto(`${base}/settings?tab=users`, { waitUntil: "load" });
      await page.waitForFunction(() =>
        document.querySelector("svc-settings-users td.roles-cell")?.textContent.includes("Super Admin")
      );

      // A phone.
      await page.setViewport({ width: 390, height: 844 });
      const lists: Array<[string, string]> = [
        ["/nodes?status=offline&os=Debian%20GNU%2FLinux", "svc-nodes-page"],
        ["/node-groups", "svc-node-groups-page"],
        ["/policies", "svc-policies-page"],
        ["/policy-bindings", "svc-policy-bindings-page"],
        ["/compliance", "svc-compliance-page"],
        ["/audit-logs", "svc-audit-logs-page"],
        ["/settings?tab=users", "svc-settings-users"],
        ["/settings?tab=role-bindings", "svc-settings-role-bindings"],
      ];
      for (const [path, tag] of lists) {
        await page.goto(`${base}${path}`, { waitUntil: "load" });
        await page.waitForFunction(
          (t: string) => document.querySelector(`${t} table.data tbody tr, ${t} .empty-state`),
          {},
          tag,
        );
        const width = await page.evaluate(() => document.documentElement.scrollWidth);
        const wide = width <= 390 ? [] : await page.evaluate(() =>
          [...document.querySelectorAll("svc-app *")]
            // Inside a table's scrolling box is fine unless it escapes the box (absolutely positioned).
            .filter((e: El) =>
              e.getBoundingClientRect().right > 392 &&
              (!e.closest(".table-wrap") || getComputedStyle(e).position === "absolute")
            )
            .slice(0, 8)
            .map((e: El) => `${e.tagName.toLowerCase()}.${e.className}`)
        );
        assert.ok(width <= 390, `${path} is ${width} px wide at 390 px: ${wide.join(", ")}`);
        const toolbar = `${tag} .list-filters .toolbar`;
        const toggle = `${tag} .filters-toggle`;
        assert.equal(
          await page.$eval(toolbar, (e: El) => e.checkVisibility()),
          false,
          `${path}: filters folded`,
        );
        assert.equal(await page.$eval(toggle, (e: El) => e.getAttribute("aria-expanded")), "false");
        assert.deepEqual(await seriousAxeViolations(page), [], `axe on ${path}, filters folded`);
        const label = await page.$eval(toggle, (e: El) => e.textContent.replace(/\s+/g, " ").trim());
        assert.equal(label, path.startsWith("/nodes") ? "Filters 2 active" : "Filters", path);
        await page.click(toggle);
        await page.waitForFunction(
          (sel: string) => document.querySelector(sel).checkVisibility(),
          {},
          toolbar,
        );
        assert.equal(await page.$eval(toggle, (e: El) => e.getAttribute("aria-expanded")), "true");
        const openWidth = await page.evaluate(() => document.documentElement.scrollWidth);
        assert.ok(openWidth <= 390, `${path} with open filters is ${openWidth} px wide`);
        assert.deepEqual(await seriousAxeViolations(page), [], `axe on ${path}, filters open`);
        await screenshot(page, "list-pages", `phone${path.replace(/[/?=&%]+/g, "-")}`);
      }
    });
  },
});

Deno.test({
  name: `audit log console pages by cursor: next, previous, reload, no offsets (${DRIVER})`,
  ignore: SKIP,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await withListConsole(async (page, base, db) => {
      // 35 entries of one action, newest numbered highest; 10 per page is 4 pages.
      await db.query(
        `INSERT INTO audit_logs (created_at, username, action, resource_type, resource_name, outcome, details)
         SELECT now() - (100 - i) * interval '1 second', 'alice', 'paging.seed', 'policy', 'entry-' || i,
                'success', '{}'::jsonb
           FROM generate_series(1, 35) i`,
      );
      const asked: string[] = [];
      page.on("request", (r) => {
        if (r.url().includes("/api/v1/audit-logs")) asked.push(new URL(r.url()).search);
      });
      const rows = async (expectFirst: string) => {
        const handle = await page.waitForFunction(
          (first: string) => {
            const cells = [
              ...document.querySelectorAll("svc-audit-logs-page table.data tbody tr td:nth-child(4)"),
            ]
              .map((td: El) => td.textContent.replace(/\s+/g, " ").trim());
            return cells.length > 0 && cells[0].endsWith(first) ? cells : null;
          },
          {},
          expectFirst,
        );
        return (await handle.jsonValue()) as string[];
      };
      const pagerText = () =>
        page.$eval("svc-audit-logs-page svc-pager", (e: El) => e.textContent.replace(/\s+/g, " ").trim());
      const click = (label: string) =>
        page.evaluate((l: string) => {
          const button = [...document.querySelectorAll("svc-audit-logs-page svc-pager sl-button")]
            .find((b: El) => b.textContent.trim() === l);
          button.click();
        }, label);
      const disabled = (label: string) =>
        page.evaluate((l: string) =>
          [...document.querySelectorAll("svc-audit-logs-page svc-pager sl-button")]
            .find((b: El) => b.textContent.trim() === l).disabled, label);

      await page.goto(`${base}/audit-logs?action=paging.seed&per_page=10`, { waitUntil: "load" });
      assert.equal((await rows("entry-35")).length, 10);
      assert.match(await pagerText(), /1–10 of 35 entries/);
      assert.doesNotMatch(await pagerText(), /of 4/, "no page count: pages are not numbered on the server");
      await click("Next");
      assert.deepEqual((await rows("entry-25")).slice(-1), ["policy: entry-16"]);
      assert.match(await pagerText(), /11–20 of 35 entries/);
      await click("Next");
      await rows("entry-15");
      // A reload (or a shared link) of page 3 shows the same rows, and Previous still walks back.
      await page.reload({ waitUntil: "load" });
      await rows("entry-15");
      await click("Next");
      assert.equal((await rows("entry-5")).length, 5);
      assert.equal(await disabled("Next"), true, "the last page has no next cursor");
      await click("Previous");
      await rows("entry-15");
      await click("Previous");
      await rows("entry-25");
      await click("Previous");
      await rows("entry-35");
      assert.equal(await disabled("Previous"), true);
      assert.ok(asked.length >= 7, asked.join(" "));
      assert.ok(asked.every((q) => !/[?&]page=/.test(q)), `no request by page number: ${asked.join(" ")}`);
      assert.ok(asked.some((q) => /[?&]cursor=\d+/.test(q)), asked.join(" "));

      // 20 entries, 10 per page: the second page is full, so the API still gives a next cursor, but the
      // exact total says it is the end; Next must not lead to an empty page.
      await db.query(
        `INSERT INTO audit_logs (created_at, username, action, resource_type, resource_name, outcome, details)
         SELECT now() - (100 - i) * interval '1 second', 'alice', 'paging.even', 'policy', 'entry-' || i,
                'success', '{}'::jsonb
           FROM generate_series(1, 20) i`,
      );
      await page.goto(`${base}/audit-logs?action=paging.even&per_page=10`, { waitUntil: "load" });
      await rows("entry-20");
      await click("Next");
      await rows("entry-10");
      assert.match(await pagerText(), /11–20 of 20 entries/);
      assert.equal(await disabled("Next"), true, "a full last page offers no Next");

      // A link past the end (a bookmark whose rows were since purged) says so and leads back.
      const secondPage = new URL(page.url()).searchParams.get("cursor");
      await page.goto(`${base}/audit-logs?action=paging.even&per_page=10&cursor=1&prev=${secondPage}`, {
        waitUntil: "load",
      });
      await page.waitForFunction(() =>
        document.querySelector("svc-audit-logs-page .empty-state")?.textContent.includes("No more entries")
      );
      await page.evaluate(() =>
        [...document.querySelectorAll("svc-audit-logs-page .empty-state sl-button")]
          .find((b: El) => b.textContent.trim() === "Previous").click()
      );
      await rows("entry-10");
    });
  },
});
