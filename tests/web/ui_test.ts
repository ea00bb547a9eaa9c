/**
 * The web console in a real browser (Debian's Chromium driven by puppeteer-core) against the real server
 * (`startServer`: PGlite, real TLS, real gRPC ports), with a simulated agent that enrolls with a token the UI
 * generated, receives the policy over a real policy stream and reports compliance through ReportCompliance.
 *
 * Proves: log in; create a Firefox policy through the generated form; deep-link reload of its editor; release;
 * bind to a group and enable (the confirmation names the node count); the node drawer shows the agent's
 * compliance and the per-setting provenance; an expired access token is refreshed exactly once for many
 * parallel calls; a revoked session shows the login screen and returns to the same URL; a user without
 * `policy:create` sees no create button and the server refuses the call; axe-core finds no serious or
 * critical violation on any page; the CSP is never violated. Screenshots of every page go to
 * `test-artifacts/screenshots/`.
 *
 * One browser run per file keeps the suite fast: it uses PostgreSQL when SVC_TEST_DATABASE_URL is set (as in
 * CI) and PGlite otherwise; the UI does not depend on the driver, the server tests cover both.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import type { Page } from "puppeteer-core";
import type { RunningServer } from "../../server/server.ts";
import { createClient } from "../../shared/grpc/adapter.ts";
import { EnrollmentService } from "../../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import {
  ComplianceStatus,
  EventType,
  PolicyService,
  type PolicyUpdate,
} from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { generateKeyAndCsr } from "../../shared/pki/csr.ts";
import { DRIVERS } from "../helpers/db.ts";
import {
  axeViolations,
  browserTestSkipped,
  chooseOption as choose,
  fillField,
  type PageWatch,
  screenshot as screenshotIn,
} from "../helpers/browser.ts";
import {
  callApi,
  startConsoleServer,
  submitLogin,
  waitForConsoleShell,
  withConsole,
} from "../helpers/console_login.ts";

const DRIVER = DRIVERS[DRIVERS.length - 1];
const ADMIN_PASSWORD = "Admin-Passw0rd-for-ui-tests";
const VIEWER_PASSWORD = "Viewer-Passw0rd-for-ui-tests";
const ACCESS_TTL_SECONDS = 5;
const SKIP = browserTestSkipped("the web console browser test");

// Functions passed to page.evaluate run in the browser. The test program is type-checked without the DOM
// library (it would clash with Deno's own types), so the few browser names they use are declared here.
// deno-lint-ignore no-explicit-any
declare const document: any;
// deno-lint-ignore no-explicit-any
declare const location: any;
// deno-lint-ignore no-explicit-any
declare const localStorage: any;
// deno-lint-ignore no-explicit-any
declare const customElements: any;
/** The parts of a DOM element the page-side code touches. */
type El = {
  value: string;
  checked: boolean;
  textContent: string | null;
  dataset: Record<string, string>;
  click(): void;
};

/** Everything one run shares: one server, one page and what it did. */
interface Harness {
  server: RunningServer;
  base: string;
  page: Page;
  /** API paths requested by the page (with their query), in order, with their status. */
  requests: PageWatch["apiResponses"];
  watch: PageWatch;
}

// Browser helpers ---------------------------------------------------------------------------------------

/**
 * Types over what the field `host` holds, centred, then Tab. Its text is selected and typed over, not cleared
 * first: emptying the settings search on the way folds its sections, and the one the next search finds stays
 * folded.
 */
async function fill(page: Page, host: string, value: string): Promise<void> {
  await fillField(page, host, value, { centred: true, tab: true });
}

async function waitForText(page: Page, text: string, timeout = 15_000): Promise<void> {
  await page.waitForFunction((t: string) => document.body.innerText.includes(t), { timeout }, text);
}

async function confirmDialog(page: Page): Promise<string> {
  const dialog = await page.waitForSelector("svc-confirm-dialog sl-dialog[open]");
  await page.waitForSelector("svc-confirm-dialog sl-button.confirm-ok", { visible: true });
  const text = await dialog!.evaluate((d) => (d.textContent ?? "").replace(/\s+/g, " "));
  await page.click("svc-confirm-dialog sl-button.confirm-ok");
  await page.waitForSelector("svc-confirm-dialog", { hidden: true });
  return text;
}

async function login(page: Page, username: string, password: string): Promise<void> {
  await submitLogin(page, { username, password });
  await waitForConsoleShell(page);
}

/** Clicks a link of the main navigation (client-side navigation, no reload). */
/**
 * Opens the guided "New policy" flow at `url` (its type chosen by `?type=`), names the policy and goes on to
 * the settings step.
 */
async function startFlow(page: Page, url: string, name: string): Promise<void> {
  await page.goto(url, { waitUntil: "load" });
  // The page renders after its session check; wait for the flow rather than for the load event.
  await fill(page, "svc-policy-flow-page .policy-details sl-input[name=name]", name);
  await page.click("svc-policy-flow-page sl-button.flow-next");
  await page.waitForFunction(() =>
    document.querySelector('svc-policy-flow-page .flow-stepper [aria-current="step"]')?.dataset.step ===
      "configure"
  );
}

async function navTo(page: Page, label: string): Promise<void> {
  const link = await page.waitForFunction(
    (l: string) =>
      [...document.querySelectorAll("nav.sidebar a")].find((a: El) => a.textContent!.trim() === l) ?? null,
    {},
    label,
  );
  await link.asElement()!.click();
  // A page is loaded on first visit: wait until the new page's element is defined and has rendered.
  await page.waitForFunction(
    (l: string) => {
      const current = document.querySelector("nav.sidebar a[aria-current=page]");
      const el = document.querySelector("main#main > [data-navigation]");
      return current?.textContent.trim() === l && el && customElements.get(el.localName) && el.hasUpdated;
    },
    {},
    label,
  );
}

