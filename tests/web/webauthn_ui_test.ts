/**
 * Security keys in Debian's Chromium against a real svc-server process, with the DevTools virtual
 * authenticator (CTAP2, internal transport, resident keys, user verification): register a passkey in
 * Settings (step-up with the password), log out, log in with password then the key, log in with the passkey
 * alone, and remove it (step-up with password and the key).
 */
import assert from "node:assert/strict";
import puppeteer, { type CDPSession, type Page } from "puppeteer-core";
import { startServerProcess } from "../helpers/process.ts";

const CHROMIUM = "/usr/bin/chromium";
const haveChromium = await Deno.stat(CHROMIUM).then(() => true, () => false);
if (!haveChromium) {
  console.warn("WebAuthn browser test skipped: needs Debian's chromium at /usr/bin/chromium");
}

// deno-lint-ignore no-explicit-any
declare const document: any;

const calls: string[] = [];

async function fill(page: Page, host: string, value: string): Promise<void> {
  const input = await page.waitForSelector(`${host} >>> input`, { visible: true });
  await input!.click({ count: 3 });
  await input!.type(value);
}

async function loggedIn(page: Page): Promise<void> {
  try {
    await page.waitForFunction(() =>
      !document.querySelector("svc-login-page") && document.querySelector("header.masthead")
    );
  } catch (err) {
    const text = await page.$eval("body", (b: { innerText: string }) => b.innerText);
    throw new Error(`not logged in; the page says: ${text}; calls: ${calls.join(", ")}`, { cause: err });
  }
}

/** Logs out by dropping the cookies, through the session that holds the virtual authenticator. */
async function loggedOut(page: Page, cdp: CDPSession, base: string): Promise<void> {
  await cdp.send("Network.clearBrowserCookies");
  await page.goto(`${base}/`, { waitUntil: "load" });
  await page.waitForSelector("svc-login-page sl-input[name=username]", { visible: true });
}

async function waitText(page: Page, selector: string, what: string): Promise<void> {
  try {
    await page.waitForSelector(selector, { visible: true });
  } catch (err) {
    const text = await page.$eval("body", (b: { innerText: string }) => b.innerText);
    throw new Error(`${what}: the page says: ${text}; calls: ${calls.join(", ")}`, { cause: err });
  }
}

Deno.test({
  name: "Passkeys: register in Settings, log in with it as second factor and alone, remove it",
  ignore: !haveChromium,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const server = await startServerProcess({
      env: { JWT_SECRET: "webauthn-ui-test-secret-0123456789abcdef" },
    });
    const profile = await Deno.makeTempDir({ prefix: "svc-webauthn-chromium-" });
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
    try {
      const page = await browser.newPage();
      await page.setViewport({ width: 1280, height: 1100 });
      page.on("console", (m) => calls.push(`console: ${m.text()}`));
      page.on("pageerror", (e) => calls.push(`pageerror: ${e}`));
      page.on("response", (r) => {
        if (r.url().includes("/api/")) {
          calls.push(`${r.request().method()} ${new URL(r.url()).pathname} ${r.status()}`);
        }
      });
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

      const base = `https://localhost:${server.webPort}`;
      const password = await server.adminPassword();
      await page.goto(`${base}/`, { waitUntil: "load" });
      await fill(page, "svc-login-page sl-input[name=username]", "admin");
      await fill(page, "svc-login-page sl-input[name=password]", password);
      await page.keyboard.press("Enter");
      await loggedIn(page);

      // Register: a name, the password (step-up), then the authenticator answers.
      await page.goto(`${base}/settings?tab=second-factors`, { waitUntil: "load" });
      await waitText(page, "svc-mfa-settings sl-button.add-key", "no add-key button");
      await page.click("svc-mfa-settings sl-button.add-key");
      await fill(page, "svc-mfa-settings sl-input[name=key-name]", "Virtual key");
      await fill(page, "svc-mfa-settings sl-input[name=password]", password);
      await page.keyboard.press("Enter");
      await waitText(page, "svc-mfa-settings table.webauthn-keys td.key-name", "no key listed");
      assert.equal(
        await page.$eval(
          "svc-mfa-settings td.key-name",
          (e: { textContent: string }) => e.textContent.trim(),
        ),
        "Virtual key",
      );
      const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
      assert.equal(credentials.length, 1, "the authenticator holds one credential");
      assert.equal(credentials[0].isResidentCredential, true, "a discoverable credential (passkey)");

      // Log out; password, then the key as the second factor.
      await loggedOut(page, cdp, base);
      await fill(page, "svc-login-page sl-input[name=username]", "admin");
      await fill(page, "svc-login-page sl-input[name=password]", password);
      await page.keyboard.press("Enter");
      await waitText(page, "svc-login-page sl-button.use-key", "no security-key button at the second step");
      await page.click("svc-login-page sl-button.use-key");
      await loggedIn(page);

      // Log out; the passkey alone.
      await loggedOut(page, cdp, base);
      await page.click("svc-login-page sl-button.passkey-login");
      await loggedIn(page);
      const after = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
      assert.ok(
        after.credentials[0].signCount >= 2,
        `the counter advanced: ${after.credentials[0].signCount}`,
      );

      // Remove: password, and the key as the step-up's second factor (no code typed).
      await page.goto(`${base}/settings?tab=second-factors`, { waitUntil: "load" });
      await waitText(page, "svc-mfa-settings sl-button.remove-key", "no remove button");
      await page.click("svc-mfa-settings sl-button.remove-key");
      await fill(page, "svc-mfa-settings sl-input[name=password]", password);
      await page.keyboard.press("Enter");
      await waitText(page, "svc-mfa-settings p.no-keys", "the key was not removed");
      assert.ok(
        calls.some((c) => /^DELETE \/api\/v1\/auth\/webauthn\/credentials\/[0-9a-f-]{36} 204$/.test(c)),
        calls.join(", "),
      );
    } finally {
      await browser.close();
      await server.stop();
      await Deno.remove(profile, { recursive: true }).catch(() => {});
    }
  },
});
