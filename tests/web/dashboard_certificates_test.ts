/**
 * Distributed CA certificates that expire soon appear on the dashboard's "Needs attention" list, in a real
 * browser (Debian's Chromium) against an in-process server: only certificates of released Certificates policies
 * that reach a node count, within 30 days, soonest first; one that expired after its policy was released turns
 * the entry red; the entry links to the released Certificates policies.
 */
import assert from "node:assert/strict";
import { browserTestSkipped } from "../helpers/browser.ts";
import { callApiOk as call, startConsoleServer, withConsole } from "../helpers/console_login.ts";
import { makeCertificate } from "../helpers/test_ca.ts";

// deno-lint-ignore no-explicit-any
type El = any;

Deno.test({
  name: "dashboard: distributed CA certificates expiring within 30 days need attention",
  ignore: browserTestSkipped("the dashboard certificates test"),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await withConsole(await startConsoleServer(), {}, async ({ server, page }) => {
      const base = server.web;
      const db = server.database!.db;
      const office = await call(page, "POST", "/api/v1/node-groups", { name: "office" });
      const [node] = await db.query<{ id: string }>(
        "INSERT INTO nodes (name, status) VALUES ('n-1', 'unknown') RETURNING id",
      );
      await db.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [
        node.id,
        office.id,
      ]);
      const soon = await makeCertificate({ subject: "/CN=Soon Root", days: 10 });
      const later = await makeCertificate({ subject: "/CN=Later Root", days: 200 });
      const unbound = await makeCertificate({ subject: "/CN=Unbound Root", days: 5 });
      const policy = async (name: string, certs: { name: string; pem: string }[], bind: boolean) => {
        const p = await call(page, "POST", "/api/v1/policies/all", {
          name,
          type: "Certificates",
          content: JSON.stringify({ certificates: certs }),
        });
        await call(page, "PUT", `/api/v1/policies/all/${p.id}/state`, { state: "released" });
        if (bind) {
          const b = await call(page, "POST", "/api/v1/policy-bindings", {
            policy_id: p.id,
            node_group_id: office.id,
          });
          await call(page, "PUT", `/api/v1/policy-bindings/${b.id}`, { state: "enabled" });
        }
        return p.id as string;
      };
      const corp = await policy("corp trust", [
        { name: "soon", pem: soon.pem },
        { name: "later", pem: later.pem },
      ], true);
      await policy("not bound", [{ name: "unbound", pem: unbound.pem }], false);

      const expiring = await call(page, "GET", "/api/v1/certificates/expiring");
      assert.equal(expiring.within_days, 30);
      assert.deepEqual(expiring.items.map((i: { name: string }) => i.name), ["soon"]);
      assert.equal(expiring.items[0].policy_id, corp);
      assert.equal(expiring.items[0].subject, "CN=Soon Root");
      assert.equal(expiring.items[0].expired, false);
      assert.deepEqual(
        (await call(page, "GET", "/api/v1/certificates/expiring?within_days=365")).items.map((
          i: { name: string },
        ) => i.name),
        ["soon", "later"],
      );

      const entry = async () => {
        await page.goto(`${base}/`, { waitUntil: "domcontentloaded" });
        await page.waitForSelector("svc-dashboard-page .needs-attention ul.attention-list");
        return await page.$eval(
          'svc-dashboard-page .attention-list a[href="/policies?type=Certificates&state=released"]',
          (a: El) => ({ text: a.textContent.replace(/\s+/g, " ").trim(), cls: a.parentElement.className }),
        );
      };
      assert.deepEqual(await entry(), {
        text: "1 distributed CA certificate expires within 30 days",
        cls: "attention-warning",
      });

      // A certificate that expired after its policy was released (stored content is not re-validated).
      const old = await makeCertificate({
        subject: "/CN=Old Root",
        notBefore: new Date("2020-01-01T00:00:00Z"),
        notAfter: new Date("2021-01-01T00:00:00Z"),
      });
      await db.query("UPDATE policies SET content = $1 WHERE id = $2", [
        JSON.stringify({ certificates: [{ name: "soon", pem: soon.pem }, { name: "old", pem: old.pem }] }),
        corp,
      ]);
      assert.deepEqual(
        (await call(page, "GET", "/api/v1/certificates/expiring")).items.map((i: { name: string }) => i.name),
        ["old", "soon"],
        "soonest first",
      );
      assert.deepEqual(await entry(), {
        text: "2 distributed CA certificates expire within 30 days (1 already expired)",
        cls: "attention-danger",
      });
    });
  },
});
