/**
 * API tokens in Settings, in Debian's Chromium against a real svc-server process: create a token, see it once
 * with a copy button, use it from a script, see it listed (never the secret again) with its last use, and
 * revoke it, after which the script is refused.
 */
import assert from "node:assert/strict";
import { trustingClient } from "../helpers/process.ts";
import { browserTestSkipped, fillField } from "../helpers/browser.ts";
import { startConsoleServerProcess, withConsole } from "../helpers/console_login.ts";

const SKIP = browserTestSkipped("API tokens browser test");

// deno-lint-ignore no-explicit-any
declare const document: any;

Deno.test({
  name: "Settings → API tokens: created once, usable by a script, listed without the secret, revocable",
  ignore: SKIP,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const server = await startConsoleServerProcess();
    const client = await trustingClient(server.process);
    const me = async (token: string) => (await fetch(`${server.web}/api/v1/auth/me`, {
      client,
      headers: { authorization: `Bearer ${token}` },
    }).then(async (r) => (await r.body?.cancel(), r.status)));
    try {
      await withConsole(server, {
        path: "/settings?tab=api-tokens",
        viewport: { width: 1280, height: 1000 },
      }, async ({ page }) => {
        await fillField(page, "svc-settings-api-tokens sl-input[name=name]", "nightly-report");
        await page.click("svc-settings-api-tokens sl-button[type=submit]");
        // Creating a token always asks the person to re-authenticate.
        await page.waitForSelector("svc-mfa-step-up-dialog sl-input[name=step-up-password]", {
          visible: true,
        });
        await fillField(page, "svc-mfa-step-up-dialog sl-input[name=step-up-password]", server.adminPassword);
        await page.click("svc-mfa-step-up-dialog sl-button.step-up-ok");
        const shown = await page.waitForSelector("svc-settings-api-tokens .new-token code", {
          visible: true,
        });
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
          !document.querySelector('svc-settings-api-tokens tr[data-token="nightly-report"]').innerText
            .includes("never")
        );

        await page.click('svc-settings-api-tokens tr[data-token="nightly-report"] sl-button');
        await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
        await page.click("svc-confirm-dialog sl-button.confirm-ok");
        await page.waitForFunction(() =>
          document.querySelector('svc-settings-api-tokens tr[data-token="nightly-report"]')?.innerText
            .includes("revoked")
        );
        assert.equal(await me(token), 401, "a revoked token is refused");
      });
    } finally {
      client.close();
    }
  },
});
