/**
 * The node list's bulk actions, saved views and pending explanations, in a real browser (Debian's Chromium)
 * against an in-process server:
 *
 * - rows are picked one by one or as "every node the filters match"; move to group, re-enroll and delete
 *   are confirmed with the count and the effects and reported node by node, a node that fails named with
 *   its reason while the others are done;
 * - the filters and sort are saved as a named view, applied, renamed and deleted; the view follows the
 *   admin into another browser;
 * - an online node stuck at Pending says why, in the list's tooltip and on its page;
 * - on a phone (390×844) the node list is cards, nothing scrolls sideways;
 * - axe-core finds nothing, of any impact, on each screen.
 *
 * Screenshots go to `test-artifacts/console-fleet/`.
 */
import assert from "node:assert/strict";
import type { Page } from "puppeteer-core";
import { haveChromium } from "../helpers/browser.ts";
import { openConsoleLoggedIn } from "../helpers/console_login.ts";
import {
  ADMIN_PASSWORD,
  assertFits,
  axeAll,
  call,
  DRIVER,
  type El,
  shot,
  text,
  waitForText,
  withConsole,
} from "./console_fixture.ts";

if (!haveChromium) {
  console.log("skipped: the fleet console browser test needs Debian's chromium at /usr/bin/chromium");
}

// deno-lint-ignore no-explicit-any
declare const document: any;

const SHOTS = "console-fleet";
const NODES = "svc-nodes-page";
/** A replica row that stands for another server holding the pending node's stream (kept alive below). */
const REPLICA = "fleet-test-replica";

async function assertAxeClean(page: Page, where: string): Promise<void> {
  assert.deepEqual(await axeAll(page), [], `axe on ${where}`);
}

/** Waits for the node list to show exactly these node names (in order). */
async function waitForRows(page: Page, names: string[]): Promise<void> {
  await page.waitForFunction(
    (want: string) => {
      const got = [
        ...document.querySelectorAll("svc-nodes-page table.data tbody tr[data-node-id] td button.link"),
      ]
        .map((b: El) => b.textContent.trim());
      return JSON.stringify(got) === want;
    },
    {},
    JSON.stringify(names),
  );
}

/** Clicks the checkbox of the node named `name`. */
async function pick(page: Page, name: string): Promise<void> {
  await page.evaluate((n: string) => {
    const row = [...document.querySelectorAll("svc-nodes-page tr[data-node-id]")]
      .find((r: El) => r.querySelector("button.link")?.textContent.trim() === n);
    row.querySelector("sl-checkbox.select-row").click();
  }, name);
}

async function clickMenuItem(page: Page, selector: string): Promise<void> {
  await page.click(`${NODES} svc-saved-views sl-dropdown sl-button`);
  await page.waitForSelector(`${NODES} svc-saved-views ${selector}`, { visible: true });
  await page.click(`${NODES} svc-saved-views ${selector}`);
}

/** Confirms the open confirmation dialog, typing the text it asks for when it asks for one. */
async function confirm(page: Page, typed?: string): Promise<void> {
  await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
  if (typed) await page.type("svc-confirm-dialog sl-input.confirm-typed >>> input", typed);
  await page.click("svc-confirm-dialog sl-button.confirm-ok");
  await page.waitForFunction(() => !document.querySelector("svc-confirm-dialog"));
}

async function closeReport(page: Page): Promise<void> {
  await page.click(`${NODES} sl-dialog.bulk-report sl-button.close-report`);
  await page.waitForFunction(() => !document.querySelector("svc-nodes-page sl-dialog.bulk-report"));
}

