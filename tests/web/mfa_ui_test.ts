/**
 * Second factors in Debian's Chromium against a real svc-server process: set up an authenticator app in
 * Settings (QR code drawn, key shown, confirmed with a code computed by our RFC 6238 implementation), see the
 * backup codes once, log in with password then code, see a replayed code refused, log in with a backup code;
 * remove a role binding, which asks for password and code in the step-up dialog and repeats the call. And a
 * directory (LDAP, a real slapd) user logging in through the login page.
 */
import assert from "node:assert/strict";
import puppeteer, { type Page } from "puppeteer-core";
import { startServerProcess } from "../helpers/process.ts";
import { base32Decode, hotp, totpStep } from "../../server/auth/totp.ts";
import { DIRECTORY, haveSlapd, READER_DN, READER_PW, startSlapd, SUFFIX } from "../helpers/slapd.ts";

const CHROMIUM = "/usr/bin/chromium";
const haveChromium = await Deno.stat(CHROMIUM).then(() => true, () => false);
if (!haveChromium) {
  console.warn("MFA browser test skipped: needs Debian's chromium at /usr/bin/chromium");
}

// deno-lint-ignore no-explicit-any
declare const document: any;

async function fill(page: Page, host: string, value: string): Promise<void> {
  const input = await page.waitForSelector(`${host} >>> input`, { visible: true });
  await input!.click({ count: 3 });
  await input!.type(value);
}

const calls: string[] = [];

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

async function passwordStep(page: Page, base: string, password: string): Promise<void> {
  const cdp = await page.createCDPSession();
  await cdp.send("Network.clearBrowserCookies");
  await cdp.detach();
  await page.goto(`${base}/`, { waitUntil: "load" });
  await fill(page, "svc-login-page sl-input[name=username]", "admin");
  await fill(page, "svc-login-page sl-input[name=password]", password);
  await page.keyboard.press("Enter");
  await page.waitForSelector("svc-login-page form.second-factor", { visible: true });
}

async function submitCode(page: Page, code: string): Promise<void> {
  await fill(page, "svc-login-page sl-input[name=code]", code);
  await page.click("svc-login-page form.second-factor sl-button[type=submit]");
}

