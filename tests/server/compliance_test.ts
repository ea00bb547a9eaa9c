/**
 * Compliance views over HTTP: only results whose policy still reaches the node count (released policy,
 * enabled binding, node in the group); per node, per policy and fleet views agree.
 */
import assert from "node:assert/strict";
import { expectStatus, putBinding } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

domain.domainTest(
  "compliance views count only results whose policy still reaches the node",
  async ({ db, server, admin }, t) => {
    const office = await domain.createGroup(admin, "office");
    const lab = await domain.createGroup(admin, "lab");
    const n1 = await domain.seedNode(db, { name: "n1", groups: [office] });
    const n2 = await domain.seedNode(db, { name: "n2", groups: [office, lab] });
    const n3 = await domain.seedNode(db, { name: "n3" });
    const browser = await domain.createPolicy(admin, { name: "browser" });
    const screen = await domain.createPolicy(admin, { name: "screen", type: "Dconf" });
    const labOnly = await domain.createPolicy(admin, { name: "lab-only", type: "Polkit" });
    for (const p of [browser, screen, labOnly]) await domain.setState(admin, p.id, "released");
    await domain.bind(admin, browser.id, office, { enabled: true });
    await domain.bind(admin, screen.id, office, { enabled: true });
    const labBinding = await domain.bind(admin, labOnly.id, lab, { enabled: true });

    await domain.report(db, n1, browser.id, "compliant");
    await domain.report(db, n1, screen.id, "non_compliant", { message: "lock-delay differs" });
    await domain.report(db, n2, browser.id, "compliant");
    await domain.report(db, n2, labOnly.id, "error");
    // A leftover: n1 once had lab-only but is not in the lab group.
    await domain.report(db, n1, labOnly.id, "compliant");
    await domain.report(db, n3, browser.id, "compliant");

    await t.step("fleet list: reported results that still apply, with counts per status", async () => {
      const list = expectStatus(await admin.request("GET", "/api/v1/compliance?sort=node&order=asc"), 200);
      assert.deepEqual(
        list.items.map((r: { node_name: string; policy_name: string; status: string }) =>
          `${r.node_name}/${r.policy_name}/${r.status}`
        ),
        ["n1/browser/compliant", "n1/screen/non_compliant", "n2/browser/compliant", "n2/lab-only/error"],
      );
      assert.deepEqual(list.status_counts, {
        compliant: 2,
        non_compliant: 1,
        inapplicable: 0,
        error: 1,
        unknown: 0,
        total: 4,
      });
      assert.equal(list.items[1].message, "lock-delay differs");
      assert.deepEqual(list.items[1].items, [{
        schema_id: "s",
        key: "k",
        status: "non_compliant",
        message: "",
      }]);
      const filtered = expectStatus(await admin.request("GET", "/api/v1/compliance?status=error"), 200);
      assert.equal(filtered.total, 1);
      assert.equal(filtered.status_counts.total, 4, "counts ignore the status filter");
      const search = expectStatus(await admin.request("GET", "/api/v1/compliance?search=SCREEN"), 200);
      assert.equal(search.total, 1);
    });

    await t.step("per node: every policy that reaches it, unreported ones as unknown", async () => {
      const view = expectStatus(await admin.request("GET", `/api/v1/nodes/${n2}/compliance`), 200);
      assert.deepEqual(
        view.results.map((
          r: { policy_name: string; status: string; reported_at: string | null },
        ) => [r.policy_name, r.status, r.reported_at === null]),
        [["browser", "compliant", false], ["lab-only", "error", false], ["screen", "unknown", true]],
      );
      assert.deepEqual(view.summary, {
        compliant: 1,
        non_compliant: 0,
        inapplicable: 0,
        error: 1,
        unknown: 1,
        total: 3,
      });
      const none = expectStatus(await admin.request("GET", `/api/v1/nodes/${n3}/compliance`), 200);
      assert.deepEqual(none.results, []);
      expectStatus(await admin.request("GET", `/api/v1/nodes/${crypto.randomUUID()}/compliance`), 404);
    });

    await t.step("per policy: every node it reaches", async () => {
      const view = expectStatus(
        await admin.request("GET", `/api/v1/policies/all/${browser.id}/compliance`),
        200,
      );
      assert.deepEqual(view.items.map((r: { node_name: string }) => r.node_name), ["n1", "n2"]);
      assert.equal(view.status_counts.compliant, 2);
      const screenView = expectStatus(
        await admin.request("GET", `/api/v1/policies/all/${screen.id}/compliance?status=unknown`),
        200,
      );
      assert.deepEqual(screenView.items.map((r: { node_name: string }) => r.node_name), ["n2"]);
    });

    await t.step("fleet summary", async () => {
      const summary = expectStatus(await admin.request("GET", "/api/v1/compliance/summary"), 200);
      assert.deepEqual(summary.results, {
        compliant: 2,
        non_compliant: 1,
        inapplicable: 0,
        error: 1,
        unknown: 1,
        total: 5,
      });
      assert.equal(summary.score, 2 / 4);
      assert.deepEqual(summary.nodes, { total: 3, compliant: 0, non_compliant: 2, without_policies: 1 });
    });

    await t.step("disabling a binding or archiving a policy removes its results from the views", async () => {
      await putBinding(admin, labBinding, { state: "disabled" });
      await domain.setState(admin, screen.id, "archived");
      const list = expectStatus(await admin.request("GET", "/api/v1/compliance"), 200);
      assert.equal(list.total, 2);
      assert.deepEqual(list.status_counts.compliant, 2);
      const summary = expectStatus(await admin.request("GET", "/api/v1/compliance/summary"), 200);
      assert.deepEqual(summary.nodes, { total: 3, compliant: 2, non_compliant: 0, without_policies: 1 });
      assert.equal(summary.score, 1);
    });

    await t.step("compliance:view is required", async () => {
      const viewer = await server.loginAs({ permissions: ["node:view", "policy:view"] });
      expectStatus(await viewer.request("GET", "/api/v1/compliance"), 403);
      expectStatus(await viewer.request("GET", `/api/v1/nodes/${n1}/compliance`), 403);
    });
  },
);
