/**
 * Why an online node is Pending or receives no policy, computed from real rows (streams, memberships,
 * bindings, results, the agent's version) and returned with the node list rows and the node record: one
 * node per reason, each tested, plus nodes that get none (offline, compliant).
 */
import assert from "node:assert/strict";
import type { Queryable } from "../../server/db/db.ts";
import { expectStatus } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

const REPLICA = "pending-test-replica";

/**
 * An open stream of `nodeId` opened `minutesAgo`, as the hub records it; the node's groups so far were
 * joined before that.
 */
async function openStream(q: Queryable, nodeId: string, minutesAgo: number): Promise<void> {
  await q.query(
    "UPDATE node_group_members SET created_at = now() - make_interval(mins => $2 + 1) WHERE node_id = $1",
    [nodeId, minutesAgo],
  );
  await q.query(
    `INSERT INTO server_replicas (id, hostname) VALUES ($1, 'test') ON CONFLICT (id) DO NOTHING`,
    [REPLICA],
  );
  await q.query(
    `INSERT INTO node_streams (node_id, replica_id, opened_at) VALUES ($1, $2, now() - make_interval(mins => $3))`,
    [nodeId, REPLICA, minutesAgo],
  );
}

domain.domainTest(
  "an online node says why it is Pending, one reason per cause",
  async ({ db, admin }, t) => {
    const online = { status: "online", agentVersion: "0.1.0" };
    const heard = async (id: string) =>
      await db.query("UPDATE nodes SET last_seen = now() - interval '30 minutes' WHERE id = $1", [id]);
    const reasons = async (id: string) =>
      expectStatus(await admin.request("GET", `/api/v1/nodes/${id}`), 200).pending_reasons as Array<
        { code: string; message: string; policies?: string[]; groups?: string[] }
      >;
    const codes = async (id: string) => (await reasons(id)).map((r) => r.code);

    const idle = await domain.createGroup(admin, "idle");
    const office = await domain.createGroup(admin, "office");
    const firefox = await domain.createPolicy(admin, { name: "Browser", type: "Firefox" });
    await domain.setState(admin, firefox.id, "released");
    await domain.bind(admin, firefox.id, office, { enabled: true });
    const disabledOnly = await domain.createGroup(admin, "disabled-only");
    await domain.bind(admin, firefox.id, disabledOnly);

    await t.step("no_group: in no node group", async () => {
      const id = await domain.seedNode(db, { name: "lonely", ...online });
      await openStream(db, id, 5);
      assert.deepEqual(await codes(id), ["no_group"]);
      assert.match((await reasons(id))[0].message, /in no node group.*add it to a group/);
    });

    await t.step("no_enabled_binding: its groups have only disabled bindings", async () => {
      const id = await domain.seedNode(db, { name: "unbound", groups: [idle, disabledOnly], ...online });
      await openStream(db, id, 5);
      const [r] = await reasons(id);
      assert.equal(r.code, "no_enabled_binding");
      assert.deepEqual(r.groups, ["disabled-only", "idle"]);
      assert.match(r.message, /No enabled binding reaches its groups "disabled-only" and "idle"/);
    });

    await t.step("bound_policies_not_released: the bound policy was archived", async () => {
      const archivedGroup = await domain.createGroup(admin, "archived-bound");
      const old = await domain.createPolicy(admin, { name: "Old rules", type: "Firefox" });
      await domain.setState(admin, old.id, "released");
      await domain.bind(admin, old.id, archivedGroup, { enabled: true });
      await domain.setState(admin, old.id, "archived");
      const id = await domain.seedNode(db, { name: "archived-node", groups: [archivedGroup], ...online });
      await openStream(db, id, 5);
      const [r] = await reasons(id);
      assert.equal(r.code, "bound_policies_not_released");
      assert.deepEqual(r.policies, ["Old rules"]);
    });

    await t.step("not_reported_since_connect: reached, connected, no report since", async () => {
      const id = await domain.seedNode(db, { name: "quiet", groups: [office], ...online });
      await heard(id);
      await openStream(db, id, 10);
      const [r] = await reasons(id);
      assert.equal(r.code, "not_reported_since_connect");
      assert.deepEqual(r.policies, ["Browser"]);
      assert.match(r.message, /has not reported compliance since it connected/);
    });

    await t.step("joined_after_connect: the group came after the stream opened", async () => {
      const id = await domain.seedNode(db, { name: "late-joiner", ...online });
      await heard(id);
      await openStream(db, id, 10);
      await db.query("INSERT INTO node_group_members (node_id, node_group_id) VALUES ($1, $2)", [id, office]);
      const all = await reasons(id);
      assert.equal(all[0].code, "joined_after_connect");
      assert.deepEqual(all[0].groups, ["office"]);
      assert.match(all[0].message, /when its stream next opens/);
    });

    await t.step("no_heartbeat: connected, never heard", async () => {
      const id = await domain.seedNode(db, { name: "mute", groups: [office], status: "online" });
      await openStream(db, id, 3);
      assert.deepEqual(await codes(id), ["no_heartbeat", "not_reported_since_connect"]);
    });

    await t.step("agent_too_old: the agent predates the oldest supported version", async () => {
      const id = await domain.seedNode(db, {
        name: "ancient",
        groups: [office],
        status: "online",
        agentVersion: "0.0.9",
      });
      await heard(id);
      await openStream(db, id, 3);
      const all = await reasons(id);
      assert.ok(all.some((r) => r.code === "agent_too_old" && /0\.0\.9, older than 0\.1\.0/.test(r.message)));
      const typeReason = all.find((r) => r.code === "type_unsupported");
      assert.match(typeReason!.message, /enforce type Firefox from version 0\.1\.0; this one is 0\.0\.9/);
    });

    await t.step("type_unsupported: a type this release does not know", async () => {
      const printers = await domain.createGroup(admin, "printers");
      const future = await domain.createPolicy(admin, {
        name: "Printers",
        type: "Printers",
        content: JSON.stringify({ queues: ["a"] }),
      });
      await domain.setState(admin, future.id, "released");
      await domain.bind(admin, future.id, printers, { enabled: true });
      const id = await domain.seedNode(db, { name: "printer-host", groups: [printers], ...online });
      await heard(id);
      await openStream(db, id, 3);
      const all = await reasons(id);
      const r = all.find((x) => x.code === "type_unsupported")!;
      assert.deepEqual(r.policies, ["Printers"]);
      assert.match(r.message, /type Printers is unknown to this server's release/);
    });

    await t.step("older_version_reported: reported since connecting, on an older version", async () => {
      const id = await domain.seedNode(db, { name: "behind", groups: [office], ...online });
      await heard(id);
      await openStream(db, id, 10);
      await domain.report(db, id, firefox.id, "compliant", { version: 1 });
      assert.deepEqual(await codes(id), [], "reported on the current version: nothing to explain");
      expectStatus(
        await admin.request("PUT", `/api/v1/policies/all/${firefox.id}/revision`, {
          content: JSON.stringify({ DisableTelemetry: false }),
        }),
        200,
      );
      expectStatus(
        await admin.request("POST", `/api/v1/policies/all/${firefox.id}/revision/release`, {}),
        200,
      );
      const [r] = await reasons(id);
      assert.equal(r.code, "older_version_reported");
      assert.match(r.message, /last reported version 1 of "Browser"; it has not applied version 2 yet/);
    });

    await t.step("offline nodes explain nothing; list rows carry the same reasons", async () => {
      const id = await domain.seedNode(db, { name: "gone", status: "offline" });
      assert.deepEqual(await codes(id), []);
      const page = expectStatus(await admin.request("GET", "/api/v1/nodes?per_page=100"), 200);
      const byName = Object.fromEntries(
        page.items.map((n: { name: string; pending_reasons: Array<{ code: string }> }) => [
          n.name,
          n.pending_reasons.map((r) => r.code),
        ]),
      );
      assert.deepEqual(byName.lonely, ["no_group"]);
      assert.deepEqual(byName.quiet, ["not_reported_since_connect"]);
      assert.deepEqual(byName.gone, []);
    });
  },
);
