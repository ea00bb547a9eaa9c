/**
 * Live updates in a real browser (Debian's Chromium driven by puppeteer-core) against a real in-process
 * `svc-server` (web port with the console, policy port, hub): the nodes page says "Live", its polling is
 * switched off (interval set far beyond the test), and a node going online through a real agent policy
 * stream still appears, in place (no navigation), because the server's hint made the page reload. A burst
 * of hundreds of compliance hints costs about one reload per second, not one per hint. When the stream goes
 * away the header says "Updated … ago" again and the page polls.
 */
import assert from "node:assert/strict";
import puppeteer from "puppeteer-core";
import { startServer } from "../../server/server.ts";
import { resolveConfig } from "../../server/config/config.ts";
import { createLogger } from "../../server/core/log.ts";
import { publishLiveHint } from "../../server/events/publish.ts";
import { stopLiveEvents } from "../../server/events/broker.ts";
import { type AgentServer, createGroup, enrollAgent, subscribe } from "../helpers/agents.ts";
import { localServerSettings } from "../helpers/process.ts";

const CHROMIUM = "/usr/bin/chromium";
const haveChromium = await Deno.stat(CHROMIUM).then(() => true, () => false);
if (!haveChromium) {
  console.warn("live updates browser test skipped: needs Debian's chromium at /usr/bin/chromium");
}

// deno-lint-ignore no-explicit-any
declare const document: any;
const PASSWORD = "live-updates-admin-password";

Deno.test({
  name: "the nodes page updates from a live hint, without polling and without navigating",
  ignore: !haveChromium,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const dataDir = await Deno.makeTempDir({ prefix: "svc-live-ui-" });
    const profile = await Deno.makeTempDir({ prefix: "svc-live-chromium-" });
    const config = resolveConfig(
      localServerSettings(dataDir, {
        "server.address": "127.0.0.1",
        "security.admin_password": PASSWORD,
      }),
      {},
    );
    const server = await startServer(config, { log: createLogger("warn"), print: () => {} });
    // The agent helpers need only the context and the two ports.
    const ports = {
      ctx: server.ctx,
      webPort: server.ports.web,
      policyPort: server.ports.policy,
    } as AgentServer;
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
    let agent: Awaited<ReturnType<typeof enrollAgent>> | undefined;
    try {
      const group = await createGroup(server.ctx.db, "lab");
      agent = await enrollAgent(ports, { name: "live-node", groupId: group });
      const page = await browser.newPage();
      page.setDefaultTimeout(90_000);
      const pageErrors: string[] = [];
      page.on("pageerror", (err) => pageErrors.push(String(err)));
      const listRequests: number[] = [];
      page.on("request", (req) => {
        if (new URL(req.url()).pathname === "/api/v1/nodes") listRequests.push(Date.now());
      });
      const web = `https://localhost:${server.ports.web}`;
      await page.goto(`${web}/`, { waitUntil: "load" });
      const login = await page.evaluate(async (password: string) => {
        const res = await fetch("/api/v1/auth/login", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ username: "admin", password }),
        });
        return res.status;
      }, PASSWORD);
      assert.equal(login, 200);
      await page.goto(`${web}/nodes`, { waitUntil: "load" });
      const rowStatus = () =>
        page.evaluate(() =>
          document.querySelector("svc-nodes-page tbody tr[data-node-id] sl-badge.status")?.textContent.trim()
        );
      await page.waitForFunction(() => document.querySelector("svc-nodes-page tbody tr[data-node-id]"));
      assert.notEqual(await rowStatus(), "Online");
      await page.waitForSelector("svc-nodes-page .live-status");
      assert.match(
        await page.$eval("svc-nodes-page .page-header .updated-at", (e) => e.textContent ?? ""),
        /Live/,
      );

      // No polling from here on, and a marker that a navigation would wipe.
      await page.evaluate(() => {
        document.querySelector("svc-nodes-page").autoRefreshMs = 1e12;
        (globalThis as unknown as { svcMarker: number }).svcMarker = 1;
      });
      const before = listRequests.length;

      const watcher = subscribe(agent.policy, { clientId: "live-node" });
      await watcher.nextSnapshot();
      await page.waitForFunction(
        () =>
          document.querySelector("svc-nodes-page tbody tr[data-node-id] sl-badge.status")?.textContent
            .trim() ===
            "Online",
      );
      assert.ok(listRequests.length > before, "the page fetched the list again");
      assert.equal(
        await page.evaluate(() => (globalThis as unknown as { svcMarker?: number }).svcMarker),
        1,
        "the page updated in place",
      );

      // A burst of compliance hints: reloads are coalesced to about one per second.
      const burstFrom = listRequests.length;
      const started = Date.now();
      for (let i = 0; i < 300; i++) {
        await publishLiveHint(server.ctx.db, { topic: "compliance", ids: [agent.nodeId] });
        if (i % 20 === 0) await new Promise((r) => setTimeout(r, 1));
      }
      const burstEnd = Date.now();
      // The trailing reload after the burst (loadedAt moves past its end).
      await page.waitForFunction(
        (end: number) => (document.querySelector("svc-nodes-page").loadedAt ?? 0) > end,
        {},
        burstEnd,
      );
      const reloads = listRequests.length - burstFrom;
      const seconds = (Date.now() - started) / 1000;
      assert.ok(reloads >= 1, "the burst made the page reload");
      assert.ok(
        reloads <= Math.ceil(seconds) + 2,
        `${reloads} reloads for 300 hints in ${seconds.toFixed(1)} s: hints are not coalesced`,
      );

      // The stream goes away (the server stops serving live events, as at shutdown): the header falls back
      // to "Updated … ago" and the page polls again, so the node going offline still shows.
      await stopLiveEvents(server.ctx);
      await page.waitForFunction(() =>
        /Updated/.test(document.querySelector("svc-nodes-page .page-header .updated-at")?.textContent ?? "")
      );
      await page.evaluate(() => document.querySelector("svc-nodes-page").autoRefreshMs = 1_000);
      watcher.cancel();
      await page.waitForFunction(
        () =>
          document.querySelector("svc-nodes-page tbody tr[data-node-id] sl-badge.status")?.textContent
            .trim() ===
            "Offline",
      );
      assert.equal(
        await page.evaluate(() => (globalThis as unknown as { svcMarker?: number }).svcMarker),
        1,
        "still the same page",
      );
      assert.deepEqual(pageErrors, []);
    } finally {
      agent?.close();
      await browser.close();
      await server.stop();
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
      await Deno.remove(profile, { recursive: true }).catch(() => {});
    }
  },
});
