/**
 * The dashboard leads with the fleet, in a real browser (Debian's Chromium) against an in-process server with
 * a seeded fleet: the share of nodes compliant (of those that receive policies), and a "Needs attention" list
 * whose every entry counts what its link lists — nodes where a policy failed, nodes not compliant, the
 * policies failing on most nodes, certificates expired or expiring within 7 days, nodes offline, agents older
 * than the server. axe-core finds nothing at all on the page (every impact).
 *
 * Screenshots go to `test-artifacts/dashboard/`.
 */
import assert from "node:assert/strict";
import { axeViolations, browserTestSkipped, screenshot } from "../helpers/browser.ts";
import { callApiOk as call, startConsoleServer, withConsole } from "../helpers/console_login.ts";

// deno-lint-ignore no-explicit-any
type El = any;

Deno.test({
  name: "dashboard: the share of nodes compliant and what needs attention, each number landing on its list",
  ignore: browserTestSkipped("the dashboard browser test"),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const server = await startConsoleServer();
    await withConsole(server, { viewport: { width: 1440, height: 900 } }, async ({ page }) => {
      const base = server.web;
      const db = server.database!.db;

      // Two released policies reach the office group; five nodes are in it, one is in no group.
      const office = await call(page, "POST", "/api/v1/node-groups", { name: "office" });
      const policies: Record<string, string> = {};
      for (
        const [name, type, content] of [
          ["Browser hardening", "Firefox", { DisableTelemetry: true }],
          ["Homepage", "Chrome", { HomepageLocation: "https://intranet.example" }],
        ] as const
      ) {
        const p = await call(page, "POST", "/api/v1/policies/all", {
          name,
          type,
          content: JSON.stringify(content),
        });
        await call(page, "PUT", `/api/v1/policies/all/${p.id}/state`, { state: "released" });
        const b = await call(page, "POST", "/api/v1/policy-bindings", {
          policy_id: p.id,
          node_group_id: office.id,
        });
        await call(page, "PUT", `/api/v1/policy-bindings/${b.id}`, { state: "enabled" });
        policies[name] = p.id;
      }
      // Seeded nodes have no policy stream, so only statuses the hub leaves alone are used (offline, unknown).
      const nodes: Array<[string, string, string, string | null, boolean, string[]]> = [
        // name, status, agent version, certificate expiry, in office, [firefox, chrome] results
        ["n-good-1", "unknown", "0.0.1", "200 days", true, ["compliant", "compliant"]],
        ["n-good-2", "unknown", "0.0.1", "200 days", true, ["compliant", "inapplicable"]],
        ["n-drift", "unknown", "0.0.1", "3 days", true, ["non_compliant", "compliant"]],
        ["n-broken", "offline", "0.0.1", "200 days", true, ["compliant", "error"]],
        ["n-silent", "offline", "0.0.1", "-2 days", true, []],
        ["n-spare", "unknown", "0.0.1", "200 days", false, []],
      ];
      for (const [name, status, agent, expiry, inOffice, results] of nodes) {
        const [row] = await db.query<{ id: string }>(
          `INSERT INTO nodes (name, status, os_name, agent_version, cert_serial, cert_not_after)
           VALUES ($1, $2, 'Debian GNU/Linux', $3, $4, now() + $5::interval) RETURNING id`,
          [name, status, agent, expiry ? `${name}-serial` : null, expiry],
        );
        if (inOffice) {
          await db.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [
            row.id,
            office.id,
          ]);
        }
        for (const [i, status] of results.entries()) {
          const policyId = policies[i === 0 ? "Browser hardening" : "Homepage"];
          await db.query(
            `INSERT INTO compliance_results (node_id, policy_id, policy_version, status)
             SELECT $1, id, version, $3 FROM policies WHERE id = $2`,
            [row.id, policyId, status],
          );
        }
      }

      await page.goto(`${base}/`, { waitUntil: "domcontentloaded" });
      await page.waitForSelector("svc-dashboard-page .needs-attention ul.attention-list");
      // 2 of the 5 nodes that receive policies apply every one (compliant or inapplicable).
      const headline = await page.$eval(
        "svc-dashboard-page .fleet-compliance",
        (e: El) => e.textContent.replace(/\s+/g, " "),
      );
      assert.match(headline, /40% of nodes compliant/);
      assert.match(headline, /2 of 5 nodes that receive policies/);
      assert.match(headline, /1 node receives no policy/);
      await screenshot(page, "dashboard", "dashboard");

      const entries = await page.$$eval("svc-dashboard-page .attention-list a", (as: El[]) =>
        as.map((a) => ({
          href: a.getAttribute("href"),
          text: a.textContent.replace(/\s+/g, " ").trim(),
        }))) as Array<{ href: string; text: string }>;
      const byHref = Object.fromEntries(entries.map((e) => [e.href, e.text]));
      assert.match(byHref["/nodes?compliance=error"] ?? "", /^1 node where a policy failed/);
      assert.match(byHref["/nodes?compliance=non_compliant"] ?? "", /^1 node not compliant/);
      assert.match(
        byHref[`/policies/${policies["Browser hardening"]}/edit`] ?? "",
        /Browser hardening fails on 1 node/,
      );
      assert.match(byHref[`/policies/${policies["Homepage"]}/edit`] ?? "", /Homepage fails on 1 node/);
      assert.match(byHref["/nodes?cert_expiry=expired"] ?? "", /^1 agent certificate has expired/);
      assert.match(
        byHref["/nodes?cert_expiry=within_7_days"] ?? "",
        /^1 agent certificate expires within 7 days/,
      );
      assert.match(byHref["/nodes?status=offline&sort=last_seen&order=asc"] ?? "", /^2 nodes offline/);
      assert.match(
        byHref["/nodes?sort=agent_version&order=asc"] ?? "",
        /^6 nodes run an older agent \(0\.0\.1\)/,
      );
      assert.equal(entries.length, 8, JSON.stringify(entries, null, 1));

      // Every node count lands on a list of that many nodes.
      for (
        const { href, text } of entries.filter((e) =>
          e.href.startsWith("/nodes?compliance=") || e.href.startsWith("/nodes?cert_expiry=") ||
          e.href.startsWith("/nodes?status=")
        )
      ) {
        const expected = Number(text.split(" ")[0]);
        const { total } = await call(page, "GET", `/api/v1${href.replace(/&sort=.*/, "")}&per_page=1`);
        assert.equal(total, expected, `${href}: the list has ${total}, the dashboard says ${expected}`);
      }
      assert.deepEqual(await axeViolations(page), [], "axe on the dashboard");
    });
  },
});
