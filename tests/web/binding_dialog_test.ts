/**
 * The binding dialog, the type tiles and the lifecycle buttons of a policy with a revision, in a real browser
 * (Debian's Chromium driven by puppeteer-core) against a real `svc-server` process holding 300 policies:
 *
 * - the policy picker searches the server as one types (by name, and by type label: "firewall" finds a
 *   Firewalld policy whose name does not say so), shows type and state, is driven by the keyboard, and never
 *   loads the whole policy list;
 * - "Assign to groups" on a policy page binds it to two groups and enables both after a confirmation naming
 *   the nodes of each group;
 * - "Archive" on a released policy with a revision in progress says it discards the revision and does so:
 *   the revision is never stranded on the archived policy;
 * - a new policy's type is picked from tiles with the keyboard;
 * - axe-core finds no serious or critical violation on the dialog, the tiles and the confirmation.
 *
 * Screenshots go to `test-artifacts/console/`.
 */
import assert from "node:assert/strict";
import type { Page } from "puppeteer-core";
import { browserTest, browserTestSkipped, screenshot, seriousAxeViolations } from "../helpers/browser.ts";
import { withConsoleProcess } from "../helpers/console_login.ts";

const SKIP = browserTestSkipped("binding dialog browser test");

// deno-lint-ignore no-explicit-any
declare const document: any;
// deno-lint-ignore no-explicit-any
type El = any;

const shot = (page: Page, name: string) => screenshot(page, "console", name);

/** Serious and critical axe-core violations on the page once its toasts have settled. */
const axeViolations = (page: Page) => seriousAxeViolations(page, { afterToasts: true });

/** Chooses the options containing `texts` in the (multiple) node group select of the open binding dialog. */
async function chooseGroups(page: Page, texts: string[]): Promise<void> {
  await page.waitForFunction(() =>
    document.querySelectorAll(".binding-form sl-select[name=node_group_id] sl-option").length > 0
  );
  await page.$eval(".binding-form sl-select[name=node_group_id]", (select: El, wanted: string[]) => {
    const options = [...select.querySelectorAll("sl-option")];
    select.value = wanted.map((t) => options.find((o: El) => o.textContent.includes(t)).value);
  }, texts);
}

