/**
 * Step-up with a passkey in the console, in Debian's Chromium against a real svc-server process with the
 * DevTools virtual authenticator: an administrator whose only second factor is a passkey removes a member
 * from a user group that carries a role, then deletes a role that someone holds. Each time the server refuses
 * the first call (step-up needed), the console's step-up dialog takes the password and the passkey's answer
 * ("Use a passkey / security key"), and the call repeats and succeeds.
 */
import assert from "node:assert/strict";
import type { Page } from "puppeteer-core";
import { startServerProcess } from "../helpers/process.ts";
import { haveChromium, launchChromium } from "../helpers/browser.ts";

if (!haveChromium) {
  console.warn("passkey step-up browser test skipped: needs Debian's chromium at /usr/bin/chromium");
}

// deno-lint-ignore no-explicit-any
declare const document: any;

const calls: string[] = [];

async function fill(page: Page, host: string, value: string): Promise<void> {
  const input = await page.waitForSelector(`${host} >>> input`, { visible: true });
  await input!.click({ count: 3 });
  await input!.type(value);
}

async function waitFor(page: Page, selector: string, what: string): Promise<void> {
  try {
    await page.waitForSelector(selector, { visible: true });
  } catch (err) {
    const text = await page.$eval("body", (b: { innerText: string }) => b.innerText);
    throw new Error(`${what}: the page says: ${text}; calls: ${calls.join(", ")}`, { cause: err });
  }
}

