/**
 * The shared browser-test helpers hold what the browser tests lean on them for: the skip rule names what is
 * missing; `watchPage` records a CSP violation and an uncaught error (so the tests asserting none can fail);
 * axe at every impact reports what the serious-only view leaves out.
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
