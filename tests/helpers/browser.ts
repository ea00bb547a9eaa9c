/**
 * Debian's Chromium for browser tests: launching it headless on a throw-away profile, and axe-core's findings
 * on a page, serious and critical only or of every impact (injected through DevTools, so the console's CSP
 * stays intact).
 */
import puppeteer, { type Browser, type Page } from "puppeteer-core";

/** Where Debian installs Chromium. */
export const CHROMIUM = "/usr/bin/chromium";

/** Whether this machine has it (browser tests are skipped, saying so, when it does not). */
export const haveChromium = await Deno.stat(CHROMIUM).then(() => true, () => false);

const AXE_SOURCE = await Deno.readTextFile(
  new URL("../../node_modules/axe-core/axe.min.js", import.meta.url),
);

// deno-lint-ignore no-explicit-any
declare const document: any;

/** A headless Chromium on its own profile; `close()` ends it and removes the profile. */
export async function launchChromium(): Promise<{ browser: Browser; close(): Promise<void> }> {
  const profile = await Deno.makeTempDir({ prefix: "svc-chromium-" });
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      `--user-data-dir=${profile}`,
      "--ignore-certificate-errors",
    ],
  });
  return {
    browser,
    async close() {
      await browser.close();
      await Deno.remove(profile, { recursive: true }).catch(() => {});
    },
  };
}

/** Serious and critical axe-core violations on the page as it is now (id and up to five targets each). */
export async function seriousAxeViolations(page: Page): Promise<Array<{ id: string; targets: unknown[] }>> {
  await page.evaluate(AXE_SOURCE);
  return await page.evaluate(async () => {
    // deno-lint-ignore no-explicit-any
    const r = await (globalThis as any).axe.run(document, { resultTypes: ["violations"] });
    return r.violations
      .filter((v: { impact: string }) => v.impact === "serious" || v.impact === "critical")
      .map((v: { id: string; nodes: { target: unknown }[] }) => ({
        id: v.id,
        targets: v.nodes.slice(0, 5).map((n) => n.target),
      }));
  });
}

/** One axe-core violation: rule, impact and up to five targets. */
export interface AxeViolation {
  id: string;
  impact: string;
  targets: unknown[];
}

/**
 * Every axe-core violation on the page as it is now, whatever its impact (minor, moderate, serious,
 * critical): screens that claim to be clean are held to all of them.
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  return await page.evaluate(async () => {
    // deno-lint-ignore no-explicit-any
    const r = await (globalThis as any).axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v: { id: string; impact: string; nodes: { target: unknown }[] }) => ({
      id: v.id,
      impact: v.impact,
      targets: v.nodes.slice(0, 5).map((n) => n.target),
    }));
  });
}
