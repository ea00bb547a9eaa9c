/**
 * Rollout of a released policy over HTTP: every reached node with the bindings that reach it and its state
 * for the current version (pending until it reports on that version, including after a revision is
 * released), problems first, filters, counts, and the grouped counts route for the policy list.
 */
import assert from "node:assert/strict";
import type { Queryable } from "../../server/db/db.ts";
import { expectStatus } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

async function reportOn(q: Queryable, node: string, policy: string, status: string, version: number) {
  await q.query(
    `INSERT INTO compliance_results (node_id, policy_id, policy_version, status, message)
     VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (node_id, policy_id) DO UPDATE
       SET status = EXCLUDED.status, policy_version = EXCLUDED.policy_version, message = EXCLUDED.message`,
    [node, policy, version, status, `${status} report`],
  );
}

domain.domainTest(
  "rollout: reached nodes, bindings, states, filters and counts",
  async ({ db, server, admin }, t) => {
    const lab = await domain.createGroup(admin, "lab");
    const office = await domain.createGroup(admin, "office");
    const policy = await domain.createPolicy(admin, { name: "Browser", type: "Firefox" });
    const other = await domain.createPolicy(admin, { name: "Unbound", type: "Firefox" });
    await domain.setState(admin, policy.id, "released");
    await domain.bind(admin, policy.id, lab, { enabled: true, priority: 5 });
    await domain.bind(admin, policy.id, office, { enabled: true });
    const a = await domain.seedNode(db, { name: "a-ok", groups: [lab], status: "online" });
    const b = await domain.seedNode(db, { name: "b-both", groups: [lab, office], status: "online" });
    const c = await domain.seedNode(db, { name: "c-offline", groups: [office], status: "offline" });
    const d = await domain.seedNode(db, { name: "d-error", groups: [office], status: "online" });
    await domain.seedNode(db, { name: "e-outside", status: "online" });
    await db.query("UPDATE nodes SET last_seen = '2026-01-02T03:04:05Z' WHERE id = $1", [c]);
    await reportOn(db, a, policy.id, "compliant", 1);
    await reportOn(db, b, policy.id, "non_compliant", 1);
    await reportOn(db, d, policy.id, "error", 1);
    const rollout = (query = "") =>
      admin.request("GET", `/api/v1/policies/all/${policy.id}/rollout${query}`).then((r) =>
        expectStatus(r, 200)
      );

    await t.step("every reached node, problems first, with the bindings that reach it", async () => {
      const page = await rollout();
      assert.deepEqual(
        page.items.map((r: { node_name: string; state: string }) => [r.node_name, r.state]),
        [["d-error", "error"], ["b-both", "non_compliant"], ["c-offline", "pending"], ["a-ok", "compliant"]],
      );
      const both = page.items.find((r: { node_name: string }) => r.node_name === "b-both");
      assert.deepEqual(
        both.via.map((v: { node_group_name: string; priority: number }) => [v.node_group_name, v.priority]),
        [["lab", 5], ["office", 0]],
      );
      const offline = page.items.find((r: { node_name: string }) => r.node_name === "c-offline");
      assert.equal(offline.node_status, "offline");
      assert.equal(new Date(offline.last_seen).toISOString(), "2026-01-02T03:04:05.000Z");
      assert.equal(offline.reported_version, null);
      assert.deepEqual(page.counts, {
        pending: 1,
        error: 1,
        non_compliant: 1,
        compliant: 1,
        inapplicable: 0,
        total: 4,
      });
      assert.equal(page.total, 4);
    });

    await t.step("filters by state and node name keep the counts of the whole rollout", async () => {
      const pending = await rollout("?state=pending");
      assert.deepEqual(pending.items.map((r: { node_name: string }) => r.node_name), ["c-offline"]);
      assert.equal(pending.counts.total, 4);
      const search = await rollout("?search=OK");
      assert.deepEqual(search.items.map((r: { node_name: string }) => r.node_name), ["a-ok"]);
      expectStatus(await admin.request("GET", `/api/v1/policies/all/${policy.id}/rollout?state=bogus`), 400);
    });

    await t.step(
      "a released revision makes every node pending until it reports on the new version",
      async () => {
        expectStatus(
          await admin.request("PUT", `/api/v1/policies/all/${policy.id}/revision`, {
            content: JSON.stringify({ DisablePocket: true }),
          }),
          200,
        );
        assert.equal((await rollout()).counts.compliant, 1, "a pending revision changes nothing");
        expectStatus(
          await admin.request("POST", `/api/v1/policies/all/${policy.id}/revision/release`, {}),
          200,
        );
        const after = await rollout();
        assert.equal(after.version, 2);
        assert.equal(after.counts.pending, 4);
        // The reports on version 1 carried messages; a pending row must not show them as if current.
        assert.deepEqual(
          after.items.map((r: { node_name: string; message: string }) => [r.node_name, r.message]),
          [["a-ok", ""], ["b-both", ""], ["c-offline", ""], ["d-error", ""]],
        );
        await reportOn(db, a, policy.id, "compliant", 2);
        const reported = await rollout("?state=compliant");
        assert.deepEqual(
          reported.items.map((r: { node_name: string; message: string }) => [r.node_name, r.message]),
          [["a-ok", "compliant report"]],
          "a report on the current version shows its message",
        );
        assert.equal(reported.counts.pending, 3);
      },
    );

    await t.step("counts of many policies in one call; a policy that reaches nobody has zeros", async () => {
      const counts = expectStatus(
        await admin.request("GET", `/api/v1/policies/rollout?ids=${policy.id},${other.id}`),
        200,
      );
      assert.deepEqual(counts[policy.id], {
        pending: 3,
        error: 0,
        non_compliant: 0,
        compliant: 1,
        inapplicable: 0,
        total: 4,
      });
      assert.equal(counts[other.id].total, 0);
      expectStatus(await admin.request("GET", "/api/v1/policies/rollout?ids=not-a-uuid"), 400);
    });

    await t.step(
      "the compliance list with unreported pairs agrees with the summary, problems first",
      async () => {
        const summary = expectStatus(await admin.request("GET", "/api/v1/compliance/summary"), 200);
        const list = expectStatus(
          await admin.request("GET", "/api/v1/compliance?include_unreported=true&sort=severity&order=asc"),
          200,
        );
        assert.deepEqual(list.status_counts, summary.results);
        assert.equal(list.total, summary.results.total);
        assert.deepEqual(
          list.items.map((r: { node_name: string; status: string }) => `${r.node_name}:${r.status}`),
          ["d-error:error", "b-both:non_compliant", "c-offline:unknown", "a-ok:compliant"],
        );
        const unknown = expectStatus(
          await admin.request("GET", "/api/v1/compliance?include_unreported=true&status=unknown"),
          200,
        );
        assert.equal(
          unknown.total,
          summary.results.unknown,
          "the dashboard's Unknown number lands on its rows",
        );
        const reportedOnly = expectStatus(
          await admin.request("GET", "/api/v1/compliance?status=unknown"),
          200,
        );
        assert.equal(reportedOnly.total, 0, "without the flag, only reported results are listed");
      },
    );

    await t.step("node list: worst compliance status with counts, and a filter on it", async () => {
      const list = expectStatus(await admin.request("GET", "/api/v1/nodes?sort=name&order=asc"), 200);
      const rollups = Object.fromEntries(
        list.items.map((n: { name: string; compliance_rollup: unknown }) => [n.name, n.compliance_rollup]),
      );
      assert.deepEqual(rollups["a-ok"], { worst: "compliant", total: 1, problems: 0, unknown: 0 });
      assert.deepEqual(rollups["b-both"], { worst: "non_compliant", total: 1, problems: 1, unknown: 0 });
      assert.deepEqual(rollups["c-offline"], { worst: "unknown", total: 1, problems: 0, unknown: 1 });
      assert.deepEqual(rollups["d-error"], { worst: "error", total: 1, problems: 1, unknown: 0 });
      assert.deepEqual(rollups["e-outside"], { worst: "none", total: 0, problems: 0, unknown: 0 });
      const failing = expectStatus(await admin.request("GET", "/api/v1/nodes?compliance=error"), 200);
      assert.deepEqual(failing.items.map((n: { name: string }) => n.name), ["d-error"]);
      const none = expectStatus(await admin.request("GET", "/api/v1/nodes?compliance=none"), 200);
      assert.deepEqual(none.items.map((n: { name: string }) => n.name), ["e-outside"]);
      expectStatus(await admin.request("GET", "/api/v1/nodes?compliance=green"), 400);
    });

    await t.step("needs compliance:view; an unknown policy is 404", async () => {
      const viewer = await server.loginAs({ permissions: ["policy:view"] });
      expectStatus(await viewer.request("GET", `/api/v1/policies/all/${policy.id}/rollout`), 403);
      expectStatus(await viewer.request("GET", `/api/v1/policies/rollout?ids=${policy.id}`), 403);
      expectStatus(
        await admin.request("GET", "/api/v1/policies/all/00000000-0000-4000-8000-000000000000/rollout"),
        404,
      );
    });
  },
);
