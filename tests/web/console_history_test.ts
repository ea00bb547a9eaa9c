/**
 * Revisions, version history and the audit log in a real browser (Debian's Chromium) against an
 * in-process server:
 *
 * - the policy list marks a policy with a pending revision;
 * - the revision's diff names each setting as the editor does, with its old and new value (no JSON lines
 *   unless unfolded);
 * - the version history lists every released version with who released it and when, each opening onto its
 *   changes against the one before; "Restore this version" starts a revision from it, released as usual,
 *   which adds a version saying it is a rollback (history is never rewritten);
 * - the audit log names the policy (linked) and says what changed; a deleted thing falls back to its id;
 * - on a phone (390×844) the policy list, the audit log and the Settings data tables are cards;
 * - axe-core finds nothing, of any impact, on each screen.
 *
 * Screenshots go to `test-artifacts/console-history/`.
 */
import assert from "node:assert/strict";
import type { Page } from "puppeteer-core";
import { haveChromium } from "../helpers/browser.ts";
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
  console.log("skipped: the history browser test needs Debian's chromium at /usr/bin/chromium");
}

// deno-lint-ignore no-explicit-any
declare const document: any;
// deno-lint-ignore no-explicit-any
declare const getComputedStyle: any;

const SHOTS = "console-history";
const EDITOR = "svc-policy-editor-page";

async function assertAxeClean(page: Page, where: string): Promise<void> {
  assert.deepEqual(await axeAll(page), [], `axe on ${where}`);
}

async function confirm(page: Page): Promise<void> {
  await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
  await page.click("svc-confirm-dialog sl-button.confirm-ok");
  await page.waitForFunction(() => !document.querySelector("svc-confirm-dialog"));
}

/** Opens the history entry of `version` (a closed sl-details) and waits for its changes. */
async function openVersion(page: Page, version: number): Promise<void> {
  await page.waitForSelector(`${EDITOR} sl-details.history-version[data-version="${version}"]`);
  await page.$eval(`${EDITOR} sl-details.history-version[data-version="${version}"]`, (e: El) => e.show());
  await page.waitForFunction(
    (v: number) => {
      const d = document.querySelector(
        `svc-policy-editor-page sl-details.history-version[data-version="${v}"]`,
      );
      return d?.open && !d.querySelector("sl-spinner");
    },
    {},
    version,
  );
}