/**
 * Calls the API from the page as the app does (cookies, CSRF header, one refresh on 401: the access token
 * lives 5 s here). Only called while the app is idle, so its refresh cannot race the app's own.
 */
async function pageFetch(
  h: Harness,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: unknown; text: string }> {
  await settle(h);
  return await callApi(h.page, method, path, body, { refreshOnce: true });
}

/** Runs axe-core on the current page; returns serious and critical violations. */
async function seriousViolations(page: Page) {
  return (await axeViolations(page)).filter((v) => v.impact === "serious" || v.impact === "critical");
}

async function screenshot(page: Page, name: string): Promise<void> {
  await screenshotIn(page, "screenshots", name);
}

/**
 * Waits until opened sections have finished opening (Shoelace sets their body's height to `auto` at the end)
 * and no other finite animation runs, so screenshots and clicks see the final layout.
 */
async function settleAnimations(page: Page): Promise<void> {
  await page.waitForFunction(() =>
    [...document.querySelectorAll("sl-details[open]")].every((d: { shadowRoot: ShadowRootLike }) =>
      d.shadowRoot.querySelector(".details__body")?.style.height === "auto"
    ) &&
    document.getAnimations().every((a: { effect: { getTiming(): { iterations: number } } | null }) =>
      a.effect?.getTiming().iterations === Infinity
    )
  );
}

/** The part of a shadow root `settleAnimations` reads. */
type ShadowRootLike = { querySelector(s: string): { style: { height: string } } | null };

/** Waits until the app has had no API request in flight for a moment (`main[aria-busy]`) and shows no spinner. */
async function settle(h: Harness): Promise<void> {
  const { page } = h;
  const deadline = Date.now() + 15_000;
  let quietSince = Date.now();
  while (Date.now() - quietSince < 300) {
    const busy = await page.evaluate(() =>
      document.querySelector("main")?.getAttribute("aria-busy") === "true"
    );
    if (busy) quietSince = Date.now();
    if (Date.now() > deadline) throw new Error("the page stayed busy (API requests in flight) for 15 s");
    await new Promise((r) => setTimeout(r, 50));
  }
  await page.waitForFunction(
    () =>
      ![...document.querySelectorAll("main sl-spinner")].some((s: { checkVisibility(): boolean }) =>
        s.checkVisibility()
      ),
    { timeout: 15_000 },
  );
}

// Simulated agent ---------------------------------------------------------------------------------------

interface SimAgent {
  nodeId: string;
  policy: ReturnType<typeof createClient<typeof PolicyService>>;
  updates: PolicyUpdate[];
  close(): void;
}

async function enrollAgent(h: Harness, token: string, name: string): Promise<SimAgent> {
  const ca = Buffer.from(h.server.ctx.ca.certPem);
  const enrollment = createClient(EnrollmentService, `localhost:${h.server.ports.web}`, {
    credentials: grpc.credentials.createSsl(ca),
  });
  const { keyPem, csrPem } = await generateKeyAndCsr(name);
  const res = await enrollment.enroll({ enrollmentToken: token, csrPem, nodeName: name });
  enrollment.close();
  const policy = createClient(PolicyService, `localhost:${h.server.ports.policy}`, {
    credentials: grpc.credentials.createSsl(ca, Buffer.from(keyPem), Buffer.from(res.signedCertPem)),
  });
  await policy.heartbeat({
    clientId: name,
    fqdn: `${name}.example.test`,
    ipAddress: "192.0.2.10",
    osName: "Debian GNU/Linux",
    osVersion: "13",
    desktopEnvironments: ["GNOME"],
    agentVersion: "0.1.0",
    machineId: "0123456789abcdef0123456789abcdef",
  });
  const updates: PolicyUpdate[] = [];
  const stream = policy.subscribePolicyUpdates({ clientId: name, lastKnownRevision: 0n });
  (async () => {
    try {
      for await (const u of stream) updates.push(u);
    } catch { /* cancelled at the end */ }
  })();
  return {
    nodeId: res.nodeId,
    policy,
    updates,
    close() {
      stream.cancel();
      policy.close();
    },
  };
}

async function until<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (true) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// The test ----------------------------------------------------------------------------------------------

