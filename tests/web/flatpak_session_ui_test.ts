/**
 * The Flatpak and SessionAccess UI in a real browser (Debian's Chromium driven by puppeteer-core) against a
 * real `svc-server` process:
 *
 * - Settings → Flatpak repositories: a repository built with the Flatpak tools and served on 127.0.0.1 is
 *   registered by URL and refreshed; its state and application count show;
 * - the Flatpak editor's catalogue search finds the app (name, id) and adds it to the policy;
 * - the SessionAccess editor's weekly timeline marks the hours nobody named may log in, and clears them
 *   when a node group's policies fill the gap; releasing the policy is refused by the lockout guard, and
 *   goes through only with a reason typed into the dialog (the audit log keeps it).
 */
import assert from "node:assert/strict";
import { buildFlatpakRepo, flatpakToolsMissing } from "../helpers/flatpak_repo.ts";
import { browserTestSkipped, textOf } from "../helpers/browser.ts";
import { withConsoleProcess } from "../helpers/console_login.ts";
import { fill, startNewPolicy } from "../helpers/editor_forms.ts";

const chromiumMissing = browserTestSkipped("Flatpak/SessionAccess browser test");
const missing = chromiumMissing ? "chromium is not installed" : await flatpakToolsMissing();
if (missing && !chromiumMissing) console.warn(`Flatpak/SessionAccess browser test skipped: ${missing}`);

// deno-lint-ignore no-explicit-any
declare const document: any;

