/**
 * Logging a browser page into the console for tests whose subject is not the login screen, robust to a loaded
 * machine: no console is loaded just to get an origin (the login call runs from `/api/v1/version`, a few
 * bytes that touch no database), the console is opened once, and its shell is awaited as a condition with one
 * generous overall deadline. Only a shell that ended in a state it cannot leave by itself (the start error
 * or the login screen) is reloaded; a slow one is never interrupted, so a load that takes long still
 * finishes instead of being restarted from scratch by a short per-attempt budget.
 */
import type { Page } from "puppeteer-core";

// deno-lint-ignore no-explicit-any
declare const document: any;

/** Logs `page` in as `username` and opens `path` once the console shell is up. */
export async function openConsoleLoggedIn(
  page: Page,
  web: string,
  credentials: { username: string; password: string },
  options: { path?: string; deadlineMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + (options.deadlineMs ?? 300_000);
  const left = () => Math.max(1_000, deadline - Date.now());
  await page.goto(`${web}/api/v1/version`, { waitUntil: "domcontentloaded", timeout: left() });
  const status = await page.evaluate(async (body: string) => {
    const res = await fetch("/api/v1/auth/login", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    return res.status;
  }, JSON.stringify(credentials));
  if (status !== 200) throw new Error(`logging in as ${credentials.username} answered ${status}`);
  await page.goto(`${web}${options.path ?? "/"}`, { waitUntil: "domcontentloaded", timeout: left() });
  for (let reloads = 0;; reloads++) {
    const handle = await page.waitForFunction(
      (): string | false => {
        const app = document.querySelector("svc-app");
        const masthead = app?.querySelector(".masthead");
        if (masthead && masthead.checkVisibility()) return "ready";
        if (app?.querySelector("svc-login-page")) return "login";
        if (app?.querySelector("main.start-error")) return "error";
        return false;
      },
      { timeout: left(), polling: 250 },
    );
    const state = String(await handle.jsonValue());
    if (state === "ready") return;
    if (Date.now() >= deadline || reloads === 5) {
      throw new Error(`the console shell did not come up after logging in (it shows ${state})`);
    }
    await page.reload({ waitUntil: "domcontentloaded", timeout: left() });
  }
}
