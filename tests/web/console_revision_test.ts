/**
 * Changing a released policy without an outage, and watching it roll out, in a real browser (Debian's Chromium driven by
 * puppeteer-core) against a real `svc-server` process and a real enrolled `svc-agent` on a temp root with
 * Firefox:
 *
 * - "Edit" on the released policy starts a revision; the page edits it and shows its diff against the
 *   released version, setting by setting while the agent keeps the released settings (policies.json is read throughout: it never
 *   loses the released setting and gains the new one only after "Release revision");
 * - "Release revision" bumps the version once and the agent applies the new content; the policy page's
 *   rollout panel watches it land: "Applied" on the running agent, "Pending" with "Offline since" on a
 *   second enrolled agent that was stopped before the release; the pending filter; the policy list shows the
 *   same counts;
 * - "Discard revision" leaves the policy as it is; "Duplicate" opens a new draft copy;
 * - axe-core finds no serious or critical violation on the revision editor, its dialogs, the rollout panel
 *   and the policy list.
 *
 * Screenshots of each state go to `test-artifacts/console/`.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { stringify } from "yaml";
import type { Page } from "puppeteer-core";
import type { ServerProcess } from "../helpers/process.ts";
import { type AgentProcess, eventually, runAgentOnce, spawnAgent } from "../helpers/agent_process.ts";
import { browserTest, browserTestSkipped, screenshot, seriousAxeViolations } from "../helpers/browser.ts";
import { withConsoleProcess } from "../helpers/console_login.ts";

const NODE = "revision-node";
const OFFLINE_NODE = "offline-node";
const POLICIES_JSON = "/etc/firefox/policies/policies.json";
const SKIP = browserTestSkipped("revision browser test");

// deno-lint-ignore no-explicit-any
declare const document: any;
// deno-lint-ignore no-explicit-any
declare const location: any;
/** The parts of a DOM element the page-side code touches. */
// deno-lint-ignore no-explicit-any
type El = any;

const shot = (page: Page, name: string) => screenshot(page, "console", name);

/** Serious and critical axe-core violations on the page once its toasts have settled. */
const axeViolations = (page: Page) => seriousAxeViolations(page, { afterToasts: true });

/** Clicks the confirm button of the open confirmation dialog. */
async function confirmDialog(page: Page): Promise<void> {
  const ok = await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
  await ok!.click();
}

/** Enrolls a real agent (its own temp root with Firefox) into the group of `token`; returns its paths. */
async function enrollAgent(
  server: ServerProcess,
  base: string,
  name: string,
  options: { token: string; osName: string },
): Promise<{ root: string; configPath: string; env: Record<string, string> }> {
  const root = join(base, name, "root");
  await Deno.mkdir(`${root}/usr/lib/firefox`, { recursive: true });
  await Deno.mkdir(`${root}/etc/firefox/policies`, { recursive: true });
  await Deno.writeTextFile(`${root}/etc/os-release`, `NAME="${options.osName}"\nVERSION_ID="12"\n`);
  const configPath = join(base, name, "agent.yaml");
  await Deno.writeTextFile(
    configPath,
    stringify({
      server: { address: "localhost", enrollment_port: server.webPort, policy_port: server.policyPort },
      agent: { client_id: name, root_dir: root },
      enrollment: { data_dir: join(base, name, "agent-data") },
      log: { level: "debug" },
    }),
  );
  await Deno.chmod(configPath, 0o600);
  const env = { SSL_CERT_FILE: join(server.dataDir, "pki", "ca", "ca.crt"), SVC_ENROLLMENT_TOKEN: "" };
  const tokenFile = join(base, name, "token");
  await Deno.writeTextFile(tokenFile, options.token);
  const enrolled = await runAgentOnce(configPath, env, ["--token-file", tokenFile]);
  assert.equal(enrolled.code, 0, enrolled.stderr);
  return { root, configPath, env };
}