Deno.test({
  name: "Second factors: set up with a QR code, log in with a code, replay refused, backup code works",
  ignore: !haveChromium,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const server = await startServerProcess({ env: { JWT_SECRET: "mfa-ui-test-secret-0123456789abcdef" } });
    const profile = await Deno.makeTempDir({ prefix: "svc-mfa-chromium-" });
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
      const cspViolations: string[] = [];
      page.on("console", (m) => {
        if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
      });
      await page.setViewport({ width: 1280, height: 1100 });
      page.on("response", (r) => {
        if (r.url().includes("/api/")) {
          calls.push(`${r.request().method()} ${new URL(r.url()).pathname} ${r.status()}`);
        }
      });
      const base = `https://localhost:${server.webPort}`;
      const password = await server.adminPassword();
      await page.goto(`${base}/`, { waitUntil: "load" });
      await fill(page, "svc-login-page sl-input[name=username]", "admin");
      await fill(page, "svc-login-page sl-input[name=password]", password);
      await page.keyboard.press("Enter");
      await loggedIn(page);

      await page.goto(`${base}/settings?tab=second-factors`, { waitUntil: "load" });
      await page.waitForSelector("svc-mfa-settings sl-button.setup-totp", { visible: true });
      await page.click("svc-mfa-settings sl-button.setup-totp");
      await fill(page, "svc-mfa-settings sl-input[name=password]", password);
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
      await fill(page, "svc-mfa-settings sl-input[name=confirm]", await hotp(key, totpStep(Date.now())));
      await page.keyboard.press("Enter");
      await page.waitForSelector("svc-mfa-settings .backup-code-list code", { visible: true }).catch(
        async (err) => {
          const text = await page.$eval("svc-mfa-settings", (b: { innerText: string }) => b.innerText);
          throw new Error(`no backup codes; the panel says: ${text}; calls: ${calls.join(", ")}`, {
            cause: err,
          });
        },
      );
      const codes: string[] = await page.$$eval(
        "svc-mfa-settings .backup-code-list code",
        (els: Array<{ textContent: string }>) => els.map((e) => e.textContent.trim()),
      );
      assert.equal(codes.length, 10);
      await page.screenshot({ path: "test-artifacts/screenshots/mfa-backup-codes.png" }).catch(() => {});

      // Password, then a code (the next step: the confirmation used the current one).
      await passwordStep(page, base, password);
      const code = await hotp(key, totpStep(Date.now()) + 1);
      await submitCode(page, code);
      await loggedIn(page);

      // The same code again: refused with a message, the form stays for another try.
      await passwordStep(page, base, password);
      await submitCode(page, code);
      await page.waitForFunction(() =>
        document.querySelector("svc-login-page .login-error")?.innerText.includes("already used")
      );
      await page.click("svc-login-page sl-button.toggle-backup");
      await submitCode(page, codes[0]);
      await loggedIn(page);

      // A dangerous change answered with second_factor_required: the step-up dialog asks, the call repeats.
      // (Creating a user with a role is itself a step-up action: the proof goes in step_up, since `password`
      // there is the new user's.)
      const helper: string = await page.evaluate(async (proof: { password: string; backup_code: string }) => {
        const csrf = document.cookie.split("; ").find((c: string) => c.startsWith("svc_csrf=")).slice(9);
        const headers = { "content-type": "application/json", "x-csrf-token": csrf };
        const roles = await (await fetch("/api/v1/roles?per_page=200")).json();
        const auditor = roles.items.find((r: { name: string }) => r.name === "Auditor").id;
        const made = await fetch("/api/v1/users", {
          method: "POST",
          headers,
          body: JSON.stringify({
            username: "helper",
            password: "Helper-Passw0rd-0123",
            role_ids: [auditor],
            step_up: proof,
          }),
        });
        return (await made.json()).id;
      }, { password, backup_code: codes[2] });
      await page.goto(`${base}/settings?tab=role-bindings&user_id=${helper}`, { waitUntil: "load" });
      const row = "table.role-bindings tr[data-role-binding-id]";
      await page.waitForSelector(`${row} sl-icon-button`, { visible: true });
      await page.click(`${row} sl-icon-button`);
      await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
      await page.click("svc-confirm-dialog sl-button.confirm-ok");
      await fill(page, "svc-mfa-step-up-dialog sl-input[name=step-up-password]", password);
      await fill(page, "svc-mfa-step-up-dialog sl-input[name=step-up-code]", codes[1]);
      await page.click("svc-mfa-step-up-dialog sl-button.step-up-ok");
      await page.waitForFunction((sel: string) => !document.querySelector(sel), {}, row);
      assert.ok(
        calls.some((c) => c.startsWith("DELETE") && c.endsWith(" 403")) &&
          calls.some((c) => c.startsWith("DELETE") && c.endsWith(" 204")),
        `refused, then repeated with the proof: ${calls.filter((c) => c.startsWith("DELETE")).join(", ")}`,
      );
      assert.deepEqual(cspViolations, [], "the QR code and forms respect the CSP");
    } finally {
      await browser.close();
      await server.stop();
      await Deno.remove(profile, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "LDAP: a directory user logs in through the login page and is shown as source ldap",
  ignore: !haveChromium || !haveSlapd,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const slapd = await startSlapd();
    await slapd.ldapadd(DIRECTORY);
    const server = await startServerProcess({
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
    const profile = await Deno.makeTempDir({ prefix: "svc-ldap-chromium-" });
    const browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        `--user-data-dir=${profile}`,
        "--ignore-certificate-errors",
      ],
    });
    try {
      const page = await browser.newPage();
      const base = `https://localhost:${server.webPort}`;
      await page.goto(`${base}/`, { waitUntil: "load" });
      await fill(page, "svc-login-page sl-input[name=username]", "alice");
      await fill(page, "svc-login-page sl-input[name=password]", "wrong-password");
      await page.keyboard.press("Enter");
      await page.waitForFunction(() =>
        document.querySelector("svc-login-page .login-error")?.innerText.includes(
          "invalid username or password",
        )
      );
      await fill(page, "svc-login-page sl-input[name=password]", "alice-directory-pass");
      await page.keyboard.press("Enter");
      await loggedIn(page);
      const me = await page.evaluate(async () => (await fetch("/api/v1/auth/me")).json());
      assert.equal(me.user.username, "alice");
      assert.equal(me.user.source, "ldap");
      assert.equal(me.user.full_name, "Alice Liddell");
    } finally {
      await browser.close();
      await server.stop();
      await slapd.stop();
      await Deno.remove(profile, { recursive: true }).catch(() => {});
    }
  },
});
