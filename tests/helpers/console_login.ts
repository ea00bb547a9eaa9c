/**
 * The console for browser tests whose subject is not the login screen: a server to drive (in this process or
 * a real process), a Chromium page logged into it, cleaned up together ({@link withConsole}), and the pieces
 * tests of the login screen itself use (typing a login, waiting on the shell, dropping the session, calling
 * the API as the console does).
 *
 * Logging in is robust to a loaded machine: no console is loaded just to get an origin (the login call runs
 * from `/api/v1/version`, a few bytes that touch no database), the console is opened once, and its shell is
 * awaited as a condition with one generous overall deadline. Only a shell that ended in a state it cannot
 * leave by itself (the start error or the login screen) is reloaded; a slow one is never interrupted, so a
 * load that takes long still finishes instead of being restarted from scratch by a short per-attempt budget.
 */
import type { Browser, CDPSession, Page } from "puppeteer-core";
import { resolveConfig } from "../../server/config/config.ts";
import { type RunningServer, startServer } from "../../server/server.ts";
import { createLogger } from "../../server/core/log.ts";
import { type Driver, freshDb, type TestDb } from "./db.ts";
import {
  localServerSettings,
  type ServerProcess,
  type ServerProcessOptions,
  startServerProcess,
} from "./process.ts";
import { Api } from "./agent_process.ts";
import { fillField, launchChromium, pageText, type PageWatch, screenshot, watchPage } from "./browser.ts";

// deno-lint-ignore no-explicit-any
declare const document: any;