Deno.test({
  name:
    `revisions by setting name, version history with rollback, audit names and changes, cards (${DRIVER})`,
  ignore: !haveChromium,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await withConsole("console-history", async ({ page, base }) => {
      const lab = await call(page, "POST", "/api/v1/node-groups", { name: "lab" });
      const policy = await call(page, "POST", "/api/v1/policies/all", {
        name: "Browser hardening",
        type: "Firefox",
        content: JSON.stringify({ DisableTelemetry: true }),
      });
      const path = `/api/v1/policies/all/${policy.id}`;
      await call(page, "PUT", `${path}/state`, { state: "released" });
      const binding = await call(page, "POST", "/api/v1/policy-bindings", {
        policy_id: policy.id,
        node_group_id: lab.id,
      });
      await call(page, "PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled", priority: 7 });
      await call(page, "PUT", `${path}/revision`, {
        content: JSON.stringify({ DisableTelemetry: false, DisablePocket: true }),
      });

      // The list marks the pending revision.
      await page.goto(`${base}/policies`, { waitUntil: "load" });
      await page.waitForSelector(`svc-policies-page tr[data-policy-id="${policy.id}"] .revision-pending`);
      assert.equal(
        await text(page, `svc-policies-page tr[data-policy-id="${policy.id}"] .revision-pending`),
        "Revision pending",
      );
      await assertAxeClean(page, "the policy list with a pending revision");
      await shot(page, SHOTS, "1-list-badge");

      // The revision's diff, by setting name.
      await page.click(`svc-policies-page tr[data-policy-id="${policy.id}"] .revision-pending`);
      await page.waitForSelector(`${EDITOR} table.setting-diff`);
      assert.equal(await text(page, `${EDITOR} .revision-diff .diff-summary`), "2 settings changed.");
      assert.match(
        await text(page, `${EDITOR} table.setting-diff tr[data-key="DisableTelemetry"]`),
        /^Turn off telemetry\s*DisableTelemetry · Changed on off$/,
      );
      assert.match(
        await text(page, `${EDITOR} table.setting-diff tr[data-key="DisablePocket"]`),
        /^Turn off Pocket\s*DisablePocket · Added \(not set\) on$/,
      );
      assert.equal(
        await page.$eval(`${EDITOR} sl-details.raw-diff`, (e: El) => e.open),
        false,
        "the JSON lines stay folded",
      );
      await assertAxeClean(page, "the revision editor with its settings diff");
      await shot(page, SHOTS, "2-revision-diff");

      // Release it from the editor: version 2 joins the history.
      await page.click(`${EDITOR} sl-button.release-revision`);
      await confirm(page);
      await page.waitForSelector(`${EDITOR} sl-details.history-version[data-version="2"]`);
      await openVersion(page, 2);
      const v2 = `${EDITOR} sl-details.history-version[data-version="2"]`;
      assert.match(
        await text(page, `${v2} .history-summary`),
        /Version 2 Current Revision released by admin/,
      );
      assert.match(
        await text(page, `${v2} table.setting-diff`),
        /Turn off Pocket\s*DisablePocket · Added \(not set\) on/,
      );
      await openVersion(page, 1);
      assert.match(
        await text(page, `${EDITOR} sl-details.history-version[data-version="1"]`),
        /first released version/,
      );
      await assertAxeClean(page, "the version history");
      await shot(page, SHOTS, "3-history");

      // Rollback to version 1: a revision starts from it; the release adds version 3, a rollback.
      await page.click(`${EDITOR} sl-details.history-version[data-version="1"] sl-button.restore-version`);
      await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
      assert.match(
        await text(page, "svc-confirm-dialog .confirm-message"),
        /Nodes keep version 2 until you release/,
      );
      await confirm(page);
      await page.waitForSelector(`${EDITOR} .revision-note`);
      await waitForText(page, `${EDITOR} table.setting-diff`, "Turn off Pocket");
      assert.match(
        await text(page, `${EDITOR} table.setting-diff tr[data-key="DisablePocket"]`),
        /Removed on \(not set\)/,
      );
      await page.click(`${EDITOR} sl-button.release-revision`);
      await confirm(page);
      await page.waitForSelector(`${EDITOR} sl-details.history-version[data-version="3"]`);
      await openVersion(page, 3);
      assert.match(
        await text(page, `${EDITOR} sl-details.history-version[data-version="3"] .history-summary`),
        /Version 3 Current Rollback to version 1 by admin/,
      );
      const versions = (await call(page, "GET", `${path}/versions`)).items;
      assert.deepEqual(versions.map((v: { version: number; origin: string }) => [v.version, v.origin]), [
        [3, "rollback"],
        [2, "revision"],
        [1, "release"],
      ]);

      // The audit log: the policy by name (a link), and what changed.
      await page.goto(`${base}/audit-logs?action=policy.rollback`, { waitUntil: "load" });
      await page.waitForSelector("svc-audit-logs-page td.audit-resource a");
      assert.equal(await text(page, "svc-audit-logs-page td.audit-resource"), "policy: Browser hardening");
      assert.equal(
        await page.$eval("svc-audit-logs-page td.audit-resource a", (a: El) => a.getAttribute("href")),
        `/policies/${policy.id}/edit`,
      );
      assert.equal(await text(page, "svc-audit-logs-page td.audit-changes"), "restores version 1");
      await page.goto(`${base}/audit-logs?resource_type=binding&action=update`, { waitUntil: "load" });
      await waitForText(
        page,
        "svc-audit-logs-page td.audit-changes",
        "State: disabled → enabled; Priority: 0 → 7",
      );
      assert.equal(
        await text(page, "svc-audit-logs-page td.audit-resource"),
        "binding: Browser hardening → lab",
      );
      await page.click("svc-audit-logs-page tbody tr sl-button");
      await page.waitForSelector("svc-audit-logs-page table.audit-change-table tr[data-field=priority]");
      assert.equal(
        await text(page, "svc-audit-logs-page table.audit-change-table tr[data-field=priority]"),
        "Priority 0 7",
      );
      await assertAxeClean(page, "the audit entry's drawer");
      await shot(page, SHOTS, "4-audit-drawer");
      await page.keyboard.press("Escape");

      // A deleted group: its old entries fall back to the name they were written with, unlinked.
      const gone = await call(page, "POST", "/api/v1/node-groups", { name: "temporary" });
      await call(page, "DELETE", `/api/v1/node-groups/${gone.id}`);
      await page.goto(`${base}/audit-logs?resource_type=node_group&action=create`, { waitUntil: "load" });
      await waitForText(page, "svc-audit-logs-page tbody tr:first-child td.audit-resource", "temporary");
      assert.equal(
        await page.$("svc-audit-logs-page tbody tr:first-child td.audit-resource a"),
        null,
        "no link to a deleted group",
      );
      assert.match(
        await text(page, "svc-audit-logs-page tbody tr:first-child td.audit-resource"),
        /node_group: temporary \(deleted or renamed\)/,
      );
      await assertAxeClean(page, "the audit log");

      // A phone: the policy list, the audit log and a Settings data table are cards; nothing scrolls sideways.
      await call(page, "POST", "/api/v1/api-tokens", {
        name: "nightly-report",
        expires_in_days: 30,
        password: ADMIN_PASSWORD,
      });
      await page.setViewport({ width: 390, height: 844 });
      for (
        const [where, table] of [
          ["/policies", "svc-policies-page table.data"],
          ["/audit-logs", "svc-audit-logs-page table.data"],
          ["/settings?tab=api-tokens", "svc-settings-api-tokens table.data-table"],
        ]
      ) {
        await page.goto(`${base}${where}`, { waitUntil: "load" });
        await page.waitForSelector(`${table} tbody tr td[data-label]`);
        assert.equal(
          await page.$eval(`${table} tbody tr`, (e: El) => getComputedStyle(e).display),
          "block",
          `${where}: rows are cards`,
        );
        await assertFits(page, 390, where);
        await assertAxeClean(page, `${where} as cards`);
        await shot(page, SHOTS, `phone${where.replace(/[/?=&]+/g, "-")}`);
      }
    });
  },
});
