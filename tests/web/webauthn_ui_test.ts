/**
 * Security keys in Debian's Chromium against a real svc-server process, with the DevTools virtual
 * authenticator (CTAP2, internal transport, resident keys, user verification): register a passkey in
 * Settings (step-up with the password), log out, log in with password then the key, log in with the passkey
 * alone, and remove it (step-up with password and the key).
 */
import assert from "node:assert/strict";
import { addVirtualAuthenticator, browserTest, browserTestSkipped, fillField } from "../helpers/browser.ts";
import {
  dropSession,
  submitLogin,
  waitForConsoleShell,
  withConsoleProcess,
} from "../helpers/console_login.ts";

const SKIP = browserTestSkipped("WebAuthn browser test");

browserTest(
  "Passkeys: register in Settings, log in with it as second factor and alone, remove it",
  SKIP,
  async () => {
    await withConsoleProcess({
      server: { env: { JWT_SECRET: "webauthn-ui-test-secret-0123456789abcdef" } },
      path: "/settings?tab=second-factors",
    }, async ({ server, page, watch }) => {
      const { web, adminPassword: password } = server;
      const authenticator = await addVirtualAuthenticator(page);

      // Register: a name, the password (step-up), then the authenticator answers.
      await watch.visible("svc-mfa-settings sl-button.add-key", "no add-key button");
      await page.click("svc-mfa-settings sl-button.add-key");
      await fillField(page, "svc-mfa-settings sl-input[name=key-name]", "Virtual key");
      await fillField(page, "svc-mfa-settings sl-input[name=password]", password);
      await page.keyboard.press("Enter");
      await watch.visible("svc-mfa-settings table.webauthn-keys td.key-name", "no key listed");
      assert.equal(
        await page.$eval(
          "svc-mfa-settings td.key-name",
          (e: { textContent: string }) => e.textContent.trim(),
        ),
        "Virtual key",
      );
      const credentials = await authenticator.credentials();
      assert.equal(credentials.length, 1, "the authenticator holds one credential");
      assert.equal(credentials[0].isResidentCredential, true, "a discoverable credential (passkey)");

      // Log out; password, then the key as the second factor.
      await dropSession(page, web, authenticator.cdp);
      await submitLogin(page, { username: "admin", password });
      await watch.visible("svc-login-page sl-button.use-key", "no security-key button at the second step");
      await page.click("svc-login-page sl-button.use-key");
      await waitForConsoleShell(page, watch);

      // Log out; the passkey alone.
      await dropSession(page, web, authenticator.cdp);
      await page.click("svc-login-page sl-button.passkey-login");
      await waitForConsoleShell(page, watch);
      const [after] = await authenticator.credentials();
      assert.ok(after.signCount >= 2, `the counter advanced: ${after.signCount}`);

      // Remove: password, and the key as the step-up's second factor (no code typed).
      await page.goto(`${web}/settings?tab=second-factors`, { waitUntil: "load" });
      await watch.visible("svc-mfa-settings sl-button.remove-key", "no remove button");
      await page.click("svc-mfa-settings sl-button.remove-key");
      await fillField(page, "svc-mfa-settings sl-input[name=password]", password);
      await page.keyboard.press("Enter");
      await watch.visible("svc-mfa-settings p.no-keys", "the key was not removed");
      assert.ok(
        watch.apiCalls.some((c) =>
          /^DELETE \/api\/v1\/auth\/webauthn\/credentials\/[0-9a-f-]{36} 204$/.test(c)
        ),
        watch.log.join(", "),
      );
    });
  },
);