/** Logs `page` in as `username` and opens `path` once the console shell is up. */
export async function openConsoleLoggedIn(
  page: Page,
  web: string,
  credentials: Credentials,
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

/** A username and password, as the login form and `/api/v1/auth/login` take them. */
export interface Credentials {
  username: string;
  password: string;
}

/** Types `credentials` into the login page showing in `page` and submits them (Enter, as a person would). */
export async function submitLogin(page: Page, credentials: Credentials): Promise<void> {
  await fillField(page, "svc-login-page sl-input[name=username]", credentials.username);
  await fillField(page, "svc-login-page sl-input[name=password]", credentials.password);
  await page.keyboard.press("Enter");
}

/**
 * Waits until the page shows the console's shell and no login screen; when it never does, fails saying what
 * the page reads (and, given `watch`, what it did).
 */
export async function waitForConsoleShell(page: Page, watch?: PageWatch): Promise<void> {
  const shell = page.waitForFunction(() =>
    !document.querySelector("svc-login-page") && document.querySelector("header.masthead")
  );
  if (watch) await watch.explain("not logged in", shell);
  else await shell;
}

/**
 * Ends the page's session by dropping the browser's cookies and opens the login screen at `web`. A page
 * with a virtual authenticator passes that authenticator's DevTools session (`cdp`), which must stay.
 */
export async function dropSession(page: Page, web: string, cdp?: CDPSession): Promise<void> {
  const session = cdp ?? await page.createCDPSession();
  await session.send("Network.clearBrowserCookies");
  if (!cdp) await session.detach();
  await page.goto(`${web}/`, { waitUntil: "load" });
  await page.waitForSelector("svc-login-page sl-input[name=username]", { visible: true });
}

/** What the API answered a call from the page: status, parsed JSON body (undefined when empty or not JSON), text. */
export interface ApiAnswer {
  status: number;
  // deno-lint-ignore no-explicit-any
  json: any;
  /** The body as the server sent it (what a test of a non-JSON answer, an export, reads). */
  text: string;
}

/**
 * Calls the API from the logged-in page as the console does (its cookies and the CSRF header) and answers
 * whatever the server answered; the caller asserts the status it expects. With `refreshOnce`, a 401 is
 * followed by one `/api/v1/auth/refresh` and the call again, as the console does when its access token ran
 * out (call it only while the console is idle, so the two refreshes cannot race).
 */
export async function callApi(
  page: Page,
  method: string,
  path: string,
  body?: unknown,
  options: { refreshOnce?: boolean } = {},
): Promise<ApiAnswer> {
  const res = await page.evaluate(
    async (m: string, p: string, b: string | undefined, refreshOnce: boolean) => {
      const send = () => {
        const csrf = document.cookie.split(";").map((c: string) => c.trim())
          .find((c: string) => c.startsWith("svc_csrf="))?.slice(9) ?? "";
        return fetch(p, {
          method: m,
          headers: { "content-type": "application/json", "x-csrf-token": decodeURIComponent(csrf) },
          body: b,
        });
      };
      let r = await send();
      if (refreshOnce && r.status === 401 && (await fetch("/api/v1/auth/refresh", { method: "POST" })).ok) {
        r = await send();
      }
      return { status: r.status, text: await r.text() };
    },
    method,
    path,
    body === undefined ? undefined : JSON.stringify(body),
    options.refreshOnce ?? false,
  );
  let json;
  try {
    json = res.text ? JSON.parse(res.text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text: res.text };
}

/** {@link callApi} for a call that must succeed (a status under 300): its JSON body, or a failure naming it. */
// deno-lint-ignore no-explicit-any
export async function callApiOk(page: Page, method: string, path: string, body?: unknown): Promise<any> {
  const answer = await callApi(page, method, path, body);
  if (answer.status >= 300) throw new Error(`${method} ${path}: ${answer.status} ${answer.text}`);
  return answer.json;
}

/** A server a browser test drives: the console's origin, the admin's password, and how to stop it. */
export interface ConsoleServer {
  /** `https://localhost:<port>`: the console's origin (passkeys need `localhost`, not an address). */
  web: string;
  adminPassword: string;
  /** Stops it and removes what it made (data directory, test database). */
  stop(): Promise<void>;
}

/** Options of {@link startConsoleServer}. */
export interface ConsoleServerOptions {
  /** Added to {@link localServerSettings} (an admin password is made up unless given here). */
  settings?: Record<string, unknown>;
  /** A fresh test database of this driver (default pglite), or `"own"`: the server opens its data dir's. */
  database?: Driver | "own";
}

/** svc-server running in this process, whose context the test may reach into. */
export interface InProcessConsoleServer extends ConsoleServer {
  running: RunningServer;
  dataDir: string;
  /** The test database, unless the server opened its own. */
  database?: TestDb;
}

/** Starts svc-server in this process on free ports, a temporary data directory and a fresh database. */
export async function startConsoleServer(
  options: ConsoleServerOptions = {},
): Promise<InProcessConsoleServer> {
  const adminPassword = String(
    options.settings?.["security.admin_password"] ?? `Admin-Passw0rd-${crypto.randomUUID().slice(0, 8)}`,
  );
  const dataDir = await Deno.makeTempDir({ prefix: "svc-console-test-" });
  const config = resolveConfig(
    localServerSettings(dataDir, { "security.admin_password": adminPassword, ...options.settings }),
    {},
  );
  const wanted = options.database ?? "pglite";
  const database = wanted === "own" ? undefined : await freshDb(wanted);
  try {
    const running = await startServer(config, {
      db: database?.db,
      log: createLogger("warn"),
      print: () => {},
    });
    return {
      web: `https://localhost:${running.ports.web}`,
      adminPassword,
      running,
      dataDir,
      database,
      async stop() {
        await running.stop();
        await database?.dispose();
        await Deno.remove(dataDir, { recursive: true }).catch(() => {});
      },
    };
  } catch (err) {
    await database?.dispose();
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    throw err;
  }
}

/** svc-server as a real process (see {@link startServerProcess}). */
export interface ProcessConsoleServer extends ConsoleServer {
  process: ServerProcess;
}

/** Starts svc-server as a real process with `options` and reads the admin password it made up. */
export async function startConsoleServerProcess(
  options: ServerProcessOptions = {},
): Promise<ProcessConsoleServer> {
  const process = await startServerProcess(options);
  try {
    return {
      web: `https://localhost:${process.webPort}`,
      adminPassword: await process.adminPassword(),
      process,
      async stop() {
        await process.stop();
        await Deno.remove(process.dataDir, { recursive: true }).catch(() => {});
      },
    };
  } catch (err) {
    await process.stop();
    throw err;
  }
}

/** Options of {@link withConsole}. */
export interface ConsoleOptions {
  /** Log the page in as admin and open this path (default `/`); `false`: leave it blank, logged out. */
  path?: string | false;
  /** Default 1280×1100: a desktop screen on which a settings page and its dialogs fit. */
  viewport?: { width: number; height: number };
  /** The page's default wait (a generous one: waits end on their condition, this only bounds a failure). */
  timeoutMs?: number;
  /**
   * When the test fails, a screenshot of the page goes to `test-artifacts/<failureShot>/failure.png` and the
   * end of what the page read is printed, for whoever reads the failure.
   */
  failureShot?: string;
}

/** What {@link withConsole} hands a test. */
export interface ConsoleSession<S extends ConsoleServer> {
  server: S;
  browser: Browser;
  page: Page;
  /** What the page did, watched from before it loaded anything. */
  watch: PageWatch;
  /**
   * Logs the page in (as admin unless `as` says who) and opens `path` (default `/`), as {@link withConsole}
   * does by itself unless told `path: false`: for tests that set up what the page must see first.
   */
  logIn(options?: { path?: string; as?: Credentials }): Promise<void>;
}

/**
 * Runs `test` with Chromium on `server`: a page watched from the start, logged in as admin at `options.path`
 * unless that is `false`. Chromium and the server are stopped afterwards, whatever happened.
 */
export async function withConsole<S extends ConsoleServer>(
  server: S,
  options: ConsoleOptions,
  test: (session: ConsoleSession<S>) => Promise<void>,
): Promise<void> {
  let chromium: Awaited<ReturnType<typeof launchChromium>> | undefined;
  try {
    chromium = await launchChromium();
    const page = await chromium.browser.newPage();
    page.setDefaultTimeout(options.timeoutMs ?? 120_000);
    await page.setViewport(options.viewport ?? { width: 1280, height: 1100 });
    const watch = watchPage(page);
    const admin = { username: "admin", password: server.adminPassword };
    const logIn = async ({ path, as }: { path?: string; as?: Credentials } = {}) =>
      await openConsoleLoggedIn(page, server.web, as ?? admin, { path });
    if (options.path !== false) await logIn({ path: options.path });
    try {
      await test({ server, browser: chromium.browser, page, watch, logIn });
    } catch (err) {
      if (options.failureShot) {
        await screenshot(page, options.failureShot, "failure").catch(() => {});
        const text = await pageText(page).catch(() => "");
        console.error(`the page read, when the test failed: …${text.slice(-2500)}`);
      }
      throw err;
    }
  } finally {
    await chromium?.close();
    await server.stop();
  }
}

/** What {@link withConsoleProcess} hands a test: a {@link ConsoleSession} and the admin's REST client. */
export interface ProcessConsoleSession extends ConsoleSession<ProcessConsoleServer> {
  /** The REST API as the admin, from the test (logged in on first use, closed afterwards). */
  api(): Promise<Api>;
}

/**
 * {@link withConsole} on svc-server as a real process started with `options.server`
 * ({@link startConsoleServerProcess}), with the admin's REST client at hand for what the test sets up or
 * checks outside the page.
 */
export async function withConsoleProcess(
  options: ConsoleOptions & { server?: ServerProcessOptions },
  test: (session: ProcessConsoleSession) => Promise<void>,
): Promise<void> {
  const server = await startConsoleServerProcess(options.server);
  let api: Promise<Api> | undefined;
  try {
    await withConsole(server, options, async (session) => {
      await test({ ...session, api: () => api ??= Api.login(server.process) });
    });
  } finally {
    await api?.then((a) => a.close(), () => {});
  }
}
