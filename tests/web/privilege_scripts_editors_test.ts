/**
 * The Privilege and Scripts editors.
 *
 * - The Privilege form's catalogue labels every field of the content message and names no other; its preview is
 *   the agent's own rendering.
 * - The script highlighter gives back the text it was given and colours comments, strings, variables and keywords.
 * - In a real browser (Debian's Chromium) against a real `svc-server` process: a Scripts policy shows the warning,
 *   highlights what is typed, is refused on save with the shell's words and line, saves once fixed, and "Run again"
 *   raises the counter; a Privilege policy previews the sudoers lines the option produces. A person without
 *   `policy:edit_scripts` is told the server refused, in words.
 */
import assert from "node:assert/strict";
import type { Page } from "puppeteer-core";
import { PrivilegePolicySchema } from "../../shared/gen/svc/policy/v1/privilege_pb.ts";
import { privilegeEditor, privilegePreview } from "../../web/src/editors/privilege.ts";
import { shellTokens } from "../../web/src/shell_highlight.ts";
import { permissionWords } from "../../web/src/permission_text.ts";
import { catalogueGaps, startNewPolicy } from "../helpers/editor_forms.ts";
import { browserTest, browserTestSkipped } from "../helpers/browser.ts";
import { openConsoleLoggedIn, withConsoleProcess } from "../helpers/console_login.ts";