Deno.test({
  name: `web console end to end in Chromium (${DRIVER})`,
  ignore: SKIP,
  sanitizeResources: false,
  sanitizeOps: false,
}, async (t) => {
  const server = await startConsoleServer({
    settings: {
      "security.admin_password": ADMIN_PASSWORD,
      "security.access_token_ttl_seconds": ACCESS_TTL_SECONDS,
    },
    database: DRIVER,
  });
  await withConsole(
    server,
    { path: false, viewport: { width: 1280, height: 900 } },
    async ({ page, watch }) => {
      const h: Harness = {
        server: server.running,
        base: server.web,
        page,
        requests: watch.apiResponses,
        watch,
      };
      const { base } = h;
      let agent: SimAgent | undefined;
      const state: { groupId?: string; policyId?: string; policyName: string } = {
        policyName: "Firefox baseline",
      };
      // Later steps build on earlier ones: after a failure the rest is skipped instead of failing confusingly.
      let failed = false;
      const step = async (name: string, fn: () => Promise<void> | void) => {
        const ok = await t.step({ name, ignore: failed, fn });
        if (!ok && !failed) {
          failed = true;
          await screenshot(page, "failure").catch(() => {});
        }
      };
      try {
        await step("the login screen appears for a deep link and leads to it after logging in", async () => {
          await page.goto(`${base}/policies/new`, { waitUntil: "load" });
          await screenshot(page, "00-login");
          const violations = await seriousViolations(page);
          assert.deepEqual(violations, [], `axe on the login screen: ${JSON.stringify(violations, null, 2)}`);
          await login(page, "admin", ADMIN_PASSWORD);
          assert.equal(new URL(page.url()).pathname, "/policies/new");
          await waitForText(page, "New policy");
        });

        await step("unknown client routes redirect to the dashboard", async () => {
          await page.goto(`${base}/no/such/page`, { waitUntil: "load" });
          await waitForText(page, "Nodes by status");
          assert.equal(new URL(page.url()).pathname, "/");
        });

        await step(
          "keyboard: the skip link comes first and leads to the content; navigation works by keyboard",
          async () => {
            await page.keyboard.press("Tab");
            assert.equal(
              await page.evaluate(() => document.activeElement?.textContent?.trim()),
              "Skip to main content",
            );
            await page.keyboard.press("Enter");
            assert.equal(await page.evaluate(() => document.activeElement?.id), "main");
            // Tab on (through the dashboard's links, then around to the masthead and the navigation) to "Nodes"
            // and follow it with Enter.
            for (let i = 0; i < 40; i++) {
              await page.keyboard.press("Tab");
              if (await page.evaluate(() => document.activeElement?.textContent?.trim() === "Nodes")) break;
            }
            await page.keyboard.press("Enter");
            await page.waitForFunction(() => location.pathname === "/nodes");
            assert.equal(
              await page.evaluate(() => document.activeElement?.id),
              "main",
              "focus moves to the new page",
            );
          },
        );

        await step("a node group is created and its one-time enrollment token enrolls an agent", async () => {
          await navTo(page, "Node groups");
          await page.click("sl-button[variant=primary]");
          await fill(page, ".group-form sl-input[name=name]", "lab");
          await page.click("sl-dialog[open] sl-button[variant=primary]");
          await page.waitForSelector("tr[data-group-id]");
          state.groupId = await page.$eval(
            "tr[data-group-id]",
            (tr) => (tr as unknown as El).dataset.groupId,
          );
          await page.click(`tr[data-group-id="${state.groupId}"] sl-button.generate-token`);
          const tokenEl = await page.waitForSelector("code.enrollment-token", { visible: true });
          const token = await tokenEl!.evaluate((e) => e.textContent!.trim());
          const commands = await page.$eval("pre.enrollment-commands", (e) => e.textContent!);
          assert.match(commands, /svc-agent --token-file \/etc\/svc\/enrollment-token/);
          assert.ok(commands.includes(token), "the commands carry the token");
          await screenshot(page, "03-enrollment-token");
          await page.click("sl-dialog[open] sl-button[variant=primary]");
          agent = await enrollAgent(h, token, "ui-node-1");
          await until(
            "the initial (empty) snapshot",
            () =>
              agent!.updates.find((u) => u.type === EventType.SNAPSHOT && u.snapshotComplete)
                ? true
                : undefined,
          );
        });

        await step("a Firefox policy is created through the generated form", async () => {
          await navTo(page, "Policies");
          // The link exists once the button rendered its shadow tree.
          await page.click("sl-button.new-policy >>> a");
          // The type tiles are radio buttons: reachable and chosen with the keyboard.
          await page.waitForSelector('svc-policy-flow-page .type-tile[data-type="Firefox"]', {
            visible: true,
          });
          await page.focus('svc-policy-flow-page .type-tile[data-type="Firefox"] input');
          await page.keyboard.press("Space");
          await page.waitForFunction(() =>
            document.querySelector("svc-policy-flow-page .type-tiles input:checked")?.value === "Firefox"
          );
          await fill(page, ".policy-details sl-input[name=name]", state.policyName);
          // The guided flow: name and type first, then the settings.
          await page.click("svc-policy-flow-page sl-button.flow-next");
          await page.waitForSelector("svc-schema-form sl-input.setting-search", { visible: true });
          // Empty content cannot be saved, but is not shown as an error before the first change.
          assert.match(
            await page.$eval(".validation-summary", (e) => e.textContent!),
            /Choose the settings this policy manages/,
          );
          assert.ok(await page.$eval("sl-button.save-policy", (b) => b.hasAttribute("disabled")));
          await fill(page, "svc-schema-form sl-input.setting-search", "telemetry");
          await choose(page, '.field-row[data-field="DisableTelemetry"] sl-select', "true");
          await fill(page, "svc-schema-form sl-input.setting-search", "DisableAppUpdate");
          await choose(page, '.field-row[data-field="DisableAppUpdate"] sl-select', "true");
          await page.waitForFunction(() =>
            document.querySelector(".validation-summary")?.textContent?.includes("No problems")
          );
          await screenshot(page, "04-policy-form");
          await page.click("sl-button.save-policy");
          await page.waitForFunction(() => /^\/policies\/[0-9a-f-]{36}\/edit$/.test(location.pathname));
          state.policyId = new URL(page.url()).pathname.split("/")[2];
          const [row] = await h.server.ctx.db.query<{ content: string; state: string; type: string }>(
            "SELECT content, state, type FROM policies WHERE id = $1",
            [state.policyId],
          );
          assert.equal(row.type, "Firefox");
          assert.equal(row.state, "draft");
          assert.deepEqual(JSON.parse(row.content), { DisableAppUpdate: true, DisableTelemetry: true });
        });

        await step("deep-link reload of the editor shows the stored policy", async () => {
          await page.reload({ waitUntil: "load" });
          await page.waitForSelector('.field-row.configured[data-field="DisableTelemetry"]');
          const name = await page.$eval(
            ".policy-details sl-input[name=name]",
            (e) => (e as unknown as El).value,
          );
          assert.equal(name, state.policyName);
          assert.equal(new URL(page.url()).pathname, `/policies/${state.policyId}/edit`);
        });

        await step("the policy is released and becomes read-only", async () => {
          await page.click("sl-button.state-released");
          await confirmDialog(page);
          await page.waitForSelector("sl-alert.read-only-note");
          assert.equal(await page.$("sl-button.save-policy"), null, "no save button on a released policy");
          await screenshot(page, "05-policy-released");
        });

        await step(
          "a binding is created disabled, then enabled after a confirmation naming the nodes",
          async () => {
            await navTo(page, "Policy bindings");
            await page.click("sl-button[variant=primary]");
            // The policy picker searches as one types; Enter takes the highlighted match.
            const search = await page.waitForSelector(
              ".binding-form sl-input[name=policy_search] >>> input",
              {
                visible: true,
              },
            );
            await search!.type(state.policyName.slice(0, 8));
            await page.waitForFunction(
              (name: string) =>
                document.querySelector(".binding-form li[role=option][aria-selected=true]")?.textContent
                  .includes(
                    name,
                  ),
              {},
              state.policyName,
            );
            await page.keyboard.press("Enter");
            await page.waitForFunction(
              (name: string) =>
                (document.querySelector(".binding-form sl-input[name=policy_search]") as El | null)?.value ===
                  name,
              {},
              state.policyName,
            );
            await page.$eval(".binding-form sl-select[name=node_group_id]", (select: El) => {
              const option = [
                ...(select as unknown as { querySelectorAll(s: string): El[] }).querySelectorAll(
                  "sl-option",
                ),
              ].find((o) => o.textContent!.includes("lab"))!;
              (select as unknown as { value: string[] }).value = [option.value];
            });
            await fill(page, ".binding-form sl-input[name=priority]", "10");
            await page.click("sl-dialog[open] sl-button[variant=primary]");
            const row = await page.waitForSelector("tr[data-binding-id]");
            assert.equal(
              await row!.$eval("sl-switch.binding-state", (s) => (s as unknown as El).checked),
              false,
            );
            await row!.$eval("sl-switch.binding-state", (s) => (s as unknown as El).click());
            const text = await confirmDialog(page);
            assert.match(text, /1 node in lab will receive/);
            await page.waitForFunction(() =>
              (document.querySelector("tr[data-binding-id] sl-switch.binding-state") as El | null)
                ?.checked ===
                true
            );
            await screenshot(page, "06-bindings");
          },
        );

        await step(
          "the agent receives the policy and its compliance and provenance show on the node page",
          async () => {
            const delivered = await until(
              "the policy in a snapshot",
              () => agent!.updates.find((u) => u.policy?.id === state.policyId),
            );
            assert.equal(delivered.policy!.priority, 10);
            // A second, lower-priority Firefox policy for the same group (through the API): it loses DisableTelemetry
            // and alone sets DisablePocket.
            const other = await pageFetch(h, "POST", "/api/v1/policies/all", {
              name: "Firefox defaults",
              type: "Firefox",
              content: JSON.stringify({ DisableTelemetry: false, DisablePocket: true }),
            });
            assert.equal(other.status, 201, JSON.stringify(other.json));
            const otherId = (other.json as { id: string }).id;
            assert.equal(
              (await pageFetch(h, "PUT", `/api/v1/policies/all/${otherId}/state`, { state: "released" }))
                .status,
              200,
            );
            const binding = await pageFetch(h, "POST", "/api/v1/policy-bindings", {
              policy_id: otherId,
              node_group_id: state.groupId,
              priority: 1,
            });
            const bindingId = (binding.json as { id: string }).id;
            assert.equal(
              (await pageFetch(h, "PUT", `/api/v1/policy-bindings/${bindingId}`, { state: "enabled" }))
                .status,
              200,
            );
            const both = await until(
              "both policies in a snapshot",
              () => agent!.updates.find((u) => u.policy?.id === otherId),
            );
            const C = ComplianceStatus;
            const item = (key: string, status: ComplianceStatus, message: string) => ({
              schemaId: "policies.json",
              key,
              status,
              message,
            });
            await agent!.policy.reportCompliance({
              clientId: "ui-node-1",
              policyId: state.policyId!,
              status: C.COMPLIANT,
              message: "2 of 2 settings applied",
              policyVersion: delivered.policy!.version,
              items: [
                item("DisableAppUpdate", C.COMPLIANT, "set to true"),
                item("DisableTelemetry", C.COMPLIANT, "set to true"),
              ],
            });
            await agent!.policy.reportCompliance({
              clientId: "ui-node-1",
              policyId: otherId,
              status: C.COMPLIANT,
              message: "1 setting applied, 1 overridden",
              policyVersion: both.policy!.version,
              items: [
                item("DisablePocket", C.COMPLIANT, "set to true"),
                item(
                  "DisableTelemetry",
                  C.INAPPLICABLE,
                  `overridden by higher-priority policy "${state.policyName}" (${state.policyId}, priority 10)`,
                ),
              ],
            });
            await navTo(page, "Nodes");
            const link = await page.waitForSelector(`tr[data-node-id="${agent!.nodeId}"] button.link`);
            await link!.click();
            await page.waitForSelector("svc-node-detail sl-drawer[open]");
            const facts = await page.waitForSelector("svc-node-detail dl.facts");
            assert.match(
              await facts!.evaluate((e) => e.textContent!),
              /ui-node-1\.example\.test[\s\S]*192\.0\.2\.10/,
            );
            assert.match(new URL(page.url()).search, new RegExp(`node=${agent!.nodeId}`));
            await page.click('svc-node-detail sl-tab[panel="compliance"]');
            const details = await page.waitForSelector(
              `sl-details.compliance-row[data-policy-id="${state.policyId}"]`,
            );
            assert.match(
              await details!.evaluate((e) => e.textContent!),
              /Compliant[\s\S]*Firefox baseline/,
            );
            await details!.click();
            await waitForText(page, "DisableTelemetry");
            await screenshot(page, "07-node-compliance");
            await page.click('svc-node-detail sl-tab[panel="settings"]');
            const row = async (key: string) => {
              const tr = await page.waitForSelector(`table.provenance tr[data-key="${key}"]`);
              return await tr!.evaluate((e) => e.textContent!.replace(/\s+/g, " "));
            };
            const telemetry = await row("DisableTelemetry");
            assert.match(telemetry, /DisableTelemetry true Firefox baseline binding to lab, priority 10/);
            assert.match(telemetry, /Firefox defaults \(priority 1\): false/);
            assert.match(
              await row("DisablePocket"),
              /true Firefox defaults binding to lab, priority 1 .*nothing/,
            );
            await screenshot(page, "08-node-provenance");
            await page.keyboard.press("Escape");
          },
        );

        await step("the dashboard draws the whole fleet from one summary request", async () => {
          await settle(h);
          const before = h.requests.length;
          await navTo(page, "Dashboard");
          await page.waitForSelector("svc-dashboard-page svc-bar-chart ul.bar-list");
          await settle(h);
          // The 5-second access token may have run out meanwhile: its 401 and refresh are not the page's doing.
          const during = h.requests.slice(before)
            .filter((r) => r.status !== 401 && r.path !== "/api/v1/auth/refresh")
            .map((r) => `${r.method} ${r.path} ${r.status}`);
          // The charts come from one summary request, not one per count. The "Needs attention" list asks a fixed
          // set of list endpoints for totals (one page of one row each), whatever the fleet's size; the releases
          // in flight and the trends are one request each.
          assert.deepEqual(
            during.filter((r) => r.startsWith("GET /api/v1/dashboard/")),
            ["GET /api/v1/dashboard/summary 200"],
            "one request for the charts",
          );
          const attention = [
            /^GET \/api\/v1\/version 200$/,
            /^GET \/api\/v1\/nodes\/filter-options 200$/,
            /^GET \/api\/v1\/nodes\?(compliance=error|agent_version=[^&]+)&per_page=1 200$/,
            /^GET \/api\/v1\/disk-encryption\/volumes\?escrow=none&per_page=1 200$/,
            /^GET \/api\/v1\/policies\/all\?state=released&per_page=200 200$/,
            /^GET \/api\/v1\/policies\/rollout\?ids=[^ ]+ 200$/,
            /^GET \/api\/v1\/compliance\/failing-settings\?limit=3 200$/,
            /^GET \/api\/v1\/policies\/in-flight 200$/,
            /^GET \/api\/v1\/trends\?granularity=hour 200$/,
            /^GET \/api\/v1\/certificates\/expiring 200$/,
          ];
          const others = during.filter((r) =>
            !r.startsWith("GET /api/v1/dashboard/") && !attention.some((a) => a.test(r))
          );
          assert.deepEqual(others, [], "only the attention list's fixed set of requests besides");
          const charts = await page.$$eval(
            "svc-dashboard-page .charts svg[aria-label], svc-dashboard-page ul.bar-list[aria-label]",
            (els) =>
              els.map((e) =>
                (e as unknown as { getAttribute(n: string): string }).getAttribute("aria-label")
              ),
          );
          assert.deepEqual(charts, [
            "Nodes by status. Online: 1, Degraded: 0, Offline: 0, Unknown: 0",
            "Compliance results by status. Compliant: 2, Non compliant: 0, Error: 0, Inapplicable: 0, Pending: 0",
            "Policies by state. Draft: 0, Released: 2, Archived: 0",
            "Policies by type and state. Firefox: 2 (Released 2)",
            "Policy bindings by state. Enabled: 2, Disabled: 0",
            "Agent certificates by expiry. Expired: 0, Within 7 days: 0, Within 30 days: 0, Within 90 days: 1, " +
            "Later: 0, No certificate: 0, Revoked: 0",
          ]);
          const link = await page.$eval(
            'svc-dashboard-page a[href="/policy-bindings?state=enabled"]',
            (a) => a.textContent!.trim(),
          );
          assert.equal(link, "Enabled", "numbers link to the filtered lists");
        });

        await step("an expired access token is refreshed once for many parallel calls", async () => {
          await settle(h);
          // Let the access token (and its cookie) run out.
          await new Promise((r) => setTimeout(r, (ACCESS_TTL_SECONDS + 1) * 1000));
          const before = h.requests.length;
          // The nodes page asks for the list, the groups and the filter options at once.
          await navTo(page, "Nodes");
          await page.waitForSelector(`tr[data-node-id="${agent!.nodeId}"]`);
          await settle(h);
          const during = h.requests.slice(before);
          const refreshes = during.filter((r) => r.path === "/api/v1/auth/refresh");
          const unauthorized = during.filter((r) => r.status === 401 && r.path !== "/api/v1/auth/refresh");
          assert.ok(
            unauthorized.length >= 2,
            `several parallel calls failed with 401 first: ${JSON.stringify(during)}`,
          );
          assert.equal(refreshes.length, 1, `exactly one refresh: ${JSON.stringify(during)}`);
          assert.equal(refreshes[0].status, 200);
          assert.ok(during.filter((r) => r.status === 200 && r.path.startsWith("/api/v1/nodes")).length >= 2);
          assert.ok(during.some((r) => r.status === 200 && r.path.startsWith("/api/v1/node-groups")));
          assert.equal(await page.$("svc-login-page"), null, "no login screen");
        });

        await step(
          "with the refresh token revoked the login screen appears and returns to the same URL",
          async () => {
            await navTo(page, "Compliance");
            await page.waitForSelector("svc-compliance-page tbody tr");
            await h.server.ctx.db.query(
              "UPDATE refresh_tokens SET revoked_at = now() WHERE revoked_at IS NULL",
            );
            await page.deleteCookie({ name: "svc_session", url: base });
            await page.click("svc-compliance-page .page-actions sl-button");
            await page.waitForSelector("svc-login-page", { visible: true });
            assert.equal(new URL(page.url()).pathname, "/compliance");
            await screenshot(page, "09-session-expired-login");
            await login(page, "admin", ADMIN_PASSWORD);
            await page.waitForSelector("svc-compliance-page tbody tr");
            assert.equal(new URL(page.url()).pathname, "/compliance");
          },
        );

        await step(
          "import: a dry run reports conflicts and what would happen, then imports all or nothing",
          async () => {
            const exported = await pageFetch(h, "GET", "/api/v1/policies/export?format=yaml");
            assert.equal(exported.status, 200);
            assert.match(exported.text, /displayName: Firefox baseline/);
            const bundle = `${exported.text}---
apiVersion: svc.dev/v1
kind: Policy
metadata:
  name: imported-policy
  displayName: Imported policy
  description: from a bundle
spec:
  type: Firefox
  content:
    DisableFirefoxStudies: true
`;
            const file = `${h.server.ctx.config.server.dataDir}/bundle.yaml`;
            await Deno.writeTextFile(file, bundle);
            await navTo(page, "Policies");
            await page.click("svc-policies-page .page-actions sl-button:nth-of-type(2)");
            const input = await page.waitForSelector(".import-form input[type=file]");
            await (input as unknown as { uploadFile(path: string): Promise<void> }).uploadFile(file);
            // Same names exist: refused by default, every refused document named.
            const problems = await page.waitForSelector("sl-alert.import-problems");
            assert.match(
              await problems!.evaluate((e) => e.textContent!),
              /Firefox baseline[\s\S]*Firefox defaults/,
            );
            assert.ok(await page.$eval("sl-button.confirm-import", (b) => b.hasAttribute("disabled")));
            await choose(page, ".import-form sl-select", "Skip it");
            const report = await page.waitForSelector("section.import-report");
            assert.match(
              await report!.evaluate((e) => e.textContent!.replace(/\s+/g, " ")),
              /Dry run: nothing written yet 1 to create, 0 to update, 2 skipped/,
            );
            assert.equal(
              (await h.server.ctx.db.query("SELECT 1 FROM policies WHERE name = 'Imported policy'")).length,
              0,
            );
            await screenshot(page, "09-import-dry-run");
            await page.click("sl-button.confirm-import");
            await page.waitForFunction(() =>
              document.querySelector("section.import-report h2")?.textContent === "Imported"
            );
            assert.equal(
              (await h.server.ctx.db.query("SELECT 1 FROM policies WHERE name = 'Imported policy'")).length,
              1,
            );
            await page.keyboard.press("Escape");
            await waitForText(page, "Imported policy");
          },
        );

        await step(
          "browser editors follow the catalogue: unsupported fields, search by label, enums by label, errors in place",
          async () => {
            // Content setting a field Thunderbird ignores (typed into the JSON view) shows it with the reason, to remove.
            await startFlow(page, `${base}/policies/new?type=Thunderbird`, "Thunderbird check");
            await page.waitForSelector('sl-tab[panel="json"]', { visible: true });
            await page.click('sl-tab[panel="json"]');
            await page.click("sl-textarea.json-view >>> textarea");
            await page.keyboard.down("Control");
            await page.keyboard.press("a");
            await page.keyboard.up("Control");
            await page.keyboard.type('{"InAppNotification": {"Enabled": true, "SurveyEnabled": false}}');
            await page.click('sl-tab[panel="form"]');
            const ignored = await page.waitForSelector(
              '.field-row.unsupported[data-field="InAppNotification.Enabled"]',
              { visible: true },
            );
            assert.match(
              await ignored!.evaluate((e) => e.textContent!.replace(/\s+/g, " ")),
              /Not supported.*Ignored by the browser: Thunderbird has no InAppNotification\.Enabled; set InAppNotification\.Disabled instead/,
            );
            assert.equal(
              await page.$('.field-row[data-field="InAppNotification.Locked"]'),
              null,
              "unset: hidden",
            );
            await settleAnimations(page);
            await screenshot(page, "09-thunderbird-unsupported");
            await page.$eval(
              '.field-row[data-field="InAppNotification.Enabled"] sl-icon-button[label="Remove Enable"]',
              (b) => (b as unknown as El).click(),
            );
            await page.waitForSelector('.field-row[data-field="InAppNotification.Enabled"]', {
              hidden: true,
            });
            await page.waitForFunction(() =>
              document.querySelector(".validation-summary")?.textContent?.includes("No problems")
            );
            // The draft is left unsaved: accept the browser's leave-page question.
            page.once("dialog", (d) => d.accept());

            await startFlow(page, `${base}/policies/new?type=Chrome`, "Chrome baseline");
            const search = "svc-schema-form sl-input.setting-search";
            await fill(page, search, "relaunch period");
            const period = '.field-row[data-field="RelaunchNotificationPeriod"]';
            await page.waitForSelector(period, { visible: true });
            assert.deepEqual(
              await page.$$eval(
                "svc-schema-form .setting-group",
                (gs) => gs.map((g) => (g as unknown as El).dataset.group),
              ),
              ["Browser behaviour"],
              "the search leaves one group",
            );
            assert.equal((await page.$$("svc-schema-form .setting-group > .field-row")).length, 1);
            assert.match(
              await page.$eval(period, (e) => e.textContent!.replace(/\s+/g, " ")),
              /Relaunch period.*RelaunchNotificationPeriod.*milliseconds/,
            );
            // Below the minimum: the shared validator's message appears in that field's row, and saving waits.
            await fill(page, `${period} sl-input`, "60000");
            const error = await page.waitForSelector(`${period} .field-error`);
            assert.equal(
              await error!.evaluate((e) => e.textContent),
              "must be at least 3600000 milliseconds",
            );
            assert.ok(await page.$eval("sl-button.save-policy", (b) => b.hasAttribute("disabled")));
            await settleAnimations(page);
            await screenshot(page, "09-chrome-range-error");
            await fill(page, `${period} sl-input`, "7200000");
            await page.waitForSelector(`${period} .field-error`, { hidden: true });

            await fill(page, search, "start-up");
            await choose(
              page,
              '.field-row[data-field="RestoreOnStartup"] sl-select',
              "Open the new tab page",
            );

            // A nested problem shows at the innermost field it names, once: a map key at its entry, a missing
            // update URL at that entry's field.
            await fill(page, search, "extension management");
            const settings = '.field-row[data-field="ExtensionSettings"]';
            await page.click(`${settings} sl-button.add-item`);
            const entryError = await page.waitForSelector(`${settings} [data-entry="new-key"] .field-error`);
            assert.match(await entryError!.evaluate((e) => e.textContent!), /key "new-key"/);
            const id = "a".repeat(32);
            await fill(page, `${settings} [data-entry="new-key"] sl-input`, id);
            const entry = `${settings} [data-entry="${id}"]`;
            await choose(
              page,
              `.field-row[data-field="ExtensionSettings.${id}.installation_mode"] sl-select`,
              "Force-installed",
            );
            const nested = await page.waitForSelector(
              `.field-row[data-field="ExtensionSettings.${id}.update_url"] .field-error`,
            );
            assert.match(await nested!.evaluate((e) => e.textContent!), /is required when installation_mode/);
            assert.equal(await page.$$eval(`${settings} .field-error`, (es) => es.length), 1, "shown once");
            await settleAnimations(page);
            await screenshot(page, "09-chrome-nested-error");
            await page.click(`${entry} sl-icon-button[label="Remove ${id}"]`);
            await page.waitForSelector(entry, { hidden: true });

            await fill(page, search, "TLS");
            const tls = await page.waitForSelector(
              '.field-row[data-field="SSLVersionMin"] sl-badge.badge-deprecated',
            );
            assert.ok(tls, "a deprecated setting carries a warning badge");
            await page.waitForFunction(() =>
              document.querySelector(".validation-summary")?.textContent?.includes("No problems")
            );
            await page.click("sl-button.save-policy");
            await page.waitForFunction(() => /^\/policies\/[0-9a-f-]{36}\/edit$/.test(location.pathname));
            const [row] = await h.server.ctx.db.query<{ content: string }>(
              "SELECT content FROM policies WHERE id = $1",
              [new URL(page.url()).pathname.split("/")[2]],
            );
            assert.deepEqual(JSON.parse(row.content), {
              RelaunchNotificationPeriod: 7200000,
              RestoreOnStartup: 5,
            });
          },
        );

        await step("the role bindings tab lists every binding, and its links filter the list", async () => {
          await page.goto(`${base}/settings?tab=role-bindings`, { waitUntil: "load" });
          const admin = await page.waitForSelector("table.role-bindings tr[data-role-binding-id]", {
            visible: true,
          });
          assert.match(
            await admin!.evaluate((e) => e.textContent!.replace(/\s+/g, " ")),
            /Super Admin User admin Global Yes/,
          );
          await settle(h);
          assert.ok(
            h.requests.some((r) => r.path.startsWith("/api/v1/role-bindings?") && r.status === 200),
            "the tab reads the list of every binding",
          );
          await page.click('table.role-bindings a[title="Every role of this holder"]');
          await page.waitForFunction(() => new URLSearchParams(location.search).has("user_id"));
          await page.waitForSelector(".rb-form", { visible: true });
          await page.waitForFunction(() =>
            document.querySelector("svc-settings-role-bindings h2")?.textContent?.includes(
              "Bind a role to user admin",
            )
          );
          await page.click('table.role-bindings a[title="Every binding of this role"]');
          await page.waitForFunction(() => new URLSearchParams(location.search).has("role_id"));
          await settle(h);
          const roles = await page.$$eval(
            "table.role-bindings tbody tr td:first-child",
            (tds) => tds.map((td) => td.textContent!.trim()),
          );
          assert.deepEqual(roles, ["Super Admin"]);
          await screenshot(page, "25-settings-role-bindings-filtered");
        });

        await step("every page passes axe-core and is captured", async () => {
          const pages: Array<[string, string]> = [
            ["/", "10-dashboard"],
            ["/policies", "11-policies"],
            ["/policies/new?type=Firefox", "12-policy-new-firefox"],
            ["/policies/new?type=Polkit", "13-policy-new-polkit"],
            ["/policies/new?type=Chrome", "13-policy-new-chrome"],
            [`/policies/${state.policyId}/edit`, "14-policy-edit"],
            ["/nodes", "15-nodes"],
            [`/nodes?node=${agent!.nodeId}`, "16-node-drawer"],
            ["/node-groups", "17-node-groups"],
            ["/policy-bindings", "18-policy-bindings"],
            ["/compliance", "19-compliance"],
            ["/disk-encryption", "20-disk-encryption"],
            ["/audit-logs", "21-audit-logs"],
            ["/settings", "22-settings-users"],
            ["/settings?tab=roles", "23-settings-roles"],
            ["/settings?tab=user-groups", "24-settings-user-groups"],
            ["/settings?tab=role-bindings", "25-settings-role-bindings"],
            ["/settings?tab=agent", "26-settings-agent"],
          ];
          const problems: string[] = [];
          for (const [path, name] of pages) {
            await page.goto(`${base}${path}`, { waitUntil: "load" });
            await page.waitForSelector("svc-app main#main");
            await settle(h);
            await screenshot(page, name);
            for (const v of await seriousViolations(page)) {
              problems.push(
                `${path}: [${v.impact}] ${v.id} — ${v.help} at ${JSON.stringify(v.targets)}`,
              );
            }
          }
          await page.evaluate(() => localStorage.setItem("svc-theme", "dark"));
          await page.goto(`${base}/`, { waitUntil: "load" });
          await settle(h);
          await screenshot(page, "27-dashboard-dark");
          for (const v of await seriousViolations(page)) {
            problems.push(`/ (dark): [${v.impact}] ${v.id} — ${v.help}`);
          }
          await page.evaluate(() => localStorage.removeItem("svc-theme"));
          assert.deepEqual(problems, []);
        });

        await step("a revoked node offers Re-enroll, which shows the one-time command", async () => {
          const revoked = await pageFetch(h, "POST", `/api/v1/nodes/${agent!.nodeId}/revoke`, {});
          assert.equal(revoked.status, 200, JSON.stringify(revoked.json));
          await page.goto(`${base}/nodes?node=${agent!.nodeId}`, { waitUntil: "load" });
          await page.waitForSelector("svc-node-detail sl-drawer[open]");
          const button = await page.waitForSelector("svc-node-detail sl-button.re-enroll", { visible: true });
          await button!.click();
          const command = await page.waitForSelector("svc-node-detail pre.re-enroll-command");
          assert.match(
            await command!.evaluate((e) => e.textContent!),
            /^SVC_ENROLLMENT_TOKEN='[A-Za-z0-9_-]{43}' svc-agent$/,
          );
          await screenshot(page, "27b-node-re-enroll");
          await page.keyboard.press("Escape");
          await page.goto(`${base}/`, { waitUntil: "load" });
          await page.waitForSelector("svc-dashboard-page");
        });

        await step(
          "a user without policy:create sees no create button and the server refuses the call",
          async () => {
            const roles = await pageFetch(h, "GET", "/api/v1/roles?per_page=200");
            const auditor = (roles.json as { items: Array<{ id: string; name: string }> }).items.find((r) =>
              r.name === "Auditor"
            )!;
            const created = await pageFetch(h, "POST", "/api/v1/users", {
              username: "viewer",
              password: VIEWER_PASSWORD,
              role_ids: [auditor.id],
              step_up: { password: ADMIN_PASSWORD },
            });
            assert.equal(created.status, 201, JSON.stringify(created.json));
            await page.click("sl-button.user-menu");
            await page.click('sl-menu-item[value="logout"]');
            await login(page, "viewer", VIEWER_PASSWORD);
            await navTo(page, "Policies");
            await page.waitForSelector("svc-policies-page tr[data-policy-id]");
            assert.equal(await page.$("sl-button.new-policy"), null, "no New policy button");
            const refused = await pageFetch(h, "POST", "/api/v1/policies/all", {
              name: "sneaky",
              type: "Firefox",
              content: JSON.stringify({ DisableTelemetry: true }),
            });
            assert.equal(refused.status, 403);
            assert.match((refused.json as { error: { message: string } }).error.message, /policy:create/);
            await screenshot(page, "28-viewer-policies");
            // The Auditor reads role bindings but cannot change them: no remove buttons.
            await page.goto(`${base}/settings?tab=role-bindings`, { waitUntil: "load" });
            await page.waitForSelector("table.role-bindings tr[data-role-binding-id]", { visible: true });
            assert.equal(await page.$("table.role-bindings sl-icon-button"), null, "no remove button");
          },
        );

        await step("no Content Security Policy violation happened", () => {
          assert.deepEqual(h.watch.cspViolations, []);
          assert.deepEqual(h.watch.pageErrors, [], "no script errors in the page");
        });
      } finally {
        agent?.close();
      }
    },
  );
});
