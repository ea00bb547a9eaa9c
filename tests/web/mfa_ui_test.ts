/**
 * Second factors in Debian's Chromium against a real svc-server process: set up an authenticator app in
 * Settings (QR code drawn, key shown, confirmed with a code computed by our RFC 6238 implementation), see the
 * backup codes once, log in with password then code, see a replayed code refused, log in with a backup code;
 * remove a role binding, which asks for password and code in the step-up dialog and repeats the call. And a
 * directory (LDAP, a real slapd) user logging in through the login page.
 */
import assert from "node:assert/strict";
import type { Page } from "puppeteer-core";
import { base32Decode, hotp, totpStep } from "../../server/auth/totp.ts";
import { DIRECTORY, haveSlapd, READER_DN, READER_PW, startSlapd, SUFFIX } from "../helpers/slapd.ts";
import { browserTest, browserTestSkipped, fillField, type PageWatch } from "../helpers/browser.ts";
import {
  callApi,
  dropSession,
  startConsoleServerProcess,
  submitLogin,
  waitForConsoleShell,
  withConsole,
  withConsoleProcess,
} from "../helpers/console_login.ts";

const SKIP = browserTestSkipped("MFA browser test");

// deno-lint-ignore no-explicit-any
declare const document: any;

/** A fresh session at the login screen, through the password: the second-factor form is showing. */
async function passwordStep(page: Page, web: string, password: string, watch: PageWatch): Promise<void> {
  await dropSession(page, web);
  await submitLogin(page, { username: "admin", password });
  await watch.visible("svc-login-page form.second-factor", "no second-factor step after the password");
}

async function submitCode(page: Page, code: string): Promise<void> {
  await fillField(page, "svc-login-page sl-input[name=code]", code);
  await page.click("svc-login-page form.second-factor sl-button[type=submit]");
}

browserTest(
  "Second factors: set up with a QR code, log in with a code, replay refused, backup code works",
  SKIP,
  async () => {
    await withConsoleProcess({
      server: { env: { JWT_SECRET: "mfa-ui-test-secret-0123456789abcdef" } },
      path: "/settings?tab=second-factors",
    }, async ({ server, page, watch }) => {
      const { web, adminPassword: password } = server;
      await page.waitForSelector("svc-mfa-settings sl-button.setup-totp", { visible: true });
      await page.click("svc-mfa-settings sl-button.setup-totp");
      await fillField(page, "svc-mfa-settings sl-input[name=password]", password);
      await page.keyboard.press("Enter");
      const keyEl = await page.waitForSelector("svc-mfa-settings .totp-secret", { visible: true });
      const secret = (await keyEl!.evaluate((e: { textContent: string }) => e.textContent)).replaceAll(
        " ",
        "",
      );
      assert.match(secret, /^[A-Z2-7]{32}$/);
      const qrPath = await page.$eval(
        "svc-mfa-settings svg.totp-qr path",
        (e: { getAttribute(n: string): string }) => e.getAttribute("d"),
      );
      assert.ok(qrPath.split("h1v1h-1z").length > 200, "the QR code is drawn with its modules");

      const key = base32Decode(secret);
      await fillField(page, "svc-mfa-settings sl-input[name=confirm]", await hotp(key, totpStep(Date.now())));
      await page.keyboard.press("Enter");
      await watch.visible("svc-mfa-settings .backup-code-list code", "no backup codes");
      const codes: string[] = await page.$$eval(
        "svc-mfa-settings .backup-code-list code",
        (els: Array<{ textContent: string }>) => els.map((e) => e.textContent.trim()),
      );
      assert.equal(codes.length, 10);
      await page.screenshot({ path: "test-artifacts/screenshots/mfa-backup-codes.png" }).catch(() => {});

      // Password, then a code (the next step: the confirmation used the current one).
      await passwordStep(page, web, password, watch);
      const code = await hotp(key, totpStep(Date.now()) + 1);
      await submitCode(page, code);
      await waitForConsoleShell(page, watch);

      // The same code again: refused with a message, the form stays for another try.
      await passwordStep(page, web, password, watch);
      await submitCode(page, code);
      await page.waitForFunction(() =>
        document.querySelector("svc-login-page .login-error")?.innerText.includes("already used")
      );
      await page.click("svc-login-page sl-button.toggle-backup");
      await submitCode(page, codes[0]);
      await waitForConsoleShell(page, watch);

      // A dangerous change answered with second_factor_required: the step-up dialog asks, the call repeats.
      // (Creating a user with a role is itself a step-up action: the proof goes in step_up, since `password`
      // there is the new user's.)
      const roles = await callApi(page, "GET", "/api/v1/roles?per_page=200");
      const auditor = roles.json.items.find((r: { name: string }) => r.name === "Auditor").id;
      const made = await callApi(page, "POST", "/api/v1/users", {
        username: "helper",
        password: "Helper-Passw0rd-0123",
        role_ids: [auditor],
        step_up: { password, backup_code: codes[2] },
      });
      assert.equal(made.status, 201, JSON.stringify(made.json));
      await page.goto(`${web}/settings?tab=role-bindings&user_id=${made.json.id}`, { waitUntil: "load" });
      const row = "table.role-bindings tr[data-role-binding-id]";
      await page.waitForSelector(`${row} sl-icon-button`, { visible: true });
      await page.click(`${row} sl-icon-button`);
      await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
      await page.click("svc-confirm-dialog sl-button.confirm-ok");
      await fillField(page, "svc-mfa-step-up-dialog sl-input[name=step-up-password]", password);
      await fillField(page, "svc-mfa-step-up-dialog sl-input[name=step-up-code]", codes[1]);
      await page.click("svc-mfa-step-up-dialog sl-button.step-up-ok");
      await page.waitForFunction((sel: string) => !document.querySelector(sel), {}, row);
      const deletes = watch.apiCalls.filter((c) => c.startsWith("DELETE"));
      assert.ok(
        deletes.some((c) => c.endsWith(" 403")) && deletes.some((c) => c.endsWith(" 204")),
        `refused, then repeated with the proof: ${deletes.join(", ")}`,
      );
      assert.deepEqual(watch.cspViolations, [], "the QR code and forms respect the CSP");
    });
  },
);

browserTest(
  "LDAP: a directory user logs in through the login page and is shown as source ldap",
  SKIP || !haveSlapd,
  async () => {
    const slapd = await startSlapd();
    try {
      await slapd.ldapadd(DIRECTORY);
      const server = await startConsoleServerProcess({
        config: {
          ldap: {
            url: slapd.ldapsUrl,
            ca_file: slapd.caFile,
            bind_dn: READER_DN,
            user_base: SUFFIX,
          },
        },
        env: { SVC_LDAP_BIND_PASSWORD: READER_PW },
      });
      await withConsole(server, { path: false }, async ({ page, watch }) => {
        await page.goto(`${server.web}/`, { waitUntil: "load" });
        await submitLogin(page, { username: "alice", password: "wrong-password" });
        await page.waitForFunction(() =>
          document.querySelector("svc-login-page .login-error")?.innerText.includes(
            "invalid username or password",
          )
        );
        await fillField(page, "svc-login-page sl-input[name=password]", "alice-directory-pass");
        await page.keyboard.press("Enter");
        await waitForConsoleShell(page, watch);
        const me = (await callApi(page, "GET", "/api/v1/auth/me")).json;
        assert.equal(me.user.username, "alice");
        assert.equal(me.user.source, "ldap");
        assert.equal(me.user.full_name, "Alice Liddell");
      });
    } finally {
      await slapd.stop();
    }
  },
);
