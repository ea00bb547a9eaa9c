/**
 * The shared browser-test helpers hold what the browser tests lean on them for: the skip rule names what is
 * missing; `watchPage` records a CSP violation and an uncaught error (so the tests asserting none can fail);
 * axe at every impact reports what the serious-only view leaves out. And the browser tests do lean on them:
 * no file under tests/web launches Chromium, injects axe-core or calls the API with the CSRF cookie itself.
 */
import assert from "node:assert/strict";
import {
  axeViolations,
  browserTestSkipped,
  haveChromium,
  launchChromium,
  seriousAxeViolations,
  watchPage,
} from "../helpers/browser.ts";

Deno.test("the skip rule skips a browser test when a program it needs is missing, naming it", () => {
  const warned: string[] = [];
  const warn = console.warn;
  console.warn = (text: string) => warned.push(text);
  try {
    assert.equal(browserTestSkipped("the gadget test", ["/nonexistent/gadget"]), true);
    assert.equal(browserTestSkipped("the shell test", ["/bin/sh"]), !haveChromium);
  } finally {
    console.warn = warn;
  }
  assert.match(warned[0], /^the gadget test skipped: needs .*\/nonexistent\/gadget/);
  assert.equal(warned.length, haveChromium ? 1 : 2, "nothing is said when nothing is missing");
});

/**
 * What a file under tests/web must leave to tests/helpers (browser.ts, console_login.ts): each pattern with
 * the helper to use instead. Types from puppeteer-core (`import type`) are fine.
 */
const OWN_MACHINERY: Array<[RegExp, string]> = [
  [
    /^import\s+(?!type\b)[^;]*?from\s+["']puppeteer-core["']/ms,
    "imports puppeteer-core, not only its types: use launchChromium or withConsole (browser.ts, console_login.ts)",
  ],
  [
    /puppeteer\.(launch|connect)\(|executablePath/,
    "launches Chromium: use launchChromium or withConsole (browser.ts, console_login.ts)",
  ],
  [
    /["'/]axe-core["'/]|axe\.min\.js|\baxe\.run\(/,
    "injects axe-core: use axeViolations or seriousAxeViolations (browser.ts)",
  ],
  [/svc_csrf=/, "calls the API with the CSRF cookie: use callApi or callApiOk (console_login.ts)"],
];

/** What of `OWN_MACHINERY` the source `text` does, each with the helper to use instead. */
function ownMachinery(text: string): string[] {
  return OWN_MACHINERY.filter(([pattern]) => pattern.test(text)).map(([, what]) => what);
}

Deno.test("the guard sees a file that launches Chromium, injects axe or calls the API by itself", () => {
  assert.deepEqual(
    ownMachinery('import type { Page } from "puppeteer-core";\nimport { x } from "./y.ts";'),
    [],
  );
  assert.equal(ownMachinery('import puppeteer, { type Page } from "puppeteer-core";').length, 1);
  assert.equal(ownMachinery("const b = await puppeteer.launch({ executablePath: C });").length, 1);
  assert.equal(
    ownMachinery('await Deno.readTextFile(new URL("../../node_modules/axe-core/axe.min.js", u));').length,
    1,
  );
  assert.equal(ownMachinery('.find((c) => c.startsWith("svc_csrf="))').length, 1);
});

Deno.test("no browser test under tests/web launches Chromium, injects axe or calls the API by itself", async () => {
  const dir = new URL("./", import.meta.url);
  const found: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (!entry.isFile || !entry.name.endsWith(".ts") || entry.name === "browser_helpers_test.ts") continue;
    const text = await Deno.readTextFile(new URL(entry.name, dir));
    found.push(...ownMachinery(text).map((what) => `tests/web/${entry.name}: ${what}`));
  }
  assert.deepEqual(found.sort(), [], "browser tests run on tests/helpers/browser.ts and console_login.ts");
});

Deno.test({
  name: "watchPage records CSP violations and page errors; axe at every impact sees what serious-only drops",
  ignore: browserTestSkipped("the browser helpers test"),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const chromium = await launchChromium();
    try {
      const page = await chromium.browser.newPage();
      const watch = watchPage(page);
      // No landmark and no heading (moderate findings) and an image without a text alternative (critical).
      // Settled once the watch holds both (its listeners were added first, so they have run).
      let timer: ReturnType<typeof setTimeout> | undefined;
      const recorded = Promise.race([
        new Promise<void>((resolve) => {
          const check = () => {
            if (watch.cspViolations.length > 0 && watch.pageErrors.length > 0) resolve();
          };
          page.on("console", check);
          page.on("pageerror", check);
        }),
        new Promise((_, reject) => timer = setTimeout(() => reject(new Error("not within 60 s")), 60_000)),
      ]);
      await page.setContent(
        `<html lang="en"><head><title>t</title><meta http-equiv="Content-Security-Policy"
          content="script-src 'none'"></head><body><p>text</p><img src="data:,">
          <script>document.title = "ran";</script></body></html>`,
      );
      await page.evaluate(() =>
        setTimeout(() => {
          throw new Error("boom");
        })
      );
      await watch.explain("no CSP violation or page error recorded", recorded).finally(() =>
        clearTimeout(timer)
      );
      assert.match(watch.cspViolations[0], /Content Security Policy/);
      assert.match(watch.pageErrors[0], /boom/);
      assert.ok(watch.log.length >= 2, "the log holds both, for failure messages");

      const all = await axeViolations(page);
      const serious = await seriousAxeViolations(page);
      assert.ok(all.some((v) => v.id === "image-alt" && v.impact === "critical"), JSON.stringify(all));
      assert.ok(all.some((v) => v.impact === "moderate"), JSON.stringify(all));
      assert.deepEqual(
        serious.map((v) => v.id),
        all.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => v.id),
      );
      assert.ok(serious.length < all.length, "serious-only leaves the moderate findings out");
    } finally {
      await chromium.close();
    }
  },
});
