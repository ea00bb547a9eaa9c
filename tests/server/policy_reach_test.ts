/**
 * The reach table and the per-node compliance counters (migrations/0015_policy_reach.sql) stay equal to their
 * definition — a released policy, an enabled binding, the node in the bound group; counts of the reached pairs
 * by their latest result — across every change that moves them, one at a time and concurrently.
 */
import assert from "node:assert/strict";
import type { Queryable } from "../../server/db/db.ts";
import { dbTest } from "../helpers/db.ts";
import { expectStatus, putBinding } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";
import { assertReachConsistent } from "./reach_helpers.ts";

const assertConsistent = assertReachConsistent;

async function pairs(q: Queryable, policyId: string): Promise<Record<string, number>> {
  const rows = await q.query<{ name: string; paths: number }>(
    "SELECT n.name, r.paths FROM policy_reach r JOIN nodes n ON n.id = r.node_id WHERE r.policy_id = $1",
    [policyId],
  );
  return Object.fromEntries(rows.map((r) => [r.name, r.paths]));
}

domain.domainTest(
  "policy reach and compliance counters follow bindings, memberships, policy states and deletions",
  async ({ db, admin }, t) => {
    const office = await domain.createGroup(admin, "office");
    const lab = await domain.createGroup(admin, "lab");
    const n1 = await domain.seedNode(db, { name: "n1", groups: [office] });
    const n2 = await domain.seedNode(db, { name: "n2", groups: [office, lab] });
    const n3 = await domain.seedNode(db, { name: "n3", groups: [lab] });
    const browser = await domain.createPolicy(admin, { name: "browser" });
    const screen = await domain.createPolicy(admin, { name: "screen", type: "Dconf" });
    const draft = await domain.createPolicy(admin, { name: "draft", type: "Polkit" });
    await domain.setState(admin, browser.id, "released");
    await domain.setState(admin, screen.id, "released");
    const browserOffice = await domain.bind(admin, browser.id, office, { enabled: true });
    await domain.bind(admin, browser.id, lab, { enabled: true });
    const screenLab = await domain.bind(admin, screen.id, lab);
    const doomed = await domain.createPolicy(admin, { name: "doomed", type: "Dconf" });
    await domain.setState(admin, doomed.id, "released");
    await domain.bind(admin, doomed.id, lab, { enabled: true });
    const draftOffice = await domain.bind(admin, draft.id, office);
    await domain.report(db, n1, browser.id, "compliant");
    await domain.report(db, n2, browser.id, "error");
    await domain.report(db, n3, screen.id, "compliant"); // not reached yet: the binding is disabled
    await domain.report(db, n1, draft.id, "non_compliant"); // not reached: the policy is a draft
    await domain.report(db, n3, doomed.id, "error");

    await t.step(
      "paths count every enabled binding through which a released policy reaches a node",
      async () => {
        assert.deepEqual(await pairs(db, browser.id), { n1: 1, n2: 2, n3: 1 });
        assert.deepEqual(await pairs(db, screen.id), {});
        assert.deepEqual(await pairs(db, draft.id), {});
        await assertConsistent(db, "setup");
      },
    );

    await t.step("enabling and disabling bindings", async () => {
      await putBinding(admin, screenLab, { state: "enabled" });
      assert.deepEqual(await pairs(db, screen.id), { n2: 1, n3: 1 });
      await assertConsistent(db, "enabling screen → lab");
      await putBinding(admin, browserOffice, { state: "disabled" });
      assert.deepEqual(await pairs(db, browser.id), { n2: 1, n3: 1 });
      await assertConsistent(db, "disabling browser → office");
      await putBinding(admin, browserOffice, { priority: 5 });
      await assertConsistent(db, "a priority change");
    });

    await t.step("releasing and archiving policies", async () => {
      await domain.setState(admin, draft.id, "released");
      assert.deepEqual(await pairs(db, draft.id), {});
      await putBinding(admin, draftOffice, { state: "enabled" });
      assert.deepEqual(await pairs(db, draft.id), { n1: 1, n2: 1 });
      await assertConsistent(db, "releasing draft and enabling its binding");
      await domain.setState(admin, browser.id, "archived");
      assert.deepEqual(await pairs(db, browser.id), {});
      await assertConsistent(db, "archiving browser");
      // The console refuses to re-release with enabled bindings in place; the table follows any state change.
      await db.query("UPDATE policies SET state = 'released' WHERE id = $1", [browser.id]);
      assert.deepEqual(await pairs(db, browser.id), { n2: 1, n3: 1 });
      await assertConsistent(db, "releasing browser with its lab binding enabled");
      await domain.setState(admin, browser.id, "archived");
      await assertConsistent(db, "archiving browser again");
    });

    await t.step("group membership changes", async () => {
      expectStatus(
        await admin.request("POST", `/api/v1/node-groups/${office}/members`, { node_ids: [n3] }),
        200,
      );
      assert.deepEqual(await pairs(db, draft.id), { n1: 1, n2: 1, n3: 1 });
      await assertConsistent(db, "adding n3 to office");
      const removed = await admin.request("DELETE", `/api/v1/node-groups/${lab}/members/${n2}`);
      assert.ok(removed.status === 200 || removed.status === 204, removed.text);
      assert.deepEqual(await pairs(db, screen.id), { n3: 1 });
      await assertConsistent(db, "removing n2 from lab");
    });

    await t.step("results moving between statuses, and removed", async () => {
      await domain.report(db, n3, screen.id, "non_compliant");
      await domain.report(db, n1, draft.id, "inapplicable");
      await assertConsistent(db, "result updates");
      await db.query("DELETE FROM compliance_results WHERE node_id = $1 AND policy_id = $2", [
        n3,
        screen.id,
      ]);
      await assertConsistent(db, "a deleted result");
    });

    await t.step("deleting a node, a policy, a binding and a group", async () => {
      const res = await admin.request("DELETE", `/api/v1/nodes/${n1}`);
      assert.ok(res.status === 200 || res.status === 204, res.text);
      await assertConsistent(db, "deleting n1");
      const gone = await admin.request("DELETE", `/api/v1/policy-bindings/${screenLab}`);
      assert.ok(gone.status === 200 || gone.status === 204, gone.text);
      await assertConsistent(db, "deleting the screen binding");
      // Its bindings, reached pairs and results all go at once.
      await db.query("DELETE FROM policies WHERE id = $1", [doomed.id]);
      await assertConsistent(db, "deleting a released, bound policy with results");
      const group = await admin.request("DELETE", `/api/v1/node-groups/${office}?force=true`);
      assert.ok(group.status === 200 || group.status === 204, group.text);
      assert.deepEqual(await pairs(db, draft.id), {});
      await assertConsistent(db, "deleting office");
    });
  },
);