Deno.test({
  name: `node list: bulk actions, saved views, pending explained, cards on a phone (${DRIVER})`,
  ignore: !haveChromium,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await withConsole("console-fleet", async ({ page, base, db, browser }) => {
      const office = await call(page, "POST", "/api/v1/node-groups", { name: "office" });
      const lab = await call(page, "POST", "/api/v1/node-groups", { name: "lab" });
      const policy = await call(page, "POST", "/api/v1/policies/all", {
        name: "Office browser",
        type: "Firefox",
        content: JSON.stringify({ DisableTelemetry: true }),
      });
      await call(page, "PUT", `/api/v1/policies/all/${policy.id}/state`, { state: "released" });
      const binding = await call(page, "POST", "/api/v1/policy-bindings", {
        policy_id: policy.id,
        node_group_id: office.id,
      });
      await call(page, "PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled" });
      // Fourteen offline office machines (seeded nodes have no stream: offline is a status the hub leaves alone).
      const ids: Record<string, string> = {};
      for (let i = 1; i <= 14; i++) {
        const name = `pc-${String(i).padStart(2, "0")}`;
        const [row] = await db.query<{ id: string }>(
          `INSERT INTO nodes (name, status, os_name, cert_serial, cert_not_after)
           VALUES ($1, 'offline', 'Debian GNU/Linux', $2, now() + interval '60 days') RETURNING id`,
          [name, `${i.toString(16)}ab`],
        );
        ids[name] = row.id;
        await db.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [
          row.id,
          office.id,
        ]);
      }
      // One online office machine whose agent connected and never reported: Pending, and it should say why.
      const [stuck] = await db.query<{ id: string }>(
        `INSERT INTO nodes (name, status, agent_version) VALUES ('kiosk-01', 'online', '0.1.0') RETURNING id`,
      );
      await db.query(
        "INSERT INTO node_group_members (node_id, node_group_id, created_at) VALUES ($1, $2, now() - interval '1 hour')",
        [stuck.id, office.id],
      );
      await db.query("INSERT INTO server_replicas (id, hostname) VALUES ($1, 'elsewhere')", [REPLICA]);
      await db.query(
        "INSERT INTO node_streams (node_id, replica_id, opened_at) VALUES ($1, $2, now() - interval '10 minutes')",
        [stuck.id, REPLICA],
      );
      let alive = true;
      const keepAlive = (async () => {
        while (alive) {
          await db.query("UPDATE server_replicas SET last_seen = now() WHERE id = $1", [REPLICA]);
          await new Promise((r) => setTimeout(r, 1000));
        }
      })();
      try {
        // Pending, and why: in the list's tooltip…
        await page.goto(`${base}/nodes?search=kiosk`, { waitUntil: "load" });
        await page.waitForSelector(`${NODES} tr[data-node-id="${stuck.id}"] sl-tooltip.pending-why`);
        const tip = await page.$eval(
          `${NODES} tr[data-node-id="${stuck.id}"] sl-tooltip.pending-why`,
          (e: El) => e.getAttribute("content"),
        );
        assert.match(tip, /has not reported compliance since it connected/);
        assert.match(tip, /No heartbeat has arrived/);
        await page.hover(`${NODES} tr[data-node-id="${stuck.id}"] sl-tooltip.pending-why sl-icon-button`);
        await page.waitForFunction(
          (id: string) =>
            document.querySelector(`svc-nodes-page tr[data-node-id="${id}"] sl-tooltip.pending-why`)?.open,
          {},
          stuck.id,
        );
        await assertAxeClean(page, "the node list with the pending tooltip open");
        await shot(page, SHOTS, "1-pending-tooltip");
        // … and on its page.
        await page.click(`${NODES} tr[data-node-id="${stuck.id}"] button.link`);
        await page.waitForSelector(
          `svc-node-detail .pending-reasons li[data-code="not_reported_since_connect"]`,
        );
        assert.match(
          await text(page, "svc-node-detail .pending-reasons"),
          /Why this node is pending.*journalctl -u svc-agent/,
        );
        await assertAxeClean(page, "the node page with its pending reasons");
        await shot(page, SHOTS, "2-pending-page");
        await page.goto(`${base}/nodes`, { waitUntil: "load" });

        // Saved views: the offline machines, by name descending.
        await page.goto(`${base}/nodes?status=offline&sort=name&order=desc&per_page=10`, {
          waitUntil: "load",
        });
        await waitForRows(page, [
          "pc-14",
          "pc-13",
          "pc-12",
          "pc-11",
          "pc-10",
          "pc-09",
          "pc-08",
          "pc-07",
          "pc-06",
          "pc-05",
        ]);
        await clickMenuItem(page, "sl-menu-item.save-view");
        await page.waitForSelector(`${NODES} sl-dialog.saved-views-dialog sl-input[name=view-name]`, {
          visible: true,
        });
        await assertAxeClean(page, "the save-view dialog");
        await page.type(
          `${NODES} sl-dialog.saved-views-dialog sl-input[name=view-name] >>> input`,
          "Offline, newest names",
        );
        await page.click(`${NODES} sl-dialog.saved-views-dialog sl-button.confirm-save-view`);
        await page.waitForFunction(() =>
          !document.querySelector("svc-nodes-page sl-dialog.saved-views-dialog")
        );
        const [saved] = (await call(page, "GET", "/api/v1/saved-views?list=nodes")).items;
        assert.deepEqual([saved.name, saved.query], [
          "Offline, newest names",
          "order=desc&sort=name&status=offline",
        ]);

        // Applied from a plain list, it brings back its filters and sort.
        await page.goto(`${base}/nodes?per_page=10`, { waitUntil: "load" });
        await waitForRows(page, [
          "kiosk-01",
          "pc-01",
          "pc-02",
          "pc-03",
          "pc-04",
          "pc-05",
          "pc-06",
          "pc-07",
          "pc-08",
          "pc-09",
        ]);
        await clickMenuItem(page, "sl-menu-item.saved-view");
        await waitForRows(page, [
          "pc-14",
          "pc-13",
          "pc-12",
          "pc-11",
          "pc-10",
          "pc-09",
          "pc-08",
          "pc-07",
          "pc-06",
          "pc-05",
        ]);
        const url = new URL(page.url());
        assert.deepEqual(
          [url.searchParams.get("status"), url.searchParams.get("sort"), url.searchParams.get("order")],
          ["offline", "name", "desc"],
        );

        // The view follows the admin into another browser (a fresh profile, logged in anew).
        const other = await browser.createBrowserContext();
        const otherPage = await other.newPage();
        await otherPage.setViewport({ width: 1440, height: 900 });
        await openConsoleLoggedIn(otherPage, base, { username: "admin", password: ADMIN_PASSWORD }, {
          path: "/nodes",
        });
        await otherPage.waitForSelector(`${NODES} svc-saved-views sl-dropdown`);
        await otherPage.click(`${NODES} svc-saved-views sl-dropdown sl-button`);
        await waitForText(otherPage, `${NODES} svc-saved-views sl-menu`, "Offline, newest names");
        await other.close();

        // Rename, then (later) delete.
        await clickMenuItem(page, "sl-menu-item.manage-views");
        await page.waitForSelector(`${NODES} sl-dialog.saved-views-dialog .saved-view-list`, {
          visible: true,
        });
        await assertAxeClean(page, "the manage-views dialog");
        await page.click(
          `${NODES} .saved-view-list li[data-view="Offline, newest names"] sl-button.start-rename`,
        );
        await page.waitForSelector(`${NODES} .saved-view-list sl-input.rename-view`, { visible: true });
        await page.$eval(
          `${NODES} .saved-view-list sl-input.rename-view`,
          (e: El) => e.value = "Offline machines",
        );
        await page.click(`${NODES} .saved-view-list sl-button.confirm-rename`);
        await page.waitForSelector(`${NODES} .saved-view-list li[data-view="Offline machines"]`);
        await shot(page, SHOTS, "3-manage-views");
        await page.click(`${NODES} .saved-view-list li[data-view="Offline machines"] sl-button.delete-view`);
        await confirm(page);
        await page.waitForFunction(() => !document.querySelector("svc-nodes-page .saved-view-list li"));
        assert.deepEqual((await call(page, "GET", "/api/v1/saved-views?list=nodes")).items, []);
        await page.click(`${NODES} sl-dialog.saved-views-dialog sl-button:not(.delete-view)`);

        // Bulk move: two rows picked by hand go to the lab and leave the office.
        await page.goto(`${base}/nodes?status=offline&per_page=10`, { waitUntil: "load" });
        await waitForRows(page, [
          "pc-01",
          "pc-02",
          "pc-03",
          "pc-04",
          "pc-05",
          "pc-06",
          "pc-07",
          "pc-08",
          "pc-09",
          "pc-10",
        ]);
        await pick(page, "pc-01");
        await pick(page, "pc-02");
        await waitForText(page, `${NODES} .selection-bar .selection-count`, "2 nodes selected");
        await assertAxeClean(page, "the node list with two rows picked");
        await page.click(`${NODES} svc-node-bulk sl-button.bulk-move`);
        await page.waitForSelector(`${NODES} sl-dialog.bulk-move-dialog sl-select.bulk-target`, {
          visible: true,
        });
        await page.$eval(`${NODES} sl-dialog.bulk-move-dialog sl-select.bulk-target`, (e: El, id: string) => {
          e.value = id;
          e.dispatchEvent(new Event("sl-change", { bubbles: true }));
        }, lab.id);
        await waitForText(
          page,
          `${NODES} sl-dialog.bulk-move-dialog .bulk-effects`,
          "2 nodes move to lab and leave every other group",
        );
        assert.equal(
          await text(page, `${NODES} sl-dialog.bulk-move-dialog sl-button.confirm-bulk-move`),
          "Move 2 nodes",
        );
        await assertAxeClean(page, "the move dialog");
        await shot(page, SHOTS, "4-move");
        await page.click(`${NODES} sl-dialog.bulk-move-dialog sl-button.confirm-bulk-move`);
        await waitForText(page, `${NODES} sl-dialog.bulk-report .bulk-summary`, "Done for 2 of 2 nodes");
        assert.match(
          await text(page, `${NODES} table.bulk-results tr[data-node="pc-01"]`),
          /In lab; left office/,
        );
        await assertAxeClean(page, "the move report");
        await closeReport(page);
        const moved = await call(page, "GET", `/api/v1/nodes/${ids["pc-01"]}`);
        assert.deepEqual(moved.groups.map((g: { name: string }) => g.name), ["lab"]);

        // Re-enroll one: a valid certificate is revoked first, and the command is shown once.
        await pick(page, "pc-03");
        await page.click(`${NODES} svc-node-bulk sl-button.bulk-re-enroll`);
        await page.waitForSelector("svc-confirm-dialog .bulk-effects", { visible: true });
        assert.match(await text(page, "svc-confirm-dialog .bulk-effects"), /revoked now.*5 minutes/);
        assert.equal(await text(page, "svc-confirm-dialog sl-button.confirm-ok"), "Re-enroll 1 node");
        await confirm(page);
        await waitForText(page, `${NODES} sl-dialog.bulk-report .bulk-summary`, "Done for 1 of 1 node");
        assert.match(
          await text(page, `${NODES} table.bulk-results tr[data-node="pc-03"] .bulk-command`),
          /^SVC_ENROLLMENT_TOKEN='[A-Za-z0-9_-]+' svc-agent$/,
        );
        await assertAxeClean(page, "the re-enroll report");
        await shot(page, SHOTS, "5-re-enroll");
        await closeReport(page);

        // Delete every node the filters match (the office's offline ones), one of which is gone meanwhile.
        await page.goto(`${base}/nodes?status=offline&group=${office.id}&per_page=10`, { waitUntil: "load" });
        await page.waitForSelector(`${NODES} th.select-cell sl-checkbox.select-page`);
        await page.click(`${NODES} th.select-cell sl-checkbox.select-page`);
        await waitForText(page, `${NODES} .selection-bar .selection-count`, "10 nodes selected");
        await page.click(`${NODES} .selection-bar sl-button.select-all-matching`);
        await waitForText(
          page,
          `${NODES} .selection-bar .selection-count`,
          "12 nodes selected (all that match the filters)",
        );
        await call(page, "DELETE", `/api/v1/nodes/${ids["pc-14"]}`);
        await page.click(`${NODES} svc-node-bulk sl-button.bulk-delete`);
        await page.waitForSelector("svc-confirm-dialog .bulk-effects", { visible: true });
        assert.match(
          await text(page, "svc-confirm-dialog .confirm-message"),
          /pc-03, pc-04, pc-05, pc-06, pc-07 and 7 more/,
        );
        assert.match(await text(page, "svc-confirm-dialog .bulk-effects"), /cannot be undone/);
        await assertAxeClean(page, "the delete confirmation");
        await confirm(page, "delete 12 nodes");
        await waitForText(
          page,
          `${NODES} sl-dialog.bulk-report .bulk-summary`,
          "Done for 11 of 12 nodes; 1 failed",
        );
        assert.match(
          await text(page, `${NODES} table.bulk-results tr[data-node="pc-14"]`),
          /Failed.*not found/,
        );
        await shot(page, SHOTS, "6-delete-report");
        await closeReport(page);
        await page.waitForSelector(`${NODES} .empty-state`);
        const rows = await db.query<{ resource_name: string; outcome: string }>(
          "SELECT resource_name, outcome FROM audit_logs WHERE action = 'delete' AND resource_type = 'node' ORDER BY id",
        );
        assert.equal(
          rows.filter((r) => r.outcome === "success").length,
          12,
          "one row per deleted node (11 + the API's)",
        );
        assert.ok(rows.some((r) => r.outcome === "failure" && r.resource_name === ids["pc-14"]));

        // A phone: the node list is cards, each value labelled by its column; nothing scrolls sideways.
        await page.setViewport({ width: 390, height: 844 });
        await page.goto(`${base}/nodes`, { waitUntil: "load" });
        await page.waitForSelector(`${NODES} table.data tbody tr[data-node-id] td[data-label="Status"]`);
        assert.equal(
          await page.$eval(
            `${NODES} table.data tbody tr[data-node-id]`,
            (e: El) => getComputedStyle(e).display,
          ),
          "block",
        );
        await assertFits(page, 390, "the node list");
        await assertAxeClean(page, "the node list as cards");
        await shot(page, SHOTS, "7-phone-cards");
      } finally {
        alive = false;
        await keepAlive;
      }
    }, { "server.replica_timeout_seconds": 3600 });
  },
});

// deno-lint-ignore no-explicit-any
declare const getComputedStyle: any;