Deno.test({
  name: "a passkey-only administrator passes step-up in the console (group member, held role)",
  ignore: !haveChromium,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const server = await startServerProcess({
      env: { JWT_SECRET: "step-up-passkey-ui-test-secret-0123456789" },
    });
    const chromium = await launchChromium();
    const { browser } = chromium;
    try {
      const page = await browser.newPage();
      await page.setViewport({ width: 1280, height: 1100 });
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
      await page.waitForFunction(() =>
        !document.querySelector("svc-login-page") && document.querySelector("header.masthead")
      );

      // A role someone holds (set up through the API, with the password as step-up: no factor yet).
      const setup: string = await page.evaluate(async (pw: string) => {
        const csrf = document.cookie.split("; ").find((c: string) => c.startsWith("svc_csrf=")).slice(9);
        const send = async (method: string, path: string, body: unknown) => {
          const res = await fetch(path, {
            method,
            headers: { "content-type": "application/json", "x-csrf-token": csrf },
            body: JSON.stringify(body),
          });
          return { status: res.status, json: res.status === 204 ? undefined : await res.json() };
        };
        const role = await send("POST", "/api/v1/roles", { name: "Helpers", permissions: ["node:view"] });
        const user = await send("POST", "/api/v1/users", {
          username: "helper",
          password: "Helper-Passw0rd-0123",
        });
        const bound = await send("POST", `/api/v1/users/${user.json.id}/role-bindings`, {
          role_id: role.json.id,
          step_up: { password: pw },
        });
        const group = await send("POST", "/api/v1/user-groups", { name: "Helpers group" });
        const groupBound = await send("POST", `/api/v1/user-groups/${group.json.id}/role-bindings`, {
          role_id: role.json.id,
          step_up: { password: pw },
        });
        const member = await send("POST", `/api/v1/user-groups/${group.json.id}/members`, {
          user_id: user.json.id,
          step_up: { password: pw },
        });
        return [role, user, bound, group, groupBound].map((r) => r.status).join(" ") + ` ${member.status}`;
      }, password);
      assert.equal(setup, "201 201 201 201 201 204", calls.join(", "));

      // The administrator's only second factor: a passkey.
      await page.goto(`${base}/settings?tab=second-factors`, { waitUntil: "load" });
      await waitFor(page, "svc-mfa-settings sl-button.add-key", "no add-key button");
      await page.click("svc-mfa-settings sl-button.add-key");
      await fill(page, "svc-mfa-settings sl-input[name=key-name]", "Virtual key");
      await fill(page, "svc-mfa-settings sl-input[name=password]", password);
      await page.keyboard.press("Enter");
      await waitFor(page, "svc-mfa-settings table.webauthn-keys td.key-name", "no key listed");
      const status = await page.evaluate(async () => (await (await fetch("/api/v1/auth/mfa")).json()));
      assert.equal(status.totp, false, "no authenticator app");
      assert.equal(status.webauthn, 1, "one passkey");

      // Remove a member of a group that carries a role: the step-up dialog opens over the members dialog.
      await page.goto(`${base}/settings?tab=user-groups`, { waitUntil: "load" });
      await page.waitForFunction(() =>
        [...document.querySelectorAll("svc-settings-user-groups tr")].some((tr: { innerText: string }) =>
          tr.innerText.includes("Helpers group")
        )
      );
      await page.evaluate(() => {
        const row = [...document.querySelectorAll("svc-settings-user-groups tr")].find((
          tr: { innerText: string },
        ) => tr.innerText.includes("Helpers group"));
        row.querySelector("sl-button").click();
      });
      const removeMember = 'svc-settings-user-groups sl-icon-button[label="Remove helper"]';
      await waitFor(page, removeMember, "no member to remove");
      await page.click(removeMember);
      await waitFor(page, "svc-mfa-step-up-dialog sl-button.step-up-key", "no step-up dialog for the member");
      await fill(page, "svc-mfa-step-up-dialog sl-input[name=step-up-password]", password);
      await page.click("svc-mfa-step-up-dialog sl-button.step-up-key");
      await page.waitForFunction(
        (sel: string) => !document.querySelector(sel) && !document.querySelector("svc-mfa-step-up-dialog"),
        {},
        removeMember,
      ).catch((err) => {
        throw new Error(`the member was not removed; calls: ${calls.join(", ")}`, { cause: err });
      });
      const removals = calls.filter((c) => /^DELETE \/api\/v1\/user-groups\/.*\/members\//.test(c));
      assert.ok(
        removals.length === 2 && removals[0].endsWith(" 403") && removals[1].endsWith(" 204"),
        `refused, then repeated with the proof: ${removals.join(", ")}`,
      );
      await page.keyboard.press("Escape");

      // Delete the held role: the console asks for the password and the passkey, then repeats the call.
      await page.goto(`${base}/settings?tab=roles`, { waitUntil: "load" });
      const trash = 'svc-settings-roles sl-icon-button[label="Delete role Helpers"]';
      await waitFor(page, trash, "no delete button for the role");
      await page.click(trash);
      await waitFor(page, "svc-confirm-dialog sl-button.confirm-ok", "no confirmation");
      await page.click("svc-confirm-dialog sl-button.confirm-ok");
      await waitFor(
        page,
        "svc-mfa-step-up-dialog sl-button.step-up-key",
        "no passkey button in the step-up dialog",
      );
      await fill(page, "svc-mfa-step-up-dialog sl-input[name=step-up-password]", password);
      await page.click("svc-mfa-step-up-dialog sl-button.step-up-key");
      await page.waitForFunction(
        (sel: string) => !document.querySelector(sel) && !document.querySelector("svc-mfa-step-up-dialog"),
        {},
        trash,
      ).catch((err) => {
        throw new Error(`the role was not deleted; calls: ${calls.join(", ")}`, { cause: err });
      });
      const deletes = calls.filter((c) => c.startsWith("DELETE /api/v1/roles/"));
      assert.ok(
        deletes.length === 2 && deletes[0].endsWith(" 403") && deletes[1].endsWith(" 204"),
        `refused, then repeated with the proof: ${deletes.join(", ")}`,
      );
      assert.ok(calls.includes("POST /api/v1/auth/step-up/webauthn/options 200"), calls.join(", "));
      const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
      assert.ok(credentials[0].signCount >= 2, `the passkey signed twice: ${credentials[0].signCount}`);
    } finally {
      await chromium.close();
      await server.stop();
    }
  },
});
