/**
 * The desktop editors in a real browser (Debian's Chromium driven by puppeteer-core) against a real
 * `svc-server` process, with a real enrolled `svc-agent` process on a temp root that has GNOME schemas and
 * KDE Plasma:
 *
 * - a Dconf policy is authored through the schema picker: search the catalogue, pick
 *   org.gnome.desktop.screensaver lock-delay (a number control with the schema's default shown), set 300, lock
 *   it; then an enum key through its choice list; free GVariant text is checked as you type;
 * - a Kconfig policy is authored through its form (a hidden System Settings module);
 * - both are released and bound; the agent writes the dconf keyfile (compiled by the real `dconf update`)
 *   and the KDE files, and reports both COMPLIANT.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { stringify } from "yaml";
import type { Page } from "puppeteer-core";
import {
  type AgentProcess,
  eventually,
  type Json,
  runAgentOnce,
  spawnAgent,
} from "../helpers/agent_process.ts";
import { browserTestSkipped, chooseOption as choose } from "../helpers/browser.ts";
import { withConsoleProcess } from "../helpers/console_login.ts";
import { fill, savePolicy as save, startNewPolicy as newPolicy } from "../helpers/editor_forms.ts";

const SCHEMAS = "/usr/share/glib-2.0/schemas";
const NODE = "desktop-editors-node";
// dconf-cli and gsettings-desktop-schemas besides Chromium.
const SKIP = browserTestSkipped("desktop editors browser test", [
  "/usr/bin/dconf",
  `${SCHEMAS}/org.gnome.desktop.screensaver.gschema.xml`,
]);

// deno-lint-ignore no-explicit-any
declare const document: any;

/**
 * Clicks `selector` once it is in the middle of the viewport: the guided flow keeps its action bar at the
 * bottom, over whatever scrolled there.
 */
async function clickCentered(page: Page, selector: string): Promise<void> {
  const el = await page.waitForSelector(selector, { visible: true });
  await el!.evaluate((e: { scrollIntoView(o: unknown): void }) => e.scrollIntoView({ block: "center" }));
  await el!.click();
}