Deno.test("Privilege editor: the catalogue covers every field; the preview is the agent's rendering", () => {
  assert.deepEqual(
    catalogueGaps(privilegeEditor.hints.catalogue!.fieldInfo, PrivilegePolicySchema),
    { unlabelled: [], noField: [] },
  );
  const preview = privilegePreview({
    entries: [{ user: "alice", effect: "PRIVILEGE_EFFECT_ALLOW" }],
    localSudoGroupNotAdmin: true,
  });
  assert.ok("sudoers" in preview);
  assert.match(preview.sudoers, /^alice ALL=\(ALL:ALL\) ALL\n(?:#.*\n)%sudo ALL=\(ALL:ALL\) !ALL$/m);
  assert.match(preview.polkit, /return \["unix-user:alice"\];/);
  assert.ok("problem" in privilegePreview({}));
  assert.equal(permissionWords("policy:edit_scripts"), "create and edit Scripts policies");
});

Deno.test("script highlighting: tokens join back to the text and name comments, strings, variables, keywords", () => {
  const text = "#!/bin/bash\nif [ -n \"$HOME\" ]; then\n  echo 'a # b' ${X:-y} $(id) # done\nfi\nfifo=1\n";
  const tokens = shellTokens(text);
  assert.equal(tokens.map((t) => t.text).join(""), text);
  const of = (kind: string) => tokens.filter((t) => t.kind === kind).map((t) => t.text);
  assert.deepEqual(of("comment"), ["#!/bin/bash", "# done"]);
  assert.deepEqual(of("string"), ['"$HOME"', "'a # b'"]);
  assert.deepEqual(of("variable"), ["${X:-y}", "$("]);
  assert.deepEqual(of("keyword"), ["if", "then", "fi"], "fifo is not the keyword fi");
  for (const odd of ['echo "unterminated', "echo 'open", "${", "\\", "$"]) {
    assert.equal(shellTokens(odd).map((t) => t.text).join(""), odd);
  }
});

const SKIP = browserTestSkipped("Privilege/Scripts browser test");

// deno-lint-ignore no-explicit-any
declare const document: any;

/** Replaces the text of the script editor `index` as typing would. */
async function typeScript(page: Page, index: number, text: string): Promise<void> {
  const area = `svc-scripts-form .script-card[data-index="${index}"] textarea.script-body`;
  await page.waitForSelector(area, { visible: true });
  await page.click(area);
  await page.keyboard.down("Control");
  await page.keyboard.press("a");
  await page.keyboard.up("Control");
  await page.keyboard.press("Backspace");
  await page.type(area, text);
}

browserTest(
  "Scripts and Privilege editors in the browser: warning, highlighting, dry run on save, run again, preview",
  SKIP,
  async () => {
    await withConsoleProcess({
      viewport: { width: 1280, height: 1100 },
      timeoutMs: 90_000,
      failureShot: "scripts-editors",
    }, async ({ server, browser, page, api: adminApi }) => {
      page.setDefaultNavigationTimeout(90_000);
      const api = await adminApi();
      // Leaving an editor with changes asks the browser's own question; the test says leave.
      page.on("dialog", (dialog) => void dialog.accept());
      const web = server.web;

      await startNewPolicy(page, web, "Scripts", "lab startup");
      await page.waitForSelector("svc-scripts-form sl-button.script-add", { visible: true });
      assert.match(
        await page.$eval("svc-scripts-form .scripts-warning", (e) => e.textContent ?? ""),
        /machine scripts run as root/,
      );
      await page.click("svc-scripts-form sl-button.script-add");
      await typeScript(page, 0, 'if true; then\necho "$HOME" # home\n');
      await page.waitForFunction(() =>
        document.querySelector("svc-scripts-form .script-highlight .sh-keyword")?.textContent === "if" &&
        document.querySelector("svc-scripts-form .script-highlight .sh-string")?.textContent === '"$HOME"' &&
        document.querySelector("svc-scripts-form .script-highlight .sh-comment")?.textContent === "# home"
      );
      await page.waitForFunction(() =>
        document.querySelector(".validation-summary")?.textContent?.includes("No problems")
      );
      await page.click("sl-button.save-policy");
      await page.waitForFunction(() => /bash -n: line \d+: syntax error/.test(document.body.innerText));
      assert.match(new URL(page.url()).pathname, /\/policies\/new$/, "nothing was saved");
      await typeScript(page, 0, 'if true; then\necho "$HOME"\nfi\n');
      await page.click("sl-button.save-policy");
      await page.waitForFunction(() => /^\/policies\/[0-9a-f-]{36}\/edit$/.test(location.pathname));
      const id = new URL(page.url()).pathname.split("/")[2];
      await page.waitForSelector("svc-scripts-form sl-button.script-run-again-button", { visible: true });
      await page.click("svc-scripts-form sl-button.script-run-again-button");
      await page.waitForFunction(() =>
        /Asked to run again 1 time/.test(
          document.querySelector("svc-scripts-form .script-run-again")?.textContent,
        )
      );
      await page.click("sl-button.save-policy");
      await page.waitForFunction(
        async (policyId: string) => {
          const r = await fetch(`/api/v1/policies/all/${policyId}`, { credentials: "include" });
          const content = JSON.parse((await r.json()).content);
          return content.scripts[0].run_again === 1;
        },
        {},
        id,
      );
      const saved = JSON.parse((await api.call("GET", `/api/v1/policies/all/${id}`)).content);
      assert.equal(saved.scripts[0].body, 'if true; then\necho "$HOME"\nfi\n');
      assert.equal(saved.scripts[0].trigger, "SCRIPT_TRIGGER_MACHINE_STARTUP");

      // Privilege: the option previews the revocation of the local sudo group.
      await startNewPolicy(page, web, "Privilege", "no local admins");
      await page.waitForSelector("svc-privilege-form .privilege-merge", { visible: true });
      const option = '.field-row[data-field="localSudoGroupNotAdmin"] sl-select';
      await page.waitForSelector(option, { visible: true });
      await page.$eval(option, (select: { value: string; dispatchEvent(e: Event): void }) => {
        select.value = "true";
        select.dispatchEvent(new CustomEvent("sl-change", { bubbles: true }));
      });
      await page.waitForFunction(() =>
        document.querySelector("svc-privilege-form .privilege-preview-sudoers")?.textContent?.includes(
          "%sudo ALL=(ALL:ALL) !ALL",
        )
      );

      // A Policy Editor (who lacks policy:edit_scripts) is told why in words.
      const password = "an editor's long password";
      const roles = await api.call("GET", "/api/v1/roles?per_page=100");
      const editorRole = roles.items.find((r: { name: string }) => r.name === "Policy Editor").id;
      const user = await api.call("POST", "/api/v1/users", { username: "ed", password });
      await api.call("POST", `/api/v1/users/${user.id}/role-bindings`, {
        role_id: editorRole,
        step_up: { password: server.adminPassword },
      });
      const edContext = await browser.createBrowserContext();
      const edPage = await edContext.newPage();
      edPage.setDefaultTimeout(90_000);
      edPage.setDefaultNavigationTimeout(90_000);
      await openConsoleLoggedIn(edPage, web, { username: "ed", password });
      await edPage.goto(`${web}/policies/${id}/edit`, { waitUntil: "load" });
      await edPage.waitForSelector("svc-scripts-form .script-card", { visible: true });
      await typeScript(edPage, 0, "echo edited\n");
      await edPage.click("sl-button.save-policy");
      await edPage.waitForFunction(() =>
        /Not allowed: .*create and edit Scripts policies/.test(document.body.innerText)
      );
    });
  },
);
