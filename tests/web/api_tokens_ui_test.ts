/**
 * API tokens in Settings, in Debian's Chromium against a real svc-server process: create a token, see it once
 * with a copy button, use it from a script, see it listed (never the secret again) with its last use, and
 * revoke it, after which the script is refused.
 */
import assert from "node:assert/strict";
import puppeteer, { type Page } from "puppeteer-core";
import { startServerProcess } from "../helpers/process.ts";

const CHROMIUM = "/usr/bin/chromium";
const haveChromium = await Deno.stat(CHROMIUM).then(() => true, () => false);
if (!haveChromium) {
  console.warn("API tokens browser test skipped: needs Debian's chromium at /usr/bin/chromium");
}

// deno-lint-ignore no-explicit-any
declare const document: any;

async function fill(page: Page, host: string, value: string): Promise<void> {
  const input = await page.waitForSelector(`${host} >>> input`, { visible: true });
  await input!.click({ count: 3 });
  await input!.type(value);
}

Deno.test({
  name: "Settings → API tokens: created once, usable by a script, listed without the secret, revocable",
  ignore: !haveChromium,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const server = await startServerProcess();
    const profile = await Deno.makeTempDir({ prefix: "svc-tokens-chromium-" });
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
    const client = Deno.createHttpClient({
      caCerts: [await Deno.readTextFile(`${server.dataDir}/pki/ca/ca.crt`)],
    });
    const me = async (token: string) => (await fetch(`https://localhost:${server.webPort}/api/v1/auth/me`, {
      client,
      headers: { authorization: `Bearer ${token}` },
    }).then(async (r) => (await r.body?.cancel(), r.status)));
    try {
      const page = await browser.newPage();
      await page.setViewport({ width: 1280, height: 1000 });
      const base = `https://localhost:${server.webPort}`;
      await page.goto(`${base}/`, { waitUntil: "load" });
      await fill(page, "svc-login-page sl-input[name=username]", "admin");
      const password = await server.adminPassword();
      await fill(page, "svc-login-page sl-input[name=password]", password);
      await page.keyboard.press("Enter");
      await page.waitForFunction(() =>
        !document.querySelector("svc-app")?.shadowRoot?.querySelector?.("svc-login-page") &&
        !document.querySelector("svc-login-page")
      );
      await page.goto(`${base}/settings?tab=api-tokens`, { waitUntil: "load" });
      await fill(page, "svc-settings-api-tokens sl-input[name=name]", "nightly-report");
      await page.click("svc-settings-api-tokens sl-button[type=submit]");
      // Creating a token always asks the person to re-authenticate.
      await page.waitForSelector("svc-mfa-step-up-dialog sl-input[name=step-up-password]", { visible: true });
      await fill(page, "svc-mfa-step-up-dialog sl-input[name=step-up-password]", password);
      await page.click("svc-mfa-step-up-dialog sl-button.step-up-ok");
      const shown = await page.waitForSelector("svc-settings-api-tokens .new-token code", { visible: true });
      const token = await shown!.evaluate((e: { textContent: string }) => e.textContent.trim());
      assert.match(token, /^svcpat_[A-Za-z0-9_-]{43}$/);
      assert.ok(
        await page.$("svc-settings-api-tokens .new-token sl-copy-button"),
        "a copy button next to it",
      );

      assert.equal(await me(token), 200, "the script authenticates with the token");

      await page.reload({ waitUntil: "load" });
      await page.waitForSelector('svc-settings-api-tokens tr[data-token="nightly-report"]', {
        visible: true,
      });
      const text = await page.$eval("svc-settings-api-tokens", (e: { innerText: string }) => e.innerText);
      assert.ok(!text.includes(token), "after a reload the token is never shown again");
      assert.ok(text.includes(token.slice(0, 11)), "only its first characters, to tell tokens apart");
      await page.waitForFunction(() =>
        !document.querySelector('svc-settings-api-tokens tr[data-token="nightly-report"]').innerText.includes(
          "never",
        )
      );

      await page.click('svc-settings-api-tokens tr[data-token="nightly-report"] sl-button');
      await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
      await page.click("svc-confirm-dialog sl-button.confirm-ok");
      await page.waitForFunction(() =>
        document.querySelector('svc-settings-api-tokens tr[data-token="nightly-report"]')?.innerText.includes(
          "revoked",
        )
      );
      assert.equal(await me(token), 401, "a revoked token is refused");
    } finally {
      await browser.close();
      client.close();
      await server.stop();
      await Deno.remove(profile, { recursive: true }).catch(() => {});
    }
  },
});
