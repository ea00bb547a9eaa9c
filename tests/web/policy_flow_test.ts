/**
 * The guided "New policy" flow in a real browser (Debian's Chromium) against an in-process server:
 *
 * - keyboard only, from the policy list's "New policy" to a released policy bound to a group: create,
 *   configure (through the JSON view), review (settings by name), assign (a group, a priority) and release;
 *   the stepper marks the current step with aria-current="step";
 * - the action bar stays at the bottom of the viewport (short step, long step scrolled) at 1440×900 and on a
 *   phone (390×844), where nothing is wider than the screen;
 * - the assign step says what will reach which nodes: the other policies of the type each group already
 *   receives and who wins at the chosen priority;
 * - the SessionAccess lockout guard opens its dialog inside the flow, and the reason given is audited;
 * - leaving with unsaved changes asks first, and cancelling keeps them;
 * - axe-core finds nothing, of any impact, on every step.
 *
 * Screenshots go to `test-artifacts/policy-flow/`.
 */
import assert from "node:assert/strict";
import type { Page } from "puppeteer-core";
import { haveChromium } from "../helpers/browser.ts";
import {
  assertFits,
  axeAll,
  call,
  DRIVER,
  type El,
  shot,
  tabTo,
  text,
  waitForText,
  withConsole,
} from "./console_fixture.ts";

if (!haveChromium) {
  console.log("skipped: the policy flow browser test needs Debian's chromium at /usr/bin/chromium");
}

// deno-lint-ignore no-explicit-any
declare const document: any;
// deno-lint-ignore no-explicit-any
declare const innerHeight: any;
// deno-lint-ignore no-explicit-any
declare const scrollY: any;
// deno-lint-ignore no-explicit-any
declare const scrollTo: any;

const SHOTS = "policy-flow";
const FLOW = "svc-policy-flow-page";

/** The id of the step the stepper marks current. */
async function currentStep(page: Page): Promise<string> {
  return await page.$eval(`${FLOW} .flow-stepper [aria-current="step"]`, (e: El) => e.dataset.step);
}

async function waitForStep(page: Page, step: string): Promise<void> {
  await page.waitForFunction(
    (s: string) =>
      document.querySelector(`svc-policy-flow-page .flow-stepper [aria-current="step"]`)?.dataset.step === s,
    {},
    step,
  );
}

/** Where the action bar is: its rectangle against the viewport. */
async function barPlace(
  page: Page,
): Promise<{ top: number; bottom: number; height: number; viewport: number }> {
  return await page.$eval(`${FLOW} .flow-actions`, (e: El) => {
    const r = e.getBoundingClientRect();
    return { top: r.top, bottom: r.bottom, height: innerHeight, viewport: innerHeight };
  });
}

async function assertBarAtBottom(page: Page, where: string): Promise<void> {
  const bar = await barPlace(page);
  assert.ok(
    bar.top >= 0 && bar.bottom <= bar.viewport + 1,
    `${where}: the bar is in the viewport (${JSON.stringify(bar)})`,
  );
  assert.ok(
    bar.bottom >= bar.viewport - 48,
    `${where}: the bar is at the bottom of the viewport (${JSON.stringify(bar)})`,
  );
}

async function assertAxeClean(page: Page, where: string): Promise<void> {
  assert.deepEqual(await axeAll(page), [], `axe on ${where}`);
}