dbTest(
  "policy reach stays right when memberships, bindings and policy states change concurrently",
  async (db) => {
    const groups = await db.query<{ id: string }>(
      "INSERT INTO node_groups (name) SELECT 'g' || i FROM generate_series(1, 4) i RETURNING id",
    );
    const policies = await db.query<{ id: string }>(
      `INSERT INTO policies (name, type, content, state) SELECT 'p' || i, 'Firefox', '{}', 'released'
       FROM generate_series(1, 3) i RETURNING id`,
    );
    const nodes = await db.query<{ id: string }>(
      "INSERT INTO nodes (name) SELECT 'node' || i FROM generate_series(1, 6) i RETURNING id",
    );
    // Every node in two groups, every policy bound to every group: every pair has several paths to lose.
    for (const [i, n] of nodes.entries()) {
      for (const g of [groups[i % 4], groups[(i + 1) % 4]]) {
        await db.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [
          n.id,
          g.id,
        ]);
      }
    }
    for (const p of policies) {
      for (const g of groups) {
        await db.query(
          "INSERT INTO policy_bindings (policy_id, node_group_id, state) VALUES ($1, $2, 'enabled')",
          [
            p.id,
            g.id,
          ],
        );
      }
    }
    for (const n of nodes) {
      await db.query(
        "INSERT INTO compliance_results (node_id, policy_id, status) VALUES ($1, $2, 'compliant')",
        [n.id, policies[0].id],
      );
    }
    await assertConsistent(db, "setup");

    // Each change in its own transaction, held open a moment so they overlap on PostgreSQL; a change that loses
    // a deadlock is rolled back whole, which must leave the tables as right as a committed one.
    const hold = "SELECT pg_sleep(0.02)";
    const changes: Array<(q: Queryable) => Promise<unknown>> = [];
    for (const [i, n] of nodes.entries()) {
      changes.push((q) =>
        q.query("DELETE FROM node_group_members WHERE node_id = $1 AND node_group_id = $2", [
          n.id,
          groups[i % 4].id,
        ])
      );
      changes.push((q) =>
        q.query(
          "UPDATE compliance_results SET status = 'error' WHERE node_id = $1 AND policy_id = $2",
          [n.id, policies[0].id],
        )
      );
    }
    for (const [i, g] of groups.entries()) {
      changes.push((q) =>
        q.query("UPDATE policy_bindings SET state = 'disabled' WHERE node_group_id = $1 AND policy_id = $2", [
          g.id,
          policies[i % 3].id,
        ])
      );
    }
    changes.push((q) => q.query("UPDATE policies SET state = 'archived' WHERE id = $1", [policies[1].id]));
    changes.push((q) =>
      q.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [
        nodes[0].id,
        groups[2].id,
      ])
    );
    changes.push((q) => q.query("DELETE FROM nodes WHERE id = $1", [nodes[5].id]));
    const outcomes = await Promise.allSettled(changes.map((change) =>
      db.transaction(async (tx) => {
        await change(tx);
        await tx.query(hold);
      })
    ));
    for (const o of outcomes) {
      if (o.status === "rejected") assert.match(String(o.reason), /deadlock/, String(o.reason));
    }
    assert.ok(outcomes.filter((o) => o.status === "fulfilled").length >= changes.length / 2);
    await assertConsistent(db, "concurrent changes");
  },
);
