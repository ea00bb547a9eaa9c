/**
 * Live updates in a real browser (Debian's Chromium driven by puppeteer-core) against a real in-process
 * `svc-server` (web port with the console, policy port, hub): the nodes page says "Live", its polling is
 * switched off (interval set far beyond the test), and a node going online through a real agent policy
 * stream still appears, in place (no navigation), because the server's hint made the page reload. A burst
 * of hundreds of compliance hints costs about one reload per second, not one per hint. When the stream goes
 * away the header says "Updated … ago" again and the page polls.
 */
import assert from "node:assert/strict";
import { publishLiveHint } from "../../server/events/publish.ts";
import { stopLiveEvents } from "../../server/events/broker.ts";
import { type AgentServer, createGroup, enrollAgent, subscribe } from "../helpers/agents.ts";
import { browserTestSkipped } from "../helpers/browser.ts";
import { openConsoleLoggedIn, startConsoleServer, withConsole } from "../helpers/console_login.ts";

const SKIP = browserTestSkipped("live updates browser test");

// deno-lint-ignore no-explicit-any
declare const document: any;

Deno.test({
  name: "the nodes page updates from a live hint, without polling and without navigating",
  ignore: SKIP,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const server = await startConsoleServer({ settings: { "server.address": "127.0.0.1" }, database: "own" });
    const { ctx, ports } = server.running;
    await withConsole(server, { path: false, timeoutMs: 90_000 }, async ({ page, watch }) => {
      // The agent helpers need only the context and the two ports.
      const agentServer = { ctx, webPort: ports.web, policyPort: ports.policy } as AgentServer;
      const group = await createGroup(ctx.db, "lab");
      const agent = await enrollAgent(agentServer, { name: "live-node", groupId: group });
      try {
        const listRequests: number[] = [];
        page.on("request", (req) => {
          if (new URL(req.url()).pathname === "/api/v1/nodes") listRequests.push(Date.now());
        });
        await openConsoleLoggedIn(page, server.web, { username: "admin", password: server.adminPassword }, {
          path: "/nodes",
        });
        const rowStatus = () =>
          page.evaluate(() =>
            document.querySelector("svc-nodes-page tbody tr[data-node-id] sl-badge.status")?.textContent
              .trim()
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
          await publishLiveHint(ctx.db, { topic: "compliance", ids: [agent.nodeId] });
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
        await stopLiveEvents(ctx);
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
        assert.deepEqual(watch.pageErrors, []);
      } finally {
        agent.close();
      }
    });
  },
});