Deno.test({
  name: `guided flow: keyboard only from New policy to released, sticky bar, stepper, axe (${DRIVER})`,
  ignore: !haveChromium,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await withConsole("policy-flow", async ({ page, base, db }) => {
      const lab = await call(page, "POST", "/api/v1/node-groups", { name: "lab" });
      const office = await call(page, "POST", "/api/v1/node-groups", { name: "office" });
      for (const [name, group] of [["lab-1", lab.id], ["lab-2", lab.id], ["office-1", office.id]]) {
        const [row] = await db.query<{ id: string }>("INSERT INTO nodes (name) VALUES ($1) RETURNING id", [
          name,
        ]);
        await db.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [
          row.id,
          group,
        ]);
      }
      // The lab already receives a Firefox policy at priority 5 that also sets telemetry.
      const older = await call(page, "POST", "/api/v1/policies/all", {
        name: "Lab browser",
        type: "Firefox",
        content: JSON.stringify({ DisableTelemetry: false, DisablePocket: true }),
      });
      await call(page, "PUT", `/api/v1/policies/all/${older.id}/state`, { state: "released" });
      const olderBinding = await call(page, "POST", "/api/v1/policy-bindings", {
        policy_id: older.id,
        node_group_id: lab.id,
        priority: 5,
      });
      await call(page, "PUT", `/api/v1/policy-bindings/${olderBinding.id}`, { state: "enabled" });

      // From the policy list, by keyboard.
      await page.goto(`${base}/policies`, { waitUntil: "load" });
      await page.waitForSelector("svc-policies-page sl-button.new-policy");
      await page.focus("body");
      await tabTo(page, "sl-button.new-policy");
      await page.keyboard.press("Enter");
      await page.waitForSelector(`${FLOW} .flow-stepper`);
      assert.equal(new URL(page.url()).pathname, "/policies/new");
      assert.equal(await currentStep(page), "create");
      await assertBarAtBottom(page, "create step, 1440×900");
      await assertAxeClean(page, "the create step");
      await shot(page, SHOTS, "1-create");

      // Next without a name or type: both are named, nothing moves on.
      await tabTo(page, "sl-button.flow-next");
      await page.keyboard.press("Enter");
      await waitForText(page, `${FLOW} sl-input[name=name]`, "");
      await page.waitForFunction(() =>
        document.querySelector("svc-policy-flow-page sl-input[name=name]")?.helpText.includes(
          "Give the policy a name",
        )
      );
      assert.equal(await currentStep(page), "create");
      assert.match(await text(page, `${FLOW} .type-tiles .field-error`), /Choose what the policy manages/);

      // Name, then the Firefox tile (the first radio: Space checks it), then Next.
      await tabTo(page, "sl-input[name=name]", { back: true });
      await page.keyboard.type("Kiosk browser");
      await tabTo(page, 'input[name=type][value="Firefox"]');
      await page.keyboard.press("Space");
      await tabTo(page, "sl-button.flow-next");
      await page.keyboard.press("Enter");
      await waitForStep(page, "configure");
      // The focus starts at the step's heading.
      assert.equal(await page.evaluate(() => document.activeElement.className), "flow-step-title");

      // The Firefox form is long: the bar stays at the bottom while it scrolls.
      await page.evaluate(() => scrollTo(0, 400));
      await page.waitForFunction(() => scrollY > 100);
      await assertBarAtBottom(page, "configure step scrolled");
      await page.evaluate(() => scrollTo(0, 0));
      await assertAxeClean(page, "the configure step");
      await shot(page, SHOTS, "2-configure");

      // The JSON view by keyboard: its tab, then its text.
      await tabTo(page, 'sl-tab[panel="form"]');
      await page.keyboard.press("ArrowRight");
      await page.keyboard.press("Enter");
      await tabTo(page, "sl-textarea.json-view");
      await page.keyboard.down("Control");
      await page.keyboard.press("a");
      await page.keyboard.up("Control");
      await page.keyboard.type(JSON.stringify({ DisableTelemetry: true, DisableDeveloperTools: true }));
      await tabTo(page, "sl-button.flow-next");
      await page.keyboard.press("Enter");
      await waitForStep(page, "review");
      const draft = (await call(page, "GET", "/api/v1/policies/all?name=Kiosk")).items[0];
      assert.equal(draft.state, "draft", "the draft is saved when the settings are done");

      // Review: the settings by the names the editor gives them.
      await waitForText(page, `${FLOW} table.flow-settings`, "Turn off telemetry");
      assert.match(await text(page, `${FLOW} table.flow-settings`), /Block developer tools/);
      assert.doesNotMatch(await text(page, `${FLOW} table.flow-settings tbody th`), /^DisableTelemetry/);
      assert.equal(
        await page.$$eval(
          `${FLOW} .flow-stepper li`,
          (lis: El[]) => lis.filter((l) => l.getAttribute("aria-current") === "step").length,
        ),
        1,
        "one current step",
      );
      await assertAxeClean(page, "the review step");
      await shot(page, SHOTS, "3-review");
      await tabTo(page, "sl-button.flow-next");
      await page.keyboard.press("Enter");
      await waitForStep(page, "assign");

      // Assign: the lab, at priority 0 first — the older policy wins telemetry there.
      await page.waitForSelector(`${FLOW} .flow-group[data-group="lab"] sl-checkbox`);
      await tabTo(page, '.flow-group[data-group="lab"] sl-checkbox');
      await page.keyboard.press("Space");
      await waitForText(page, `${FLOW} .reach-preview[data-group="lab"]`, "Lab browser");
      assert.match(
        await text(page, `${FLOW} .reach-preview[data-group="lab"]`),
        /"Lab browser" wins \(priority 5 over 0\)/,
      );
      assert.match(
        await text(page, `${FLOW} .reach-preview[data-group="lab"] .reach-overlaps`),
        /Turn off telemetry: Lab browser wins over Kiosk browser/,
      );
      await tabTo(page, '.flow-group[data-group="lab"] .flow-priority');
      await page.keyboard.down("Control");
      await page.keyboard.press("a");
      await page.keyboard.up("Control");
      await page.keyboard.type("10");
      await page.keyboard.press("Tab");
      await waitForText(page, `${FLOW} .reach-preview[data-group="lab"]`, "this policy wins (priority 10)");
      assert.match(
        await text(page, `${FLOW} .reach-preview[data-group="lab"] .reach-overlaps`),
        /Turn off telemetry: Kiosk browser wins over Lab browser/,
      );
      await assertAxeClean(page, "the assign step");
      await shot(page, SHOTS, "4-assign");
      await tabTo(page, "sl-button.flow-next");
      await page.keyboard.press("Enter");
      await waitForStep(page, "release");

      // Release: groups, node counts, priority and who wins, then the primary action names the nodes.
      await waitForText(page, `${FLOW} table.flow-reach tr[data-group="lab"]`, "this policy wins");
      assert.match(
        await text(page, `${FLOW} table.flow-reach tr[data-group="lab"]`),
        /lab 2 10 Lab browser \(5\)/,
      );
      assert.equal(await text(page, `${FLOW} sl-button.flow-next`), "Release to 2 nodes");
      await assertBarAtBottom(page, "release step");
      await assertAxeClean(page, "the release step");
      await shot(page, SHOTS, "5-release");
      await tabTo(page, "sl-button.flow-next");
      await page.keyboard.press("Enter");
      await page.waitForFunction((id: string) => location.pathname === `/policies/${id}/edit`, {}, draft.id);
      const released = await call(page, "GET", `/api/v1/policies/all/${draft.id}`);
      assert.equal(released.state, "released");
      assert.equal(released.enabled_bindings_count, 1);
      const [binding] = (await call(page, "GET", `/api/v1/policy-bindings?policy_id=${draft.id}`)).items;
      assert.deepEqual([binding.node_group_name, binding.priority, binding.state], ["lab", 10, "enabled"]);
    });
  },
});

