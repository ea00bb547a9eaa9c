/**
 * Debian's Chromium for browser tests: the one rule for skipping where it is missing, launching it headless
 * on a throw-away profile, axe-core's findings on a page (serious and critical only, or of every impact;
 * injected through DevTools, so the console's CSP stays intact), what a page did while a test drove it (API
 * calls, errors, CSP violations) for assertions and for failure messages that show it, typing into fields and
 * choosing from selects, screenshots, and the DevTools virtual authenticator for passkey tests.
 */
import puppeteer, { type Browser, type CDPSession, type Page, type Protocol } from "puppeteer-core";

/** Where Debian installs Chromium. */
export const CHROMIUM = "/usr/bin/chromium";

/** Whether this machine has it (browser tests are skipped, saying so, when it does not). */
export const haveChromium = await Deno.stat(CHROMIUM).then(() => true, () => false);

/**
 * The shared skip rule: whether the browser test `what` must be skipped here, because Chromium (or one of
 * the other programs it `alsoNeeds`, by path) is missing. When it must, it says so once, naming what is
 * missing and how to get it; pass the answer as the test's `ignore`.
 */
export function browserTestSkipped(what: string, alsoNeeds: string[] = []): boolean {
  const missing = [CHROMIUM, ...alsoNeeds].filter((path) => {
    try {
      Deno.statSync(path);
      return false;
    } catch {
      return true;
    }
  });
  if (missing.length > 0) {
    console.warn(`${what} skipped: needs ${missing.join(" and ")} (Debian packages; .ci/run installs them)`);
  }
  return missing.length > 0;
}

/**
 * Declares the browser test `name`: `ignore` is the skip rule's answer ({@link browserTestSkipped}), and
 * Deno's op and resource sanitizers are off, since Chromium and the servers it drives run beside the test's
 * awaits by design (the helpers that start them stop them).
 */
export function browserTest(name: string, ignore: boolean, fn: (t: Deno.TestContext) => Promise<void>): void {
  Deno.test({ name, ignore, sanitizeOps: false, sanitizeResources: false, fn });
}

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

/**
 * Serious and critical axe-core violations on the page as it is now (id and up to five targets each); with
 * `afterToasts`, once its toasts have settled ({@link toastsSettled}).
 */
export async function seriousAxeViolations(
  page: Page,
  options: { afterToasts?: boolean } = {},
): Promise<Array<{ id: string; targets: unknown[] }>> {
  if (options.afterToasts) await toastsSettled(page);
  return (await axeViolations(page))
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map(({ id, targets }) => ({ id, targets }));
}

/** One axe-core violation: rule, impact, what the rule asks for and up to five targets. */
export interface AxeViolation {
  id: string;
  impact: string;
  help: string;
  targets: unknown[];
}

/**
 * Waits until no toast is between open and gone: a closing toast is aria-hidden while its close button still
 * exists for the length of its hide animation, which axe reports; check a page with toasts once they settle.
 */
export async function toastsSettled(page: Page): Promise<void> {
  await page.waitForFunction(
    () => ![...document.querySelectorAll(".sl-toast-stack sl-alert")].some((a: { open: boolean }) => !a.open),
    { polling: 250 },
  );
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
    return r.violations.map((
      v: { id: string; impact: string; help: string; nodes: { target: unknown }[] },
    ) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      targets: v.nodes.slice(0, 5).map((n) => n.target),
    }));
  });
}

/** The text a person reads on the page now (the body's `innerText`). */
export async function pageText(page: Page): Promise<string> {
  return await page.evaluate(() => document.body.innerText as string);
}

/**
 * How {@link typeInto} types: `centred` scrolls the input to the middle of the viewport first (fixed bars and
 * toasts sit at its edges); `tab` presses Tab afterwards, leaving the field as a person does.
 */
export interface TypingOptions {
  centred?: boolean;
  tab?: boolean;
}

/**
 * Waits for the input `selector` names to be visible, selects what it holds and types `value` as a person
 * would (key by key, so the page's own input handlers run).
 */
export async function typeInto(
  page: Page,
  selector: string,
  value: string,
  options: TypingOptions = {},
): Promise<void> {
  const input = await page.waitForSelector(selector, { visible: true });
  if (options.centred) {
    await input!.evaluate((e: { scrollIntoView(o: unknown): void }) => e.scrollIntoView({ block: "center" }));
  }
  await input!.click({ count: 3 });
  await input!.type(value);
  if (options.tab) await page.keyboard.press("Tab");
}

/** {@link typeInto} the native input inside the Shoelace field `host` (an `sl-input` selector). */
export async function fillField(
  page: Page,
  host: string,
  value: string,
  options: TypingOptions = {},
): Promise<void> {
  await typeInto(page, `${host} >>> input`, value, options);
}

/** The text content of the first element matching `selector` (as it is, white space kept). */
export async function textOf(page: Page, selector: string): Promise<string> {
  return await page.$eval(selector, (e) => e.textContent ?? "");
}

/**
 * Opens the Shoelace select `select` and clicks its option whose text contains `text`, as a person would. A
 * click that lands while the form is still moving (a section opening) is retried; it returns once the select
 * has closed and its list is gone (the list fades out over what lies below it).
 */
