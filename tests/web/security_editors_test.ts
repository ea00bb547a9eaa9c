/**
 * The Polkit and Firewalld editors.
 *
 * - The Firewalld zone form's catalogue labels every field of the content message and names no other.
 * - In a real browser (Debian's Chromium driven by puppeteer-core) against a real `svc-server` process: a
 *   Polkit rule is built from the action picker (search, implicit defaults shown, add an id and a prefix), the
 *   preview shows the generated rule, and the saved policy holds what was picked; a Firewalld zone is built
 *   through the form, a hostile rich rule is refused in place naming the value, and the saved zone is what was
 *   entered.
 */
import assert from "node:assert/strict";
import { FirewalldPolicySchema } from "../../shared/gen/svc/policy/v1/firewalld_pb.ts";
import { firewalldEditor } from "../../web/src/editors/firewalld.ts";
import { catalogueGaps, fill, savePolicy as save, startNewPolicy } from "../helpers/editor_forms.ts";
import { browserTest, browserTestSkipped, textOf } from "../helpers/browser.ts";
import { withConsoleProcess } from "../helpers/console_login.ts";

Deno.test("Firewalld editor: the zone form's catalogue covers every field and names no other", () => {
  assert.deepEqual(catalogueGaps(firewalldEditor.hints.catalogue!.fieldInfo, FirewalldPolicySchema), {
    unlabelled: [],
    noField: [],
  });
});

// deno-lint-ignore no-explicit-any
declare const document: any;

browserTest(
  "Polkit rule from the action picker and Firewalld zone through the form, in the browser",
  browserTestSkipped("Polkit/Firewalld browser test"),
  async () => {
    await withConsoleProcess({
      viewport: { width: 1280, height: 1000 },
      failureShot: "security-editors",
    }, async ({ server, page, api: adminApi }) => {
      const api = await adminApi();
      page.on("dialog", (dialog) => void dialog.accept());
      const web = server.web;

      // Polkit: pick an action from the catalogue; its defaults show; the preview shows the rule.
      await startNewPolicy(page, web, "Polkit", "no reboot for users");
      await page.waitForSelector("svc-polkit-form sl-input.polkit-search", { visible: true });
      assert.match(await textOf(page, "svc-polkit-form .polkit-priority"), /higher binding priority wins/);
      await fill(page, "svc-polkit-form sl-input.polkit-search", "login1.reboot");
      const hit = 'li.polkit-hit[data-action-id="org.freedesktop.login1.reboot"]';
      await page.waitForSelector(hit, { visible: true });
      assert.match(await textOf(page, `${hit} .polkit-defaults`), /active\s+yes/);
      await page.click(`${hit} sl-button`);
      await page.waitForFunction(() =>
        document.querySelector("svc-polkit-form .polkit-preview")?.textContent.includes(
          'action.id === "org.freedesktop.login1.reboot"',
        )
      );
      const prefix = 'sl-button.polkit-prefix[data-prefix="org.freedesktop.login1."]';
      await page.waitForSelector(prefix, { visible: true });
      await page.click(prefix);
      await page.waitForFunction(() =>
        document.querySelector("svc-polkit-form .polkit-preview")?.textContent.includes(
          'action.id.indexOf("org.freedesktop.login1.") === 0',
        )
      );
      assert.match(
        await textOf(page, "svc-polkit-form .polkit-preview"),
        /return polkit\.Result\.AUTH_ADMIN;/,
      );
      const polkitId = await save(page);
      const polkit = await api.call("GET", `/api/v1/policies/all/${polkitId}`);
      const rule = JSON.parse(polkit.content).rules[0];
      assert.deepEqual(rule.action_ids ?? rule.actionIds, ["org.freedesktop.login1.reboot"]);
      assert.deepEqual(rule.action_prefixes ?? rule.actionPrefixes, ["org.freedesktop.login1."]);
      assert.equal(rule.result, "POLKIT_RESULT_AUTH_ADMIN");

      // Firewalld: a zone through the form; a hostile rich rule is refused in place.
      await startNewPolicy(page, web, "Firewalld", "office zone");
      await page.waitForSelector('.field-row[data-field="zones"] sl-button.add-item', { visible: true });
      await page.click('.field-row[data-field="zones"] sl-button.add-item');
      await fill(page, '.field-row[data-field="zones[0].name"] sl-input', "office");
      await fill(page, '.field-row[data-field="zones[0].services"] sl-textarea', "ssh");
      await fill(
        page,
        '.field-row[data-field="zones[0].richRules"] sl-textarea',
        'rule family="ipv4" source address="10.0.0.0/8" service name="</zone>" accept',
      );
      await page.waitForFunction(() =>
        /service name "<\/zone>" must be a name/.test(
          document.querySelector('.field-row[data-field="zones[0].richRules"] .field-error')?.textContent ??
            "",
        )
      );
      assert.match(await textOf(page, ".validation-summary"), /1 problem/);
      assert.ok(await page.$eval("sl-button.save-policy", (b) => b.hasAttribute("disabled")));
      await fill(
        page,
        '.field-row[data-field="zones[0].richRules"] sl-textarea',
        'rule family="ipv4" source address="10.0.0.0/8" service name="https" accept',
      );
      const firewalldId = await save(page);
      const firewalld = await api.call("GET", `/api/v1/policies/all/${firewalldId}`);
      const zone = JSON.parse(firewalld.content).zones[0];
      assert.equal(zone.name, "office");
      assert.deepEqual(zone.services, ["ssh"]);
      assert.deepEqual(zone.rich_rules ?? zone.richRules, [
        'rule family="ipv4" source address="10.0.0.0/8" service name="https" accept',
      ]);
    });
  },
);