browserTest(
  "a released policy is changed as a revision in the browser while a real agent keeps the old settings",
  SKIP,
  async () => {
    const base = await Deno.makeTempDir({ prefix: "svc-revision-ui-" });
    let agent: AgentProcess | undefined;
    let offlineAgent: AgentProcess | undefined;
    let watching = true;
    let watcher: Promise<void> | undefined;
    try {
      await withConsoleProcess({
        path: false,
        viewport: { width: 1280, height: 1000 },
        // Every wait below is on a condition; the budget only bounds a hang, so it is generous for a loaded machine.
        timeoutMs: 180_000,
        failureShot: "console",
      }, async ({ server: { process: server, web }, page, watch, logIn, api: adminApi }) => {
        const api = await adminApi();
        const group = await api.call("POST", "/api/v1/node-groups", { name: "browsers" });
        const newToken = async () =>
          (await api.call("POST", `/api/v1/node-groups/${group.id}/tokens`)).token as string;
        const first = await enrollAgent(server, base, NODE, {
          token: await newToken(),
          osName: "Debian GNU/Linux",
        });
        const policiesFile = `${first.root}${POLICIES_JSON}`;
        agent = spawnAgent(first.configPath, first.env);
        // A second node that goes offline before the change: it must show as pending, offline since ….
        const second = await enrollAgent(server, base, OFFLINE_NODE, {
          token: await newToken(),
          osName: "Fedora Linux",
        });
        offlineAgent = spawnAgent(second.configPath, second.env);

        const policy = await api.call("POST", "/api/v1/policies/all", {
          name: "Browser hardening",
          type: "Firefox",
          content: JSON.stringify({ DisableTelemetry: true }),
        });
        await api.call("PUT", `/api/v1/policies/all/${policy.id}/state`, { state: "released" });
        const binding = await api.call("POST", "/api/v1/policy-bindings", {
          policy_id: policy.id,
          node_group_id: group.id,
        });
        await api.call("PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled" });
        const readPolicies = async () => JSON.parse(await Deno.readTextFile(policiesFile)).policies ?? {};
        await eventually(
          async () => (await readPolicies()).DisableTelemetry === true,
          180_000,
          "the agent applies the released policy",
          () => agent!.output(),
        );

        await eventually(
          async () =>
            (await api.call("GET", `/api/v1/policies/all/${policy.id}/rollout`)).counts.compliant === 2,
          180_000,
          "both nodes report the released version",
          () => offlineAgent!.output(),
        );
        await offlineAgent.stop();
        await eventually(
          async () =>
            (await api.call("GET", `/api/v1/policies/all/${policy.id}/rollout?search=${OFFLINE_NODE}`))
              .items[0]?.node_status === "offline",
          180_000,
          "the stopped node is offline",
        );

        // From here on, every read of the file must keep the released setting.
        const reads: Array<{ at: number; policies: Record<string, unknown> }> = [];
        watcher = (async () => {
          while (watching) {
            try {
              reads.push({ at: Date.now(), policies: await readPolicies() });
            } catch (err) {
              reads.push({ at: Date.now(), policies: { unreadable: String(err) } });
            }
            await new Promise((r) => setTimeout(r, 50));
          }
        })();

        // Log in from the page (the login screen has tests of its own): the session cookies are the browser's.
        await logIn();

        // The released policy is read-only and offers Edit.
        await page.goto(`${web}/policies/${policy.id}/edit`, { waitUntil: "domcontentloaded" });
        await page.waitForSelector("svc-policy-editor-page sl-button.start-revision", { visible: true });
        assert.match(
          await page.$eval("svc-policy-editor-page .read-only-note", (e) => e.textContent ?? ""),
          /Edit starts a revision/,
        );
        await shot(page, "revision-1-released");
        await page.click("svc-policy-editor-page sl-button.start-revision");
        // sl-alert is display: contents (no box of its own), so wait for it to exist.
        await page.waitForSelector("svc-policy-editor-page .revision-note");
        assert.match(
          await page.$eval("svc-policy-editor-page .diff-summary", (e) => e.textContent ?? ""),
          /No changes yet/,
        );

        // Change the revision through the JSON view and save it.
        await page.$eval("svc-policy-editor-page sl-textarea.json-view", (e: { value: string }) => {
          e.value = JSON.stringify({ DisableTelemetry: true, DisablePocket: true });
          // deno-lint-ignore no-explicit-any
          (e as any).dispatchEvent(new Event("sl-change", { bubbles: true }));
        });
        // The diff names the setting as the editor does, with its old and new value.
        await page.waitForFunction(() =>
          /Turn off Pocket[\s\S]*\(not set\)[\s\S]*on/.test(
            document.querySelector('svc-policy-editor-page table.setting-diff tr[data-key="DisablePocket"]')
              ?.textContent ?? "",
          )
        );
        await page.click("svc-policy-editor-page sl-button.save-policy");
        await page.waitForFunction(
          async (id: string) => {
            const res = await fetch(`/api/v1/policies/all/${id}/revision`);
            return res.ok && (await res.json()).content.includes("DisablePocket");
          },
          { polling: 300 },
          policy.id,
        );
        await page.waitForSelector('svc-policy-editor-page table.setting-diff tr[data-key="DisablePocket"]', {
          visible: true,
        });
        await shot(page, "revision-2-diff");
        assert.deepEqual(await axeViolations(page), [], "axe on the revision editor");

        // The agent keeps the released content while the revision exists (a few syncs' worth of reads).
        const savedAt = Date.now();
        await eventually(() => reads.filter((r) => r.at > savedAt).length >= 20, 180_000, "file reads");
        assert.equal((await readPolicies()).DisablePocket, undefined, "the revision is not delivered");
        assert.equal(
          (await api.call("GET", `/api/v1/policies/all/${policy.id}`)).version,
          policy.version,
          "saving a revision does not bump the version",
        );

        // Release the revision through its confirmation.
        await page.click("svc-policy-editor-page sl-button.release-revision");
        await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
        await shot(page, "revision-3-release-confirm");
        assert.deepEqual(await axeViolations(page), [], "axe on the release confirmation");
        const releasedAt = Date.now();
        await confirmDialog(page);
        await eventually(
          async () => (await readPolicies()).DisablePocket === true,
          180_000,
          "the agent applies the released revision",
          () => agent!.output(),
        );
        await page.waitForSelector("svc-policy-editor-page sl-button.start-revision", { visible: true });
        assert.match(
          await page.$eval("svc-policy-editor-page .page-intro", (e) => e.textContent ?? ""),
          new RegExp(`version ${policy.version + 1}`),
        );
        // The rollout panel watches version 2 land: applied on the running agent, pending on the offline one.
        await page.waitForFunction(
          (version: number) =>
            document.querySelector("svc-policy-rollout h2")?.textContent.replace(/\s+/g, " ").includes(
              `Rollout of version ${version}`,
            ),
          {},
          policy.version + 1,
        );
        await page.waitForSelector(
          `svc-policy-rollout tr[data-node="${OFFLINE_NODE}"][data-state="pending"]`,
        );
        await page.waitForSelector(`svc-policy-rollout tr[data-node="${NODE}"][data-state="compliant"]`);
        assert.match(
          await page.$eval(`svc-policy-rollout tr[data-node="${OFFLINE_NODE}"]`, (e) => e.textContent ?? ""),
          /Pending[\s\S]*Offline since/,
        );
        assert.match(
          await page.$eval("svc-policy-rollout .rollout-updated", (e) => e.textContent ?? ""),
          /Live|Updated/,
        );
        await page.click('svc-policy-rollout sl-button.rollout-filter[data-state="pending"]');
        await page.waitForFunction(
          (node: string) => {
            const rows = [...document.querySelectorAll("svc-policy-rollout tbody tr")];
            return rows.length === 1 && rows[0].dataset.node === node;
          },
          {},
          OFFLINE_NODE,
        );
        await shot(page, "revision-4-released-v2");
        assert.deepEqual(await axeViolations(page), [], "axe on the policy page with its rollout");
        watching = false;
        await watcher;
        const lost = reads.filter((r) => r.policies.DisableTelemetry !== true);
        assert.deepEqual(lost, [], "policies.json never lost the released setting");
        const early = reads.filter((r) => r.at < releasedAt && r.policies.DisablePocket !== undefined);
        assert.deepEqual(early, [], "the new setting appeared only after the release");
        assert.ok(reads.length > 40, `the file was watched (${reads.length} reads)`);

        // The policy list shows the same counts.
        await page.goto(`${web}/policies`, { waitUntil: "domcontentloaded" });
        await page.waitForSelector(`tr[data-policy-id="${policy.id}"] .rollout-summary`);
        assert.match(
          await page.$eval(`tr[data-policy-id="${policy.id}"] .rollout-cell`, (e) => e.textContent ?? ""),
          /1 of 2 applied\s*·\s*1 pending/,
        );
        await shot(page, "rollout-policy-list");
        assert.deepEqual(await axeViolations(page), [], "axe on the policy list");

        // The node list's OS filter matches a value with spaces.
        await page.goto(`${web}/nodes`, { waitUntil: "domcontentloaded" });
        await page.waitForSelector(`svc-nodes-page tr[data-node-id]`);
        await page.waitForSelector('svc-nodes-page sl-select[label="Operating system"] sl-option');
        await page.$eval('svc-nodes-page sl-select[label="Operating system"]', (select: El) => {
          const option = [...select.querySelectorAll("sl-option")].find((o: El) =>
            o.textContent.trim() === "Debian GNU/Linux"
          );
          select.value = option.value;
          select.dispatchEvent(new Event("sl-change", { bubbles: true }));
        });
        await page.waitForFunction(() =>
          new URLSearchParams(location.search).get("os") === "Debian GNU/Linux"
        );
        await page.waitForFunction(
          (node: string) => {
            const rows = [...document.querySelectorAll("svc-nodes-page tbody tr[data-node-id]")];
            return rows.length === 1 && rows[0].textContent.includes(node);
          },
          {},
          NODE,
        );
        assert.match(
          await page.$eval(
            "svc-nodes-page tbody tr[data-node-id] .compliance-cell",
            (e) => e.textContent ?? "",
          ),
          /Compliant\s+1 policy/,
        );
        assert.match(
          await page.$eval("svc-nodes-page tbody tr[data-node-id] .last-seen", (e) => e.textContent ?? ""),
          /Connected since/,
          "an online node shows since when it is connected, not a stale last-seen",
        );
        await page.reload({ waitUntil: "domcontentloaded" });
        await page.waitForFunction(() =>
          document.querySelector('svc-nodes-page sl-select[label="Operating system"]')?.value ===
            encodeURIComponent("Debian GNU/Linux")
        );
        await shot(page, "nodes-os-filter");
        await page.goto(`${web}/policies/${policy.id}/edit`, { waitUntil: "domcontentloaded" });
        await page.waitForSelector("svc-policy-editor-page sl-button.start-revision", { visible: true });

        // Discard leaves the policy as it is.
        await page.click("svc-policy-editor-page sl-button.start-revision");
        await page.waitForSelector("svc-policy-editor-page sl-button.discard-revision", { visible: true });
        await page.click("svc-policy-editor-page sl-button.discard-revision");
        await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
        assert.deepEqual(await axeViolations(page), [], "axe on the discard confirmation");
        await confirmDialog(page);
        await page.waitForSelector("svc-policy-editor-page sl-button.start-revision", { visible: true });
        const after = await api.call("GET", `/api/v1/policies/all/${policy.id}`);
        assert.equal(after.version, policy.version + 1);
        assert.equal(after.revision_pending, false);
        assert.equal(after.content, '{"DisablePocket":true,"DisableTelemetry":true}');

        // The node list refreshes itself: the stopped node comes back online without a reload.
        await page.goto(`${web}/nodes`, { waitUntil: "domcontentloaded" });
        await page.waitForFunction(
          (node: string) => {
            const r = [...document.querySelectorAll("svc-nodes-page tbody tr[data-node-id]")].find((r: El) =>
              r.textContent.includes(node)
            );
            return r?.querySelector("sl-badge.status")?.textContent.trim() === "Offline";
          },
          {},
          OFFLINE_NODE,
        );
        // Its detail drawer is open while it comes back.
        await page.evaluate((node: string) => {
          const r = [...document.querySelectorAll("svc-nodes-page tbody tr[data-node-id]")].find((r: El) =>
            r.textContent.includes(node)
          );
          r.querySelector("button.link").click();
        }, OFFLINE_NODE);
        await page.waitForFunction(
          (status: string) =>
            document.querySelector("svc-node-detail dl.facts sl-badge.status")?.textContent.trim() === status,
          {},
          "Offline",
        );
        await page.evaluate(() => (globalThis as unknown as { svcMarker: number }).svcMarker = 1);
        offlineAgent = spawnAgent(second.configPath, second.env);
        await page.waitForFunction(
          (node: string) => {
            const r = [...document.querySelectorAll("svc-nodes-page tbody tr[data-node-id]")].find((r: El) =>
              r.textContent.includes(node)
            );
            return r?.querySelector("sl-badge.status")?.textContent.trim() === "Online";
          },
          {},
          OFFLINE_NODE,
        );
        assert.equal(
          await page.evaluate(() => (globalThis as unknown as { svcMarker?: number }).svcMarker),
          1,
          "the page updated in place, without a reload",
        );
        // "Live" while the live-event stream is open, "Updated … ago" while the page polls.
        assert.match(
          await page.$eval("svc-nodes-page .updated-at", (e) => e.textContent ?? ""),
          /Live|Updated/,
        );
        await page.waitForFunction(
          (status: string) =>
            document.querySelector("svc-node-detail dl.facts sl-badge.status")?.textContent.trim() === status,
          {},
          "Online",
        );
        await shot(page, "nodes-live-update");
        // Every compliance number of the dashboard lands on exactly its rows.
        const summary = await api.call("GET", "/api/v1/compliance/summary");
        await page.goto(`${web}/`, { waitUntil: "domcontentloaded" });
        await page.waitForSelector("svc-dashboard-page .updated-at");
        assert.deepEqual(await axeViolations(page), [], "axe on the dashboard");
        for (const status of ["compliant", "unknown"]) {
          await page.goto(`${web}/compliance?status=${status}`, { waitUntil: "domcontentloaded" });
          await page.waitForSelector("svc-compliance-page .status-filter");
          await page.waitForFunction(
            (expected: number) => {
              const rows = document.querySelectorAll("svc-compliance-page table.data tbody tr").length;
              const empty = document.querySelector("svc-compliance-page .empty-state");
              return expected === 0 ? !!empty : rows === expected;
            },
            {},
            summary.results[status],
          );
        }
        await page.goto(`${web}/compliance`, { waitUntil: "domcontentloaded" });
        await page.waitForSelector("svc-compliance-page table.data tbody tr");
        // Unreported pairs are "Pending" here too, as in the rollout panel (stored and filtered as `unknown`).
        assert.match(
          await page.$eval("svc-compliance-page .status-filter", (e) => e.textContent ?? ""),
          /Pending \(\d+\)/,
        );
        assert.doesNotMatch(
          await page.$eval("svc-compliance-page", (e) => e.textContent ?? ""),
          /\bUnknown\b/,
          "one word for a policy not yet reported on its current version",
        );
        await shot(page, "compliance-problems-first");
        assert.deepEqual(await axeViolations(page), [], "axe on the compliance page");
        // The enrollment dialog's copy buttons have accessible names.
        await page.goto(`${web}/node-groups`, { waitUntil: "domcontentloaded" });
        await page.waitForSelector("svc-node-groups-page sl-button.generate-token");
        await page.click("svc-node-groups-page sl-button.generate-token");
        await page.waitForSelector("sl-dialog .token-box sl-copy-button");
        const names = [];
        for (const button of await page.$$("sl-dialog sl-copy-button")) {
          const inner = await button.$(">>> button");
          const node = await page.accessibility.snapshot({ root: inner!, interestingOnly: false });
          names.push(node?.name ?? "");
        }
        assert.deepEqual(names, ["Copy token", "Copy commands"]);
        assert.deepEqual(await axeViolations(page), [], "axe on the enrollment token dialog");
        await shot(page, "enrollment-dialog");

        // On a phone (390 px) the navigation is a menu, and no page overflows sideways.
        await page.setViewport({ width: 390, height: 844 });
        const phonePages: Array<[string, string]> = [
          ["/", "svc-dashboard-page .updated-at"],
          ["/nodes", "svc-nodes-page table.data"],
          [`/policies/${policy.id}/edit`, "svc-policy-rollout table.data"],
          ["/compliance", "svc-compliance-page table.data"],
        ];
        for (const [path, ready] of phonePages) {
          await page.goto(`${web}${path}`, { waitUntil: "domcontentloaded" });
          await page.waitForSelector(ready);
          const width = await page.evaluate(() => document.documentElement.scrollWidth);
          const wide = width <= 390
            ? []
            : await page.evaluate(() =>
              [...document.querySelectorAll("svc-app *")]
                .filter((e: El) => e.getBoundingClientRect().right > 392)
                .slice(0, 8)
                .map((e: El) => `${e.tagName.toLowerCase()}.${e.className}`)
            );
          assert.ok(width <= 390, `${path} is ${width} px wide at 390 px: ${wide.join(", ")}`);
        }
        assert.equal(await page.$eval("nav#main-nav", (e: El) => e.checkVisibility()), false, "menu closed");
        await page.click("button.nav-toggle");
        await page.waitForSelector("nav#main-nav", { visible: true });
        assert.equal(
          await page.$eval("button.nav-toggle", (e: El) => e.getAttribute("aria-expanded")),
          "true",
        );
        await shot(page, "mobile-menu-open");
        assert.deepEqual(await axeViolations(page), [], "axe on the open mobile menu");
        await page.click('nav#main-nav a[href="/nodes"]');
        await page.waitForFunction(() => location.pathname === "/nodes");
        await page.waitForFunction(() => !document.querySelector("nav#main-nav").checkVisibility());
        await shot(page, "mobile-nodes");
        await page.setViewport({ width: 1280, height: 1000 });
        await page.goto(`${web}/policies/${policy.id}/edit`, { waitUntil: "domcontentloaded" });
        await page.waitForSelector("svc-policy-editor-page sl-button.duplicate-policy", { visible: true });

        // Duplicate opens a new draft copy.
        await page.click("svc-policy-editor-page sl-button.duplicate-policy");
        await page.waitForFunction(
          (id: string) => location.pathname.endsWith("/edit") && !location.pathname.includes(id),
          {},
          policy.id,
        );
        await page.waitForSelector("svc-policy-editor-page sl-button.save-policy", { visible: true });
        assert.match(await page.$eval("svc-policy-editor-page h1", (e) => e.textContent ?? ""), /\(copy\)/);
        await shot(page, "revision-5-duplicate");
        assert.deepEqual(watch.pageErrors, [], "no script errors in the page");
      });
    } finally {
      watching = false;
      await watcher;
      await agent?.stop();
      await offlineAgent?.stop();
      await Deno.remove(base, { recursive: true }).catch(() => {});
    }
  },
);