export async function chooseOption(page: Page, select: string, text: string): Promise<void> {
  for (let attempt = 0;; attempt++) {
    const host = await page.waitForSelector(select, { visible: true });
    // Centred: toasts stack at the bottom right of the viewport, and the guided flow's action bar is there.
    await host!.evaluate((e: { scrollIntoView(o: unknown): void }) => e.scrollIntoView({ block: "center" }));
    await page.click(`${select} >>> .select__combobox`);
    const opened = await page.waitForFunction((sel: string) => document.querySelector(sel)?.open === true, {
      timeout: 1000,
    }, select).then(() => true, () => false);
    if (opened) break;
    if (attempt === 3) throw new Error(`${select} does not open`);
  }
  const option = await page.waitForFunction(
    (sel: string, t: string) => {
      const found = [...document.querySelector(sel).querySelectorAll("sl-option")]
        .find((o: { textContent: string }) => o.textContent.includes(t));
      return found && found.getBoundingClientRect().height > 0 ? found : null;
    },
    {},
    select,
    text,
  );
  await option.asElement()!.click();
  await page.waitForFunction(
    (sel: string) => {
      const el = document.querySelector(sel);
      return !el?.open && !el?.shadowRoot?.querySelector("sl-popup")?.active;
    },
    {},
    select,
  );
}

/** Saves a full-page screenshot of `page` as `test-artifacts/<folder>/<name>.png`. */
export async function screenshot(page: Page, folder: string, name: string): Promise<void> {
  const dir = new URL(`../../test-artifacts/${folder}/`, import.meta.url);
  await Deno.mkdir(dir, { recursive: true });
  await page.screenshot({ path: new URL(`${name}.png`, dir).pathname, fullPage: true });
}

/** What a page did since {@link watchPage}, in order, and waits whose failure shows it. */
export interface PageWatch {
  /** Every response to an `/api/` request: `METHOD /path status`. */
  apiCalls: string[];
  /** The same responses with their query string (`path` is path and search), for tests that read it. */
  apiResponses: Array<{ method: string; path: string; status: number }>;
  /** Uncaught errors in the page. */
  pageErrors: string[];
  /** Console messages reporting a Content Security Policy violation. */
  cspViolations: string[];
  /** All of the above and every console message, in order: what a failure message shows. */
  log: string[];
  /**
   * Awaits `pending`; when it fails, throws an error saying `what` went wrong, what the page reads now and
   * {@link PageWatch.log}, so a failed wait explains itself.
   */
  explain<T>(what: string, pending: Promise<T>): Promise<T>;
  /** Waits for `selector` to be visible; when it never is, fails saying `what` as {@link PageWatch.explain}. */
  visible(selector: string, what: string): Promise<void>;
}

/** Starts recording what `page` does (call it before the page loads what the test watches). */
export function watchPage(page: Page): PageWatch {
  const watch: PageWatch = {
    apiCalls: [],
    apiResponses: [],
    pageErrors: [],
    cspViolations: [],
    log: [],
    async explain<T>(what: string, pending: Promise<T>): Promise<T> {
      try {
        return await pending;
      } catch (err) {
        const text = await pageText(page).catch((e) => `(unreadable: ${e})`);
        throw new Error(`${what}; the page says: ${text}; log: ${watch.log.join(", ")}`, { cause: err });
      }
    },
    async visible(selector: string, what: string): Promise<void> {
      await watch.explain(what, page.waitForSelector(selector, { visible: true }));
    },
  };
  page.on("response", (r) => {
    if (!r.url().includes("/api/")) return;
    const url = new URL(r.url());
    const call = `${r.request().method()} ${url.pathname} ${r.status()}`;
    watch.apiCalls.push(call);
    watch.apiResponses.push({
      method: r.request().method(),
      path: url.pathname + url.search,
      status: r.status(),
    });
    watch.log.push(call);
  });
  page.on("pageerror", (err) => {
    watch.pageErrors.push(String(err));
    watch.log.push(`pageerror: ${err}`);
  });
  page.on("console", (m) => {
    if (/Content Security Policy/i.test(m.text())) watch.cspViolations.push(m.text());
    watch.log.push(`console: ${m.text()}`);
  });
  return watch;
}

/** A DevTools virtual authenticator attached to a page, and the DevTools session that holds it. */
export interface VirtualAuthenticator {
  /** The session it lives in (it goes away with it: use this one for other DevTools calls on the page). */
  cdp: CDPSession;
  authenticatorId: string;
  /** The credentials it holds now. */
  credentials(): Promise<Protocol.WebAuthn.Credential[]>;
}

/**
 * Gives `page` a platform authenticator that makes passkeys: CTAP2, internal transport, resident keys, user
 * verification that always succeeds.
 */
export async function addVirtualAuthenticator(page: Page): Promise<VirtualAuthenticator> {
  const cdp = await page.createCDPSession();
  await cdp.send("WebAuthn.enable");
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2",
      transport: "internal",
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
    },
  });
  return {
    cdp,
    authenticatorId,
    async credentials() {
      return (await cdp.send("WebAuthn.getCredentials", { authenticatorId })).credentials;
    },
  };
}