Deno.test({
  name:
    "Flatpak catalogue settings and editor search; SessionAccess timeline and lockout reason in the browser",
  ignore: missing !== undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const repo = await buildFlatpakRepo();
    try {
      await withConsoleProcess({
        server: { config: { flatpak: { catalog_allow_private_targets: true } } },
        viewport: { width: 1280, height: 1000 },
      }, async ({ server, page, api: adminApi }) => {
        const api = await adminApi();
        // Leaving the unsaved Flatpak draft asks "leave the page?"; the test leaves.
        page.on("dialog", (dialog) => void dialog.accept());
        const web = server.web;

        // Settings → Flatpak repositories: register by URL, refresh, see the state.
        await page.goto(`${web}/settings?tab=flatpak`, { waitUntil: "load" });
        await page.waitForSelector("svc-settings-flatpak-repos form.flatpak-repo-form", { visible: true });
        await fill(page, "svc-settings-flatpak-repos sl-input[name=name]", "svctest");
        await fill(page, "svc-settings-flatpak-repos sl-input[name=url]", repo.url);
        await page.click("svc-settings-flatpak-repos form.flatpak-repo-form sl-button[type=submit]");
        await page.waitForSelector('tr[data-repo="svctest"]', { visible: true });
        assert.match(await textOf(page, 'tr[data-repo="svctest"] .repo-state'), /never indexed/);
        await page.click('tr[data-repo="svctest"] .actions sl-button');
        await page.waitForFunction(() =>
          document.querySelector('tr[data-repo="svctest"] .app-count')?.textContent.trim() === "1"
        );
        assert.match(await textOf(page, 'tr[data-repo="svctest"] .repo-state'), /indexed/);

        // The Flatpak editor: search the catalogue, add the app.
        await startNewPolicy(page, web, "Flatpak", "Hello app");
        await page.waitForSelector("svc-flatpak-form sl-input.flatpak-search", { visible: true });
        await fill(page, "svc-flatpak-form sl-input.flatpak-search", "hello");
        const hit = 'li.flatpak-hit[data-app-id="org.svc.Hello"]';
        await page.waitForSelector(hit, { visible: true });
        assert.match(await textOf(page, hit), /Hello svc\s+org\.svc\.Hello/);
        await page.click(`${hit} sl-button`);
        await page.waitForFunction(() =>
          (document.querySelector("svc-flatpak-form").value.apps ?? []).some((a: { app_id: string }) =>
            a.app_id === "org.svc.Hello"
          )
        );
        const apps = await page.$eval(
          "svc-flatpak-form",
          (e: { value: { apps: unknown[] } }) => e.value.apps,
        );
        assert.deepEqual(apps, [{
          app_id: "org.svc.Hello",
          remote: "svctest",
          state: "FLATPAK_APP_STATE_PRESENT",
        }]);
        assert.match(await textOf(page, `${hit} sl-button`), /Added/);

        // SessionAccess: a day-only policy leaves the nights empty.
        const group = await api.call("POST", "/api/v1/node-groups", { name: "classroom" });
        const rule = (users: string[], start: string, end: string) => ({
          users,
          effect: "SESSION_ACCESS_EFFECT_ALLOW",
          windows: [{ start, end }],
        });
        const evenings = await api.call("POST", "/api/v1/policies/all", {
          name: "carol evenings",
          type: "SessionAccess",
          content: JSON.stringify({ time_zone: "UTC", rules: [rule(["carol"], "19:00", "09:00")] }),
        });
        await api.call("PUT", `/api/v1/policies/all/${evenings.id}/state`, { state: "released" });
        const evBinding = await api.call("POST", "/api/v1/policy-bindings", {
          policy_id: evenings.id,
          node_group_id: group.id,
        });
        await api.call("PUT", `/api/v1/policy-bindings/${evBinding.id}`, {
          state: "enabled",
          lockout_reason: "carol alone is locked out by day until the day policy follows",
        });
        const days = await api.call("POST", "/api/v1/policies/all", {
          name: "school days",
          type: "SessionAccess",
          content: JSON.stringify({ time_zone: "UTC", rules: [rule(["alice", "bob"], "08:00", "20:00")] }),
        });
        // A disabled binding: releasing checks the group as if it were enabled.
        await api.call("POST", "/api/v1/policy-bindings", { policy_id: days.id, node_group_id: group.id });
        const other = await api.call("POST", "/api/v1/node-groups", { name: "library" });
        await api.call("POST", "/api/v1/policy-bindings", { policy_id: days.id, node_group_id: other.id });

        await page.goto(`${web}/policies/${days.id}/edit`, { waitUntil: "load" });
        await page.waitForSelector("svc-session-timeline .session-lockout");
        assert.match(
          await textOf(page, "svc-session-timeline .session-lockout"),
          /No named account may log in: Mon 00:00–Mon 08:00, Mon 20:00–Tue 08:00/,
        );
        assert.deepEqual(
          await page.$$eval(
            "svc-session-timeline tr[data-subject]",
            (rows) => rows.map((r) => (r as unknown as { dataset: { subject: string } }).dataset.subject),
          ),
          ["alice", "bob"],
        );
        assert.ok((await page.$$("svc-session-timeline .session-locked")).length >= 7, "nights are marked");
        // With the classroom's policies, carol covers the nights.
        await page.$eval(
          "svc-session-timeline sl-select.session-group",
          (e: { value: string }, id: string) => {
            e.value = id;
            // deno-lint-ignore no-explicit-any
            (e as any).dispatchEvent(new Event("sl-change", { bubbles: true }));
          },
          group.id,
        );
        await page.waitForSelector("svc-session-timeline .session-ok", { visible: true });
        assert.deepEqual(
          await page.$$eval(
            "svc-session-timeline tr[data-subject]",
            (rows) => rows.map((r) => (r as unknown as { dataset: { subject: string } }).dataset.subject),
          ),
          ["alice", "bob", "carol"],
        );

        // Release: the library group would be locked out at night; the dialog asks for a reason.
        const release = await page.waitForFunction(() =>
          [...document.querySelectorAll("svc-policy-editor-page sl-button")].find((
            b: { textContent: string },
          ) => b.textContent.trim() === "Release")
        );
        await release.asElement()!.click();
        const confirm = await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", {
          visible: true,
        });
        await confirm!.click();
        await page.waitForSelector("svc-session-lockout-dialog .lockout-message", { visible: true });
        assert.match(
          await textOf(page, "svc-session-lockout-dialog .lockout-message"),
          /would lock node group "library" out\.\s+The SessionAccess rules name alice and bob\. None of them could log in/,
        );
        await fill(
          page,
          "svc-session-lockout-dialog sl-textarea.lockout-reason",
          "library opens only by day",
        );
        await page.click("svc-session-lockout-dialog sl-button.lockout-confirm");
        await page.waitForFunction(
          async (id: string) =>
            (await (await fetch(`/api/v1/policies/all/${id}`)).json()).state === "released",
          { polling: 500 },
          days.id,
        );
        const audit = await api.call("GET", "/api/v1/audit-logs?action=policy.state_change&per_page=50");
        const entry = audit.items.find((e: { resource_id: string }) => e.resource_id === days.id);
        assert.equal(entry?.details?.lockout_override, "library opens only by day", JSON.stringify(entry));
      });
    } finally {
      await repo.close();
    }
  },
});