Deno.test({
  name: `guided flow: lockout guard inside the flow, unsaved-changes guard, phone layout (${DRIVER})`,
  ignore: !haveChromium,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await withConsole("policy-flow-guard", async ({ page, base, db }) => {
      const classroom = await call(page, "POST", "/api/v1/node-groups", { name: "classroom" });
      const [row] = await db.query<{ id: string }>("INSERT INTO nodes (name) VALUES ('pc-1') RETURNING id");
      await db.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [
        row.id,
        classroom.id,
      ]);

      // Opened for a type by a link, with nothing typed yet: leaving asks nothing.
      await page.goto(`${base}/policies/new?type=SessionAccess`, { waitUntil: "load" });
      await page.waitForSelector(`${FLOW} .type-tile[data-type="SessionAccess"] input:checked`);
      await page.click('.sidebar a[href="/nodes"]');
      await page.waitForFunction(() => location.pathname === "/nodes");
      assert.equal(await page.$("svc-confirm-dialog"), null, "nothing to lose, nothing asked");

      // Leaving with something typed asks first; cancelling keeps it.
      await page.goto(`${base}/policies/new?type=SessionAccess`, { waitUntil: "load" });
      await page.waitForSelector(`${FLOW} sl-input[name=name]`);
      await page.type(`${FLOW} sl-input[name=name] >>> input`, "School days");
      await page.click('.sidebar a[href="/nodes"]');
      await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
      await assertAxeClean(page, "the unsaved-changes question");
      await page.click("svc-confirm-dialog sl-button.confirm-cancel");
      await page.waitForFunction(() => !document.querySelector("svc-confirm-dialog"));
      assert.equal(new URL(page.url()).pathname, "/policies/new");
      assert.equal(await page.$eval(`${FLOW} sl-input[name=name]`, (e: El) => e.value), "School days");

      // A phone: the bar stays at the bottom, nothing is wider than the screen.
      await page.setViewport({ width: 390, height: 844 });
      await assertBarAtBottom(page, "create step on a phone");
      await assertFits(page, 390, "the create step");
      await assertAxeClean(page, "the create step on a phone");
      await shot(page, SHOTS, "phone-create");
      await page.click(`${FLOW} sl-button.flow-next`);
      await waitForStep(page, "configure");
      // Days only: nobody named may log in 20:00–08:00, which the lockout guard refuses.
      // (On a phone the bar may cover the tab: activate it as a keyboard would, not by a click at its place.)
      await page.$eval(`${FLOW} sl-tab[panel="json"]`, (e: El) => e.click());
      await page.$eval(
        `${FLOW} sl-textarea.json-view`,
        (e: El, value: string) => {
          e.value = value;
          e.dispatchEvent(new Event("sl-change", { bubbles: true }));
        },
        JSON.stringify({
          timeZone: "Europe/Berlin",
          rules: [{
            users: ["alice"],
            effect: "SESSION_ACCESS_EFFECT_ALLOW",
            windows: [{ start: "08:00", end: "20:00" }],
          }],
        }),
      );
      await page.waitForFunction(() =>
        /No problems found/.test(
          document.querySelector("svc-policy-flow-page .validation-summary")?.textContent ?? "",
        )
      );
      await shot(page, SHOTS, "phone-configure");
      await assertFits(page, 390, "the configure step");
      await assertBarAtBottom(page, "configure step on a phone");
      await page.click(`${FLOW} sl-button.flow-next`);
      await waitForStep(page, "review");
      await page.click(`${FLOW} sl-button.flow-next`);
      await waitForStep(page, "assign");
      await page.waitForSelector(`${FLOW} .flow-group[data-group="classroom"] sl-checkbox`);
      await page.click(`${FLOW} .flow-group[data-group="classroom"] sl-checkbox`);
      await waitForText(page, `${FLOW} .reach-preview[data-group="classroom"]`, "No other policy");
      await page.click(`${FLOW} sl-button.flow-next`);
      await waitForStep(page, "release");
      await assertFits(page, 390, "the release step");
      await assertAxeClean(page, "the release step on a phone");
      await shot(page, SHOTS, "phone-release");
      await page.setViewport({ width: 1440, height: 900 });

      // Release: the guard refuses, its dialog opens over the flow, and the reason lets it through.
      await page.click(`${FLOW} sl-button.flow-next`);
      await page.waitForSelector("svc-session-lockout-dialog sl-textarea.lockout-reason", { visible: true });
      assert.match(await text(page, "svc-session-lockout-dialog .lockout-message"), /classroom/);
      assert.equal(new URL(page.url()).pathname, "/policies/new", "still in the flow");
      await assertAxeClean(page, "the lockout dialog inside the flow");
      await shot(page, SHOTS, "lockout");
      await page.type(
        "svc-session-lockout-dialog sl-textarea.lockout-reason >>> textarea",
        "evening classes are off",
      );
      await page.click("svc-session-lockout-dialog sl-button.lockout-confirm");
      await page.waitForFunction(() => /^\/policies\/[0-9a-f-]+\/edit$/.test(location.pathname));
      const policy = (await call(page, "GET", "/api/v1/policies/all?name=School")).items[0];
      assert.equal(policy.state, "released");
      assert.equal(policy.enabled_bindings_count, 1);
      const overrides = await db.query<{ details: { lockout_override?: string } }>(
        "SELECT details FROM audit_logs WHERE resource_id = $1 AND details ? 'lockout_override'",
        [policy.id],
      );
      assert.ok(overrides.length >= 1, "the override is audited");
      assert.ok(overrides.every((o) => o.details.lockout_override === "evening classes are off"));
    });
  },
});
