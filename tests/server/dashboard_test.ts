/**
 * `GET /api/v1/dashboard/summary` over HTTP against fixtures on both drivers: every count is right (nodes by
 * status, certificate expiry buckets over every node, compliance by status counting only results whose
 * policy still reaches the node, policies by state and type, bindings by state); each section is present
 * only with its permission; the compliance section equals the fleet summary; and the number of queries does
 * not grow with the fleet.
 */
import assert from "node:assert/strict";
import type { Queryable } from "../../server/db/db.ts";
import { dashboardSummary } from "../../server/domain/dashboard.ts";
import { fleetSummary } from "../../server/domain/compliance.ts";
import { expectStatus, putBinding } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

const SUMMARY = "/api/v1/dashboard/summary";

/** Sets a node's certificate expiry to `interval` from now (SQL interval text), or to none. */
async function expiresIn(q: Queryable, nodeId: string, interval: string | null): Promise<void> {
  await q.query(
    "UPDATE nodes SET cert_not_after = CASE WHEN $2::text IS NULL THEN NULL ELSE now() + $2::interval END WHERE id = $1",
    [nodeId, interval],
  );
}

domain.domainTest(
  "the dashboard summary counts the fleet and shows each section only with its permission",
  async ({ db, server, admin }, t) => {
    await t.step("an empty fleet gives zeros in every section, not missing keys", async () => {
      const summary = expectStatus(await admin.request("GET", SUMMARY), 200);
      assert.deepEqual(summary.nodes, { online: 0, degraded: 0, offline: 0, unknown: 0, total: 0 });
      assert.equal(summary.certificates.total, 0);
      assert.deepEqual(summary.compliance, {
        results: { compliant: 0, non_compliant: 0, inapplicable: 0, error: 0, unknown: 0, total: 0 },
        score: null,
        nodes: { total: 0, compliant: 0, non_compliant: 0, without_policies: 0 },
      });
      assert.deepEqual(summary.policies, {
        total: 0,
        by_state: { draft: 0, released: 0, archived: 0 },
        by_type: [],
      });
      assert.deepEqual(summary.bindings, { enabled: 0, disabled: 0, total: 0 });
    });

    const office = await domain.createGroup(admin, "office");
    const lab = await domain.createGroup(admin, "lab");
    const a = await domain.seedNode(db, { name: "a", status: "online", groups: [office] });
    const b = await domain.seedNode(db, { name: "b", status: "online", groups: [office, lab] });
    const c = await domain.seedNode(db, { name: "c", status: "offline", groups: [lab] });
    const d = await domain.seedNode(db, { name: "d", status: "degraded" });
    const e = await domain.seedNode(db, { name: "e", status: "unknown" });
    const f = await domain.seedNode(db, { name: "f", status: "offline" });
    const g = await domain.seedNode(db, { name: "g", status: "offline", serials: ["0a1b2c"] });
    await expiresIn(db, a, "3 days");
    await expiresIn(db, b, "20 days");
    // c keeps the seeded 90 days, a fresh agent certificate.
    await expiresIn(db, d, "-1 day");
    await expiresIn(db, e, null);
    await expiresIn(db, f, "400 days");
    // Revoked with 10 days left: never renewed, so not counted as "within 30 days".
    await expiresIn(db, g, "10 days");
    await db.query(
      "INSERT INTO revoked_certificates (serial, node_id, reason) VALUES ('0a1b2c', $1, 'test')",
      [g],
    );

    const browser = await domain.createPolicy(admin, { name: "browser" });
    const screen = await domain.createPolicy(admin, { name: "screen", type: "Dconf" });
    const labOnly = await domain.createPolicy(admin, { name: "lab-only", type: "Polkit" });
    const draft = await domain.createPolicy(admin, { name: "draft" });
    const old = await domain.createPolicy(admin, { name: "old", type: "Dconf" });
    for (const p of [browser, screen, labOnly, old]) await domain.setState(admin, p.id, "released");
    await domain.bind(admin, browser.id, office, { enabled: true });
    const screenBinding = await domain.bind(admin, screen.id, office, { enabled: true });
    await domain.bind(admin, labOnly.id, lab, { enabled: true });
    await domain.bind(admin, labOnly.id, office);
    await domain.bind(admin, old.id, office, { enabled: true });
    await domain.setState(admin, old.id, "archived");

    await domain.report(db, a, browser.id, "compliant");
    await domain.report(db, a, screen.id, "non_compliant");
    await domain.report(db, b, browser.id, "compliant");
    await domain.report(db, b, labOnly.id, "error");
    await domain.report(db, c, labOnly.id, "inapplicable");
    // Stale results: an archived policy, a node outside the group, a disabled binding, a draft.
    await domain.report(db, a, old.id, "compliant");
    await domain.report(db, d, browser.id, "non_compliant");
    await domain.report(db, a, labOnly.id, "error");
    await domain.report(db, a, draft.id, "error");

    await t.step("every section with every permission, each count right", async () => {
      const summary = expectStatus(await admin.request("GET", SUMMARY), 200);
      assert.deepEqual(Object.keys(summary).sort(), [
        "bindings",
        "certificates",
        "compliance",
        "nodes",
        "policies",
      ]);
      assert.deepEqual(summary.nodes, { online: 2, degraded: 1, offline: 3, unknown: 1, total: 7 });
      assert.deepEqual(summary.certificates, {
        expired: 1,
        within_7_days: 1,
        within_30_days: 1,
        within_90_days: 1,
        later: 1,
        none: 1,
        revoked: 1,
        total: 7,
      });
      assert.deepEqual(summary.compliance, {
        // a: browser, screen; b: browser, screen (unreported), lab-only; c: lab-only.
        results: { compliant: 2, non_compliant: 1, inapplicable: 1, error: 1, unknown: 1, total: 6 },
        score: 2 / 4,
        nodes: { total: 7, compliant: 1, non_compliant: 2, without_policies: 4 },
      });
      assert.deepEqual(summary.policies, {
        total: 5,
        by_state: { draft: 1, released: 3, archived: 1 },
        by_type: [
          { type: "Dconf", total: 2, by_state: { draft: 0, released: 1, archived: 1 } },
          { type: "Firefox", total: 2, by_state: { draft: 1, released: 1, archived: 0 } },
          { type: "Polkit", total: 1, by_state: { draft: 0, released: 1, archived: 0 } },
        ],
      });
      assert.deepEqual(summary.bindings, { enabled: 4, disabled: 1, total: 5 });
    });

    await t.step("the compliance section is the fleet summary's numbers", async () => {
      const summary = expectStatus(await admin.request("GET", SUMMARY), 200);
      assert.deepEqual(summary.compliance, await fleetSummary(db));
    });

    await t.step("a result stops counting once its policy no longer reaches the node", async () => {
      await putBinding(admin, screenBinding, { state: "disabled" });
      const summary = expectStatus(await admin.request("GET", SUMMARY), 200);
      assert.deepEqual(summary.compliance.results, {
        compliant: 2,
        non_compliant: 0,
        inapplicable: 1,
        error: 1,
        unknown: 0,
        total: 4,
      });
      assert.deepEqual(summary.compliance.nodes, {
        total: 7,
        compliant: 2,
        non_compliant: 1,
        without_policies: 4,
      });
      assert.deepEqual(summary.bindings, { enabled: 3, disabled: 2, total: 5 });
      assert.deepEqual(summary.compliance, await fleetSummary(db));
    });

    await t.step("each section only with its permission; none without any", async () => {
      const cases: Array<[Parameters<typeof server.loginAs>[0], string[]]> = [
        [{ permissions: [] }, []],
        [{ permissions: ["node:view"] }, ["certificates", "nodes"]],
        [{ permissions: ["compliance:view"] }, ["compliance"]],
        [{ permissions: ["policy:view"] }, ["policies"]],
        [{ permissions: ["binding:view"] }, ["bindings"]],
        [{ permissions: ["node_group:view", "user:view", "audit_log:view"] }, []],
        [{ permissions: ["policy:view", "binding:view"] }, ["bindings", "policies"]],
      ];
      for (const [options, sections] of cases) {
        const client = await server.loginAs(options);
        const summary = expectStatus(await client.request("GET", SUMMARY), 200);
        assert.deepEqual(Object.keys(summary).sort(), sections, JSON.stringify(options));
      }
      const anonymous = await server.anonymous().request("GET", SUMMARY);
      assert.equal(anonymous.status, 401);
      const extra = await admin.request("GET", `${SUMMARY}?section=nodes`);
      assert.equal(extra.status, 400, "unknown query parameters are refused");
    });

    await t.step("the number of queries does not grow with the fleet", async () => {
      const all = { nodes: true, certificates: true, compliance: true, policies: true, bindings: true };
      const before = domain.countingDb(db, { outside: false });
      await dashboardSummary(before.db, all);
      for (let i = 0; i < 40; i++) await domain.seedNode(db, { name: `bulk-${i}`, groups: [office] });
      const after = domain.countingDb(db, { outside: false });
      const summary = await dashboardSummary(after.db, all);
      assert.equal(summary.nodes!.total, 47);
      assert.equal(summary.compliance!.results.unknown, 40, "one unreported browser result per new node");
      assert.equal(after.count(), before.count());
      assert.ok(after.count() <= 6, `${after.count()} queries`);
    });
  },
);
