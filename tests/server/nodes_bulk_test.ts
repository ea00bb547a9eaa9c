/**
 * Bulk actions of the node list over HTTP: "select all matching" returns the filter's nodes; move to a
 * group, re-enroll and delete change every named node in a savepoint of its own, report a node that fails
 * (deleted meanwhile, a permission it needs) without undoing the others, and write one audit row per node
 * naming it and what changed, plus the request's row with the counts. Permissions are attacked.
 */
import assert from "node:assert/strict";
import { expectStatus } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

interface Result {
  node_id: string;
  node_name: string;
  ok: boolean;
  error?: { code: string; message: string };
  left?: string[];
  joined?: string;
  command?: string;
  revoked_serials?: string[];
}

domain.domainTest(
  "bulk actions on nodes: per-node outcome, per-node audit, partial failure",
  async ({ db, server, admin }, t) => {
    const office = await domain.createGroup(admin, "office");
    const lab = await domain.createGroup(admin, "lab");
    const a = await domain.seedNode(db, {
      name: "bulk-a",
      groups: [office],
      status: "online",
      serials: ["a1"],
    });
    const b = await domain.seedNode(db, {
      name: "bulk-b",
      groups: [office, lab],
      status: "offline",
      serials: ["b1"],
    });
    const c = await domain.seedNode(db, { name: "bulk-c", groups: [], status: "online", serials: ["c1"] });
    const ghost = crypto.randomUUID();
    const audit = async (action: string) =>
      await db.query<{ resource_name: string; outcome: string; details: Record<string, unknown> }>(
        "SELECT resource_name, outcome, details FROM audit_logs WHERE action = $1 ORDER BY id",
        [action],
      );

    await t.step("select all matching: the filter's nodes by name, with the count", async () => {
      const all = expectStatus(await admin.request("GET", `/api/v1/nodes/matching?group=${office}`), 200);
      assert.equal(all.total, 2);
      assert.deepEqual(all.items.map((n: { name: string }) => n.name), ["bulk-a", "bulk-b"]);
      const online = expectStatus(await admin.request("GET", "/api/v1/nodes/matching?status=online"), 200);
      assert.deepEqual(online.items.map((n: { name: string }) => n.name), ["bulk-a", "bulk-c"]);
    });

    await t.step(
      "move to lab: each joins lab and leaves its other groups; an unknown node fails alone",
      async () => {
        const answer = expectStatus(
          await admin.request("POST", "/api/v1/nodes/bulk/move", {
            node_ids: [a, b, ghost],
            node_group_id: lab,
          }),
          200,
        );
        assert.deepEqual([answer.succeeded, answer.failed], [2, 1]);
        const byName = Object.fromEntries(answer.results.map((r: Result) => [r.node_name, r]));
        assert.deepEqual(byName["bulk-a"].left, ["office"]);
        assert.deepEqual(byName["bulk-b"].left, ["office"]);
        assert.equal(byName[ghost].ok, false);
        assert.match(byName[ghost].error.message, /node .* not found/);
        const members = await db.query<{ name: string; groups: string }>(
          `SELECT n.name, string_agg(g.name, ',' ORDER BY g.name) AS groups FROM nodes n
       JOIN node_group_members m ON m.node_id = n.id JOIN node_groups g ON g.id = m.node_group_id
       WHERE n.id = ANY($1::uuid[]) GROUP BY n.name ORDER BY n.name`,
          [[a, b]],
        );
        assert.deepEqual(members, [{ name: "bulk-a", groups: "lab" }, { name: "bulk-b", groups: "lab" }]);
        const rows = await audit("node.move_to_group");
        assert.deepEqual(rows.map((r) => [r.resource_name, r.outcome]), [
          ["bulk-a", "success"],
          ["bulk-b", "success"],
          [ghost, "failure"],
        ]);
        assert.deepEqual(rows[0].details.left_groups, ["office"]);
        assert.equal(rows[0].details.group, "lab");
        const [request] = await audit("node.bulk_move");
        const { requested, succeeded, failed } = request.details;
        assert.deepEqual({ requested, succeeded, failed }, { requested: 3, succeeded: 2, failed: 1 });
      },
    );

    await t.step("an unknown group refuses the whole move naming it", async () => {
      const refused = expectStatus(
        await admin.request("POST", "/api/v1/nodes/bulk/move", { node_ids: [a], node_group_id: ghost }),
        404,
      );
      assert.match(refused.error.message, /node group .* not found/);
    });

    await t.step("re-enroll without node:revoke: a valid certificate is that node's refusal", async () => {
      const enroller = await server.loginAs({ permissions: ["node_group:create", "node:view"] });
      await db.query(
        "INSERT INTO revoked_certificates (serial, node_id, reason) VALUES ('c1', $1, 'test')",
        [c],
      );
      const answer = expectStatus(
        await enroller.request("POST", "/api/v1/nodes/bulk/re-enroll", { node_ids: [a, c] }),
        200,
      );
      const [ra, rc] = answer.results as Result[];
      assert.equal(ra.ok, false);
      assert.match(ra.error!.message, /permission node:revoke is required/);
      assert.equal(rc.ok, true, "a revoked node needs no node:revoke");
      assert.match(rc.command!, /^SVC_ENROLLMENT_TOKEN='[A-Za-z0-9_-]+' svc-agent$/);
      const [revoked] = await db.query("SELECT 1 FROM revoked_certificates WHERE serial = 'a1'");
      assert.equal(revoked, undefined, "bulk-a was left alone");
    });

    await t.step("re-enroll with node:revoke revokes first and issues a token per node", async () => {
      const answer = expectStatus(
        await admin.request("POST", "/api/v1/nodes/bulk/re-enroll", { node_ids: [a] }),
        200,
      );
      const [ra] = answer.results as Result[];
      assert.equal(ra.ok, true);
      assert.deepEqual(ra.revoked_serials, ["a1"]);
      const [node] = await db.query<{ status: string }>("SELECT status FROM nodes WHERE id = $1", [a]);
      assert.equal(node.status, "offline");
      const rows = await audit("enrollment_token.create");
      assert.deepEqual(rows.map((r) => [r.resource_name, r.outcome]), [
        ["bulk-a", "failure"],
        ["bulk-c", "success"],
        ["bulk-a", "success"],
      ]);
      assert.equal(
        JSON.stringify(rows).includes(String(ra.command).slice(22, 40)),
        false,
        "no token in the log",
      );
    });

    await t.step("delete: every node's certificates revoked, rows gone, one row per node", async () => {
      const answer = expectStatus(
        await admin.request("POST", "/api/v1/nodes/bulk/delete", { node_ids: [b, c] }),
        200,
      );
      assert.deepEqual([answer.succeeded, answer.failed], [2, 0]);
      assert.deepEqual(await db.query("SELECT name FROM nodes WHERE id = ANY($1::uuid[])", [[b, c]]), []);
      const [revoked] = await db.query("SELECT 1 FROM revoked_certificates WHERE serial = 'b1'");
      assert.ok(revoked);
      const rows = await audit("delete");
      assert.deepEqual(rows.filter((r) => r.details.bulk).map((r) => r.resource_name), ["bulk-b", "bulk-c"]);
    });

    await t.step("permissions: each action needs its permission (attacked)", async () => {
      const viewer = await server.loginAs({ permissions: ["node:view", "node:edit"] });
      expectStatus(await viewer.request("POST", "/api/v1/nodes/bulk/delete", { node_ids: [a] }), 403);
      expectStatus(
        await viewer.request("POST", "/api/v1/nodes/bulk/move", { node_ids: [a], node_group_id: lab }),
        403,
      );
      expectStatus(await viewer.request("POST", "/api/v1/nodes/bulk/re-enroll", { node_ids: [a] }), 403);
      assert.equal((await db.query("SELECT 1 FROM nodes WHERE id = $1", [a])).length, 1);
    });

    await t.step("bad input names the field: empty list, too many, not UUIDs", async () => {
      const empty = expectStatus(
        await admin.request("POST", "/api/v1/nodes/bulk/delete", { node_ids: [] }),
        400,
      );
      assert.ok(empty.error.fields.some((f: { field: string }) => f.field === "node_ids"));
      const many = Array.from({ length: 1001 }, () => crypto.randomUUID());
      expectStatus(await admin.request("POST", "/api/v1/nodes/bulk/delete", { node_ids: many }), 400);
      expectStatus(await admin.request("POST", "/api/v1/nodes/bulk/delete", { node_ids: ["x"] }), 400);
    });
  },
);