Deno.test({
  name: "desktop editors: Dconf through the schema picker, Kconfig through its form, applied by a real agent",
  ignore: SKIP,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const base = await Deno.makeTempDir({ prefix: "svc-desktop-ui-" });
    const root = join(base, "root");
    const agentData = join(base, "agent-data");
    await Deno.mkdir(`${root}${SCHEMAS}`, { recursive: true });
    for await (const e of Deno.readDir(SCHEMAS)) {
      if (/\.(xml|override)$/.test(e.name)) {
        await Deno.copyFile(`${SCHEMAS}/${e.name}`, `${root}${SCHEMAS}/${e.name}`);
      }
    }
    await Deno.mkdir(`${root}/usr/bin`, { recursive: true });
    await Deno.writeTextFile(`${root}/usr/bin/plasmashell`, "");
    let agent: AgentProcess | undefined;
    try {
      await withConsoleProcess(
        { viewport: { width: 1280, height: 1000 }, path: false },
        async ({ server, page, logIn, api: adminApi }) => {
          const api = await adminApi();
          const group = await api.call("POST", "/api/v1/node-groups", { name: "desktops" });
          const { token } = await api.call("POST", `/api/v1/node-groups/${group.id}/tokens`);
          const configPath = join(base, "agent.yaml");
          await Deno.writeTextFile(
            configPath,
            stringify({
              server: {
                address: "localhost",
                enrollment_port: server.process.webPort,
                policy_port: server.process.policyPort,
              },
              agent: { client_id: NODE, root_dir: root },
              enrollment: { data_dir: agentData },
              log: { level: "debug" },
            }),
          );
          await Deno.chmod(configPath, 0o600);
          const agentEnv = {
            SSL_CERT_FILE: join(server.process.dataDir, "pki", "ca", "ca.crt"),
            SVC_ENROLLMENT_TOKEN: "",
          };
          const tokenFile = join(base, "token");
          await Deno.writeTextFile(tokenFile, token);
          const enrolled = await runAgentOnce(configPath, agentEnv, ["--token-file", tokenFile]);
          assert.equal(enrolled.code, 0, enrolled.stderr);
          agent = spawnAgent(configPath, agentEnv);

          await logIn();
          const webBase = server.web;

          // Dconf through the picker.
          await newPolicy(page, webBase, "Dconf", "GNOME lock screen");
          await page.waitForSelector("svc-dconf-form sl-button.dconf-add", { visible: true });
          await clickCentered(page, "svc-dconf-form sl-button.dconf-add");
          await fill(page, "svc-gsettings-picker sl-input.gsettings-search", "time before locking");
          const lockDelay =
            'button.gsettings-key[data-schema="org.gnome.desktop.screensaver"][data-key="lock-delay"]';
          await page.waitForSelector(lockDelay, { visible: true });
          await clickCentered(page, lockDelay);
          await page.waitForSelector(
            'svc-dconf-form fieldset.dconf-entry[data-index="0"] sl-input.dconf-value[type=number]',
            {
              visible: true,
            },
          );
          assert.match(
            await page.$eval('fieldset.dconf-entry[data-index="0"] .dconf-default', (e) => e.textContent!),
            /Default: 0/,
          );
          await fill(page, 'fieldset.dconf-entry[data-index="0"] sl-input.dconf-value', "300");
          await clickCentered(page, 'fieldset.dconf-entry[data-index="0"] sl-switch.dconf-lock');
          // An enum key gets a choice list.
          await clickCentered(page, "svc-dconf-form sl-button.dconf-add");
          await fill(page, "svc-gsettings-picker sl-input.gsettings-search", "picture-options");
          const pictureOptions =
            'button.gsettings-key[data-schema="org.gnome.desktop.background"][data-key="picture-options"]';
          await page.waitForSelector(pictureOptions, { visible: true });
          await clickCentered(page, pictureOptions);
          await choose(page, 'fieldset.dconf-entry[data-index="1"] sl-select.dconf-value', "centered");
          // Free GVariant text for a key the catalogue does not know is checked as you type.
          await clickCentered(page, "svc-dconf-form sl-button.dconf-add-free");
          await fill(page, 'fieldset.dconf-entry[data-index="2"] sl-input.dconf-value', "'unterminated");
          await page.waitForFunction(() =>
            document.querySelector('fieldset.dconf-entry[data-index="2"] sl-input.dconf-value')?.helpText
              ?.includes(
                "unterminated string",
              )
          );
          await clickCentered(page, 'fieldset.dconf-entry[data-index="2"] sl-button.dconf-remove');
          const dconfId = await save(page);
          const stored = await api.call("GET", `/api/v1/policies/all/${dconfId}`);
          assert.deepEqual(JSON.parse(stored.content), {
            entries: [
              {
                key: "lock-delay",
                lock: true,
                schema_id: "org.gnome.desktop.screensaver",
                value: "uint32 300",
              },
              { key: "picture-options", schema_id: "org.gnome.desktop.background", value: "'centered'" },
            ],
          });

          // Kconfig through its generated form: a hidden System Settings module.
          await newPolicy(page, webBase, "Kconfig", "KDE kiosk");
          await page.waitForSelector("svc-schema-form", { visible: true });
          const kcm = await page.waitForFunction(() => {
            const rows = [...document.querySelectorAll("svc-schema-form .field-row")];
            const row = rows.find((r: { dataset: { field: string } }) =>
              r.dataset.field === "kcmRestrictions"
            );
            return row?.querySelector("sl-textarea") ?? null;
          });
          await kcm.asElement()!.evaluate((e: { scrollIntoView(o: unknown): void }) =>
            e.scrollIntoView({ block: "center" })
          );
          await fill(page, '.field-row[data-field="kcmRestrictions"] sl-textarea', "kcm_kscreen");
          const kconfigId = await save(page);
          const kstored = await api.call("GET", `/api/v1/policies/all/${kconfigId}`);
          assert.deepEqual(JSON.parse(kstored.content), { kcm_restrictions: ["kcm_kscreen"] });

          for (const id of [dconfId, kconfigId]) {
            await api.call("PUT", `/api/v1/policies/all/${id}/state`, { state: "released" });
            const binding = await api.call("POST", "/api/v1/policy-bindings", {
              policy_id: id,
              node_group_id: group.id,
              priority: 10,
            });
            await api.call("PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled" });
          }

          const node = await eventually(
            async () => {
              const page = await api!.call("GET", `/api/v1/nodes?search=${NODE}`);
              return page.items.find((n: Json) => n.name === NODE);
            },
            30_000,
            "the node",
            agent.output,
          );
          const compliance = await eventually(
            async () => {
              const c = await api!.call("GET", `/api/v1/nodes/${node.id}/compliance`);
              return c.results.length === 2 && c.results.every((r: Json) => r.status === "compliant")
                ? c
                : undefined;
            },
            60_000,
            "both policies COMPLIANT",
            () => agent!.output(),
          );
          const dconf = compliance.results.find((r: Json) => r.policy_id === dconfId);
          assert.deepEqual(dconf.items.map((i: Json) => [i.key, i.status]), [["lock-delay", "compliant"], [
            "picture-options",
            "compliant",
          ]]);
          const keyfile = await Deno.readTextFile(`${root}/etc/dconf/db/local.d/svc-policies`);
          assert.match(keyfile, /lock-delay=uint32 300/);
          const locks = await Deno.readTextFile(`${root}/etc/dconf/db/local.d/locks/svc-policies`);
          assert.deepEqual(locks.split("\n").filter((l) => l.startsWith("/")), [
            "/org/gnome/desktop/screensaver/lock-delay",
          ]);
          assert.ok(
            (await Deno.stat(`${root}/etc/dconf/db/local`)).isFile,
            "dconf update compiled the database",
          );
          assert.match(await Deno.readTextFile(`${root}/etc/kde5rc`), /kcm_kscreen=false/);
        },
      );
    } finally {
      await agent?.stop();
      await Deno.remove(base, { recursive: true }).catch(() => {});
    }
  },
});
