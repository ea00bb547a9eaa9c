/**
 * What the console flow and fleet browser tests share: an in-process server on a fresh database with a page
 * logged in as the admin, API calls from that page (cookies and CSRF header, as the console makes them),
 * axe held to every impact once toasts have settled, keyboard focus that follows into shadow roots, and
 * screenshots.
 */
import assert from "node:assert/strict";
import type { Browser, Page } from "puppeteer-core";
import { DRIVERS } from "../helpers/db.ts";
import type { Db } from "../../server/db/db.ts";
import { type AxeViolation, axeViolations } from "../helpers/browser.ts";
import { startConsoleServer, withConsole as withBrowserConsole } from "../helpers/console_login.ts";

/** The driver the browser tests run on (PostgreSQL when configured, else PGlite). */
export const DRIVER = DRIVERS[DRIVERS.length - 1];
export const ADMIN_PASSWORD = "Admin-Passw0rd-for-console-tests";

// Functions passed to page.evaluate run in the browser; the tests are type-checked without the DOM library.
// deno-lint-ignore no-explicit-any
declare const document: any;
// deno-lint-ignore no-explicit-any
export type El = any;

/** A running console: the page, its origin, the database and the browser (for more pages). */
export interface Console {
  page: Page;
  base: string;
  db: Db;
  browser: Browser;
}

/**
 * Runs `fn` with an in-process server on a fresh database and a 1440×900 console page logged in as the
 * admin (tests/helpers/console_login.ts); `settings` adds to the server's configuration. A failure leaves a
 * screenshot of the page under `test-artifacts/<prefix>/failure.png`.
 */
export async function withConsole(
  prefix: string,
  fn: (c: Console) => Promise<void>,
  settings: Record<string, unknown> = {},
): Promise<void> {
  const server = await startConsoleServer({
    settings: { "security.admin_password": ADMIN_PASSWORD, ...settings },
    database: DRIVER,
  });
  await withBrowserConsole(
    server,
    { viewport: { width: 1440, height: 900 }, timeoutMs: 60_000, failureShot: prefix },
    async (s) => await fn({ page: s.page, base: server.web, db: server.database!.db, browser: s.browser }),
  );
}

/** Calls the API from the logged-in page (cookies and the CSRF header, as the console does); must succeed. */
export { callApiOk as call } from "../helpers/console_login.ts";

/** Saves a full-page screenshot under `test-artifacts/<folder>/`. */
export { screenshot as shot } from "../helpers/browser.ts";

/**
 * Every axe violation, any impact, once no toast is between open and gone (a closing toast is aria-hidden)
 * and no finite animation runs (a dialog fading in has text of low contrast for a moment).
 */
export async function axeAll(page: Page): Promise<AxeViolation[]> {
  await page.waitForFunction(() => {
    if ([...document.querySelectorAll(".sl-toast-stack sl-alert")].some((a: { open: boolean }) => !a.open)) {
      return false;
    }
    // Animations run inside shadow roots too (a dialog's panel): walk them all.
    const running = (root: El): boolean =>
      [...root.querySelectorAll("*")].some((e: El) =>
        e.getAnimations().some((a: El) =>
          a.playState === "running" && a.effect?.getComputedTiming().iterations !== Infinity
        ) || (e.shadowRoot && running(e.shadowRoot))
      );
    return !running(document);
  });
  return await axeViolations(page);
}

/**
 * Presses Tab (Shift+Tab with `back`) until the focused element — followed into shadow roots — or one of its
 * hosts matches `selector`; fails after `limit` presses naming where the focus went.
 */
export async function tabTo(page: Page, selector: string, options: { back?: boolean; limit?: number } = {}) {
  const seen: string[] = [];
  for (let i = 0; i < (options.limit ?? 80); i++) {
    if (options.back) {
      await page.keyboard.down("Shift");
      await page.keyboard.press("Tab");
      await page.keyboard.up("Shift");
    } else {
      await page.keyboard.press("Tab");
    }
    const where = await page.evaluate((sel: string) => {
      const chain: El[] = [];
      let el: El = document.activeElement;
      while (el) {
        chain.push(el);
        el = el.shadowRoot?.activeElement;
      }
      const hit = chain.some((e) => e.matches?.(sel)) ||
        chain.some((e) => e.closest?.(sel));
      const last = chain[chain.length - 1];
      return {
        hit,
        name: last ? `${last.tagName.toLowerCase()}.${String(last.className).slice(0, 40)}` : "none",
      };
    }, selector);
    if (where.hit) return;
    seen.push(where.name);
  }
  assert.fail(`Tab never reached ${selector}; focus went through ${seen.slice(-12).join(" → ")}`);
}

/** The text of the first element matching `selector`, white space collapsed. */
export async function text(page: Page, selector: string): Promise<string> {
  return await page.$eval(selector, (e: El) => e.textContent.replace(/\s+/g, " ").trim());
}

/** Waits until the first element matching `selector` contains `expected` (text, white space collapsed). */
export async function waitForText(page: Page, selector: string, expected: string | RegExp): Promise<void> {
  const source = expected instanceof RegExp
    ? expected.source
    : expected.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  await page.waitForFunction(
    (sel: string, src: string) => {
      const t = document.querySelector(sel)?.textContent?.replace(/\s+/g, " ") ?? "";
      return new RegExp(src).test(t);
    },
    {},
    selector,
    source,
  );
}

/** Fails naming the widest elements when the page scrolls sideways at `width`. */
export async function assertFits(page: Page, width: number, where: string): Promise<void> {
  const scroll = await page.evaluate(() => document.documentElement.scrollWidth);
  if (scroll <= width) return;
  const wide = await page.evaluate((w: number) =>
    [...document.querySelectorAll("svc-app *")]
      .filter((e: El) => e.getBoundingClientRect().right > w + 2)
      .slice(-8)
      .map((e: El) => `${e.tagName.toLowerCase()}.${String(e.className).slice(0, 30)}`), width);
  assert.fail(`${where} is ${scroll} px wide at ${width} px: ${wide.join(", ")}`);
}
