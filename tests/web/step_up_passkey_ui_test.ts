/**
 * Step-up with a passkey in the console, in Debian's Chromium against a real svc-server process with the
 * DevTools virtual authenticator: an administrator whose only second factor is a passkey removes a member
 * from a user group that carries a role, then deletes a role that someone holds. Each time the server refuses
 * the first call (step-up needed), the console's step-up dialog takes the password and the passkey's answer
 * ("Use a passkey / security key"), and the call repeats and succeeds.
 */
import assert from "node:assert/strict";
import { addVirtualAuthenticator, browserTest, browserTestSkipped, fillField } from "../helpers/browser.ts";
import { callApi, withConsoleProcess } from "../helpers/console_login.ts";

const SKIP = browserTestSkipped("passkey step-up browser test");

// deno-lint-ignore no-explicit-any
declare const document: any;

browserTest(
  "a passkey-only administrator passes step-up in the console (group member, held role)",
  SKIP,
  async () => {
    await withConsoleProcess(
      { server: { env: { JWT_SECRET: "step-up-passkey-ui-test-secret-0123456789" } } },
      async ({ server, page, watch }) => {
        const { web, adminPassword: password } = server;
        const authenticator = await addVirtualAuthenticator(page);

        // A role someone holds (set up through the API, with the password as step-up: no factor yet).
        const stepUp = { step_up: { password } };
        const role = await callApi(page, "POST", "/api/v1/roles", {
          name: "Helpers",
          permissions: ["node:view"],
        });
        const user = await callApi(page, "POST", "/api/v1/users", {
          username: "helper",
          password: "Helper-Passw0rd-0123",
        });
        const bound = await callApi(page, "POST", `/api/v1/users/${user.json?.id}/role-bindings`, {
          role_id: role.json?.id,
          ...stepUp,
        });
        const group = await callApi(page, "POST", "/api/v1/user-groups", { name: "Helpers group" });
        const groupBound = await callApi(
          page,
          "POST",
          `/api/v1/user-groups/${group.json?.id}/role-bindings`,
          {
            role_id: role.json?.id,
            ...stepUp,
          },
        );
        const member = await callApi(page, "POST", `/api/v1/user-groups/${group.json?.id}/members`, {
          user_id: user.json?.id,
          ...stepUp,
        });
        assert.equal(
          [role, user, bound, group, groupBound, member].map((r) => r.status).join(" "),
          "201 201 201 201 201 204",
          watch.log.join(", "),
        );

        // The administrator's only second factor: a passkey.
        await page.goto(`${web}/settings?tab=second-factors`, { waitUntil: "load" });
        await watch.visible("svc-mfa-settings sl-button.add-key", "no add-key button");
        await page.click("svc-mfa-settings sl-button.add-key");
        await fillField(page, "svc-mfa-settings sl-input[name=key-name]", "Virtual key");
        await fillField(page, "svc-mfa-settings sl-input[name=password]", password);
        await page.keyboard.press("Enter");
        await watch.visible("svc-mfa-settings table.webauthn-keys td.key-name", "no key listed");
        const status = (await callApi(page, "GET", "/api/v1/auth/mfa")).json;
        assert.equal(status.totp, false, "no authenticator app");
        assert.equal(status.webauthn, 1, "one passkey");

        /** Answers the open step-up dialog with the password and the passkey; `gone` and the dialog then go. */
        const passStepUp = async (gone: string, what: string) => {
          await fillField(page, "svc-mfa-step-up-dialog sl-input[name=step-up-password]", password);
          await page.click("svc-mfa-step-up-dialog sl-button.step-up-key");
          await watch.explain(
            what,
            page.waitForFunction(
              (sel: string) =>
                !document.querySelector(sel) && !document.querySelector("svc-mfa-step-up-dialog"),
              {},
              gone,
            ),
          );
        };

        // Remove a member of a group that carries a role: the step-up dialog opens over the members dialog.
        await page.goto(`${web}/settings?tab=user-groups`, { waitUntil: "load" });
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
        await watch.visible(removeMember, "no member to remove");
        await page.click(removeMember);
        await watch.visible(
          "svc-mfa-step-up-dialog sl-button.step-up-key",
          "no step-up dialog for the member",
        );
        await passStepUp(removeMember, "the member was not removed");
        const removals = watch.apiCalls.filter((c) =>
          /^DELETE \/api\/v1\/user-groups\/.*\/members\//.test(c)
        );
        assert.ok(
          removals.length === 2 && removals[0].endsWith(" 403") && removals[1].endsWith(" 204"),
          `refused, then repeated with the proof: ${removals.join(", ")}`,
        );
        await page.keyboard.press("Escape");

        // Delete the held role: the console asks for the password and the passkey, then repeats the call.
        await page.goto(`${web}/settings?tab=roles`, { waitUntil: "load" });
        const trash = 'svc-settings-roles sl-icon-button[label="Delete role Helpers"]';
        await watch.visible(trash, "no delete button for the role");
        await page.click(trash);
        await watch.visible("svc-confirm-dialog sl-button.confirm-ok", "no confirmation");
        await page.click("svc-confirm-dialog sl-button.confirm-ok");
        await watch.visible(
          "svc-mfa-step-up-dialog sl-button.step-up-key",
          "no passkey button in the step-up dialog",
        );
        await passStepUp(trash, "the role was not deleted");
        const deletes = watch.apiCalls.filter((c) => c.startsWith("DELETE /api/v1/roles/"));
        assert.ok(
          deletes.length === 2 && deletes[0].endsWith(" 403") && deletes[1].endsWith(" 204"),
          `refused, then repeated with the proof: ${deletes.join(", ")}`,
        );
        assert.ok(
          watch.apiCalls.includes("POST /api/v1/auth/step-up/webauthn/options 200"),
          watch.log.join(", "),
        );
        const [credential] = await authenticator.credentials();
        assert.ok(credential.signCount >= 2, `the passkey signed twice: ${credential.signCount}`);
      },
    );
  },
);