browserTest(
  "binding dialog: a searchable policy picker over 300 policies, Assign to groups, tiles, archive with a revision",
  SKIP,
  async () => {
    await withConsoleProcess({
      path: false,
      viewport: { width: 1280, height: 1000 },
      failureShot: "console",
    }, async ({ server, page, watch, logIn, api: adminApi }) => {
      const api = await adminApi();
      const lab = await api.call("POST", "/api/v1/node-groups", { name: "lab" });
      await api.call("POST", "/api/v1/node-groups", { name: "office" });
      // 300 policies: the picker must find one without loading them all.
      const names = Array.from({ length: 299 }, (_, i) => `Fleet policy ${String(i + 1).padStart(3, "0")}`);
      const created: Record<string, string> = {};
      for (let i = 0; i < names.length; i += 15) {
        await Promise.all(
          names.slice(i, i + 15).map(async (name) => {
            const p = await api.call("POST", "/api/v1/policies/all", {
              name,
              type: "Firefox",
              content: JSON.stringify({ DisableTelemetry: true }),
            });
            created[name] = p.id;
          }),
        );
      }
      const perimeter = await api.call("POST", "/api/v1/policies/all", {
        name: "Perimeter",
        type: "Firewalld",
        content: JSON.stringify({ zones: [{ name: "public", services: ["ssh"] }] }),
      });
      await api.call("PUT", `/api/v1/policies/all/${perimeter.id}/state`, { state: "released" });
      const assigned = created["Fleet policy 207"];
      await api.call("PUT", `/api/v1/policies/all/${assigned}/state`, { state: "released" });

      const policyQueries: URLSearchParams[] = [];
      page.on("request", (req) => {
        const url = new URL(req.url());
        if (url.pathname === "/api/v1/policies/all") policyQueries.push(url.searchParams);
      });
      const web = server.web;
      await logIn({ path: "/policy-bindings" });

      // The picker: type part of a type's label, pick with the keyboard.
      await page.waitForSelector("svc-policy-bindings-page sl-button[variant=primary]", { visible: true });
      await page.click("svc-policy-bindings-page sl-button[variant=primary]");
      const search = await page.waitForSelector(".binding-form sl-input[name=policy_search] >>> input", {
        visible: true,
      });
      await search!.type("firewall");
      await page.waitForFunction(() => {
        const first = document.querySelector(".binding-form li[role=option]");
        return first && first.textContent.includes("Perimeter") &&
          first.getAttribute("aria-selected") === "true";
      });
      assert.match(
        await page.$eval(".binding-form li[role=option]", (e: El) => e.textContent.replace(/\s+/g, " ")),
        /Perimeter Firewall Released/,
      );
      assert.equal(
        await page.$eval(
          ".binding-form sl-input[name=policy_search]",
          (e: El) => e.getAttribute("aria-expanded"),
        ),
        "true",
      );
      await shot(page, "binding-dialog-picker");
      assert.deepEqual(await axeViolations(page), [], "axe on the binding dialog with results");
      // A name search narrows to the one policy among 300; arrows and Enter pick it.
      await page.click(".binding-form sl-input[name=policy_search] >>> input", { count: 3 });
      await search!.type("policy 123");
      await page.waitForFunction(() => {
        const rows = [...document.querySelectorAll(".binding-form li[role=option]")];
        return rows.length === 1 && rows[0].textContent.includes("Fleet policy 123");
      });
      await page.keyboard.press("ArrowDown");
      await page.keyboard.press("Enter");
      await page.waitForFunction(() =>
        document.querySelector(".binding-form sl-input[name=policy_search]")?.value === "Fleet policy 123"
      );
      assert.equal(await page.$(".binding-form li[role=option]"), null, "the results close once picked");
      assert.ok(
        policyQueries.every((q) => Number(q.get("per_page") ?? 0) <= 20),
        `the picker never loads the whole list: ${policyQueries.map(String).join(" | ")}`,
      );
      assert.ok(
        policyQueries.some((q) => q.get("name") === "policy 123"),
        "the name search runs on the server",
      );
      assert.ok(
        policyQueries.some((q) => q.get("type") === "Firewalld"),
        "a type's label finds its policies",
      );
      await chooseGroups(page, ["lab"]);
      await page.click("sl-dialog.binding-dialog sl-button.binding-create");
      await page.waitForFunction(() =>
        [...document.querySelectorAll("svc-policy-bindings-page tr[data-binding-id]")].some((r: El) =>
          r.textContent.includes("Fleet policy 123")
        )
      );
      const bindings = await api.call(
        "GET",
        `/api/v1/policy-bindings?policy_id=${created["Fleet policy 123"]}`,
      );
      assert.deepEqual(
        bindings.items.map((b: { node_group_id: string; state: string }) => [b.node_group_id, b.state]),
        [
          [lab.id, "disabled"],
        ],
      );

      // "Assign to groups" from the policy page: two groups, enabled after a confirmation naming the nodes.
      await page.goto(`${web}/policies/${assigned}/edit`, { waitUntil: "domcontentloaded" });
      await page.waitForSelector("svc-policy-editor-page sl-button.assign-groups", { visible: true });
      await page.click("svc-policy-editor-page sl-button.assign-groups");
      await page.waitForSelector("sl-dialog.binding-dialog .binding-policy", { visible: true });
      assert.match(
        await page.$eval("sl-dialog.binding-dialog .binding-policy", (e: El) => e.textContent),
        /Fleet policy 207 · Firefox\s*Released/,
      );
      await chooseGroups(page, ["lab", "office"]);
      await page.$eval("sl-dialog.binding-dialog sl-checkbox.enable-now", (e: El) => e.click());
      await page.waitForFunction(() => document.querySelector("sl-checkbox.enable-now")?.checked === true);
      await page.click("sl-dialog.binding-dialog sl-button.binding-create");
      const ok = await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
      assert.match(
        await page.$eval(
          "svc-confirm-dialog .confirm-message",
          (e: El) => e.textContent.replace(/\s+/g, " "),
        ),
        /0 nodes in lab, 0 nodes in office will receive “Fleet policy 207” \(priority 0\)/,
      );
      assert.deepEqual(await axeViolations(page), [], "axe on the enable confirmation");
      await ok!.click();
      await page.waitForFunction(() => !document.querySelector("svc-binding-dialog"));
      const assignedBindings = await api.call("GET", `/api/v1/policy-bindings?policy_id=${assigned}`);
      assert.deepEqual(
        assignedBindings.items.map((b: { node_group_name: string; state: string }) =>
          `${b.node_group_name}:${b.state}`
        )
          .sort(),
        ["lab:enabled", "office:enabled"],
      );

      // Archive next to "Release revision": it says it discards the revision, and does.
      await api.call("PUT", `/api/v1/policies/all/${perimeter.id}/revision`, {
        content: JSON.stringify({ zones: [{ name: "public", services: ["ssh", "https"] }] }),
      });
      await page.goto(`${web}/policies/${perimeter.id}/edit`, { waitUntil: "domcontentloaded" });
      await page.waitForSelector("svc-policy-editor-page sl-button.release-revision", { visible: true });
      await page.click("svc-policy-editor-page sl-button.state-archived");
      const archive = await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", {
        visible: true,
      });
      assert.match(
        await page.$eval(
          "svc-confirm-dialog .confirm-message",
          (e: El) => e.textContent.replace(/\s+/g, " "),
        ),
        /The revision in progress is discarded/,
      );
      assert.equal(await archive!.evaluate((e: El) => e.textContent.trim()), "Discard revision and archive");
      await shot(page, "archive-with-revision");
      await archive!.click();
      await page.waitForSelector("svc-policy-editor-page .read-only-note");
      const archived = await api.call("GET", `/api/v1/policies/all/${perimeter.id}`);
      assert.equal(archived.state, "archived");
      assert.equal(archived.revision_pending, false, "no revision is left stranded on the archived policy");

      // A new policy's type comes from tiles, chosen with the keyboard.
      await page.goto(`${web}/policies/new`, { waitUntil: "domcontentloaded" });
      await page.waitForSelector('svc-policy-flow-page .type-tile[data-type="Firefox"]', { visible: true });
      const tiles = await page.$$eval(
        "svc-policy-flow-page .type-tile",
        (ts: El[]) =>
          ts.map((
            t,
          ) => [t.dataset.type, t.querySelector(".type-tile-description").textContent.trim() !== ""]),
      );
      assert.ok(tiles.length >= 11 && tiles.every(([, described]) => described), JSON.stringify(tiles));
      await page.focus('svc-policy-flow-page .type-tile[data-type="Firefox"] input');
      await page.keyboard.press("Space");
      await page.keyboard.press("ArrowRight");
      await page.waitForFunction(() =>
        document.querySelector("svc-policy-flow-page .type-tiles input:checked")?.value === "Thunderbird"
      );
      // The guided flow: name and type first, then the settings of the chosen type.
      await page.type("svc-policy-flow-page .policy-details sl-input[name=name] >>> input", "Mail client");
      await page.click("svc-policy-flow-page sl-button.flow-next");
      await page.waitForSelector("svc-schema-form", { visible: true });
      await shot(page, "new-policy-type-tiles");
      assert.deepEqual(await axeViolations(page), [], "axe on the new policy page with its tiles");
      assert.deepEqual(watch.pageErrors, [], "no script errors in the page");
    });
  },
);
