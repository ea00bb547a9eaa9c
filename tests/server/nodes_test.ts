/**
 * Nodes over HTTP: list filters, sort and pagination; the detail view; revocation and deletion put every
 * serial on the revoked list and close the stream (revocation takes the node offline at once, deletion takes
 * its stream rows with it); the metadata request needs a connected agent.
 */
import assert from "node:assert/strict";
import type { Db } from "../../server/db/db.ts";
import { HUB_CHANNEL, type HubNotice } from "../../server/events/hub_notice.ts";
import { expectStatus } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

/** Collects hub notices delivered (i.e. committed) while `fn` runs. */
async function notices(db: Db, fn: () => Promise<void>): Promise<HubNotice[]> {
  const got: HubNotice[] = [];
  const stop = await db.listen(HUB_CHANNEL, (payload) => got.push(JSON.parse(payload)));
  try {
    await fn();
    for (let i = 0; i < 50 && got.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 30));
  } finally {
    await stop();
  }
  return got;
}

domain.domainTest("node list: filters, search, sort allow-list and pagination", async ({ db, admin }, t) => {
  const lab = await domain.createGroup(admin, "lab");
  await domain.seedNode(db, {
    name: "alpha",
    status: "online",
    os: "Debian",
    agentVersion: "1.2.0",
    desktops: ["GNOME"],
    groups: [lab],
  });
  await domain.seedNode(db, {
    name: "beta",
    status: "offline",
    os: "Fedora",
    agentVersion: "1.1.0",
    desktops: ["KDE"],
    fqdn: "beta.corp.example",
  });
  await domain.seedNode(db, {
    name: "gamma_1",
    status: "online",
    os: "Debian",
    agentVersion: "1.2.0",
    groups: [lab],
  });
  const names = async (query: string) =>
    expectStatus(await admin.request("GET", `/api/v1/nodes?${query}`), 200).items.map((
      n: { name: string },
    ) => n.name);

  await t.step("filters", async () => {
    assert.deepEqual(await names("status=online"), ["alpha", "gamma_1"]);
    assert.deepEqual(await names(`group=${lab}`), ["alpha", "gamma_1"]);
    assert.deepEqual(await names("group=none"), ["beta"]);
    assert.deepEqual(await names("os=Debian&agent_version=1.2.0"), ["alpha", "gamma_1"]);
    assert.deepEqual(await names("desktop=KDE"), ["beta"]);
    assert.deepEqual(await names("search=CORP.example"), ["beta"]);
    assert.deepEqual(await names("search=_"), ["gamma_1"], "_ is matched literally");
    assert.deepEqual(await names("search=ta.CORP"), ["beta"], "within the FQDN");
    const spanning = await admin.request("GET", "/api/v1/nodes?search=a%1Fbeta");
    assert.equal(
      spanning.status,
      400,
      "a control character in a search is refused, so no match spans fields",
    );
    assert.match(JSON.stringify(spanning.json), /search/);
    assert.deepEqual(await names("search=abeta.corp"), [], "nor joins them");
  });

  await t.step("sort and pagination", async () => {
    assert.deepEqual(await names("sort=agent_version&order=asc"), ["beta", "alpha", "gamma_1"]);
    const page = expectStatus(
      await admin.request("GET", "/api/v1/nodes?sort=name&order=desc&per_page=2&page=2"),
      200,
    );
    assert.deepEqual([page.total, page.page, page.per_page, page.items.length], [3, 2, 2, 1]);
    assert.equal(page.items[0].name, "alpha");
    assert.deepEqual(page.items[0].groups, [{ id: lab, name: "lab" }]);
    for (
      const bad of [
        "status=gone",
        "group=lab",
        "sort=machine_id",
        "per_page=0",
        "search=" + "x".repeat(201),
      ]
    ) {
      expectStatus(await admin.request("GET", `/api/v1/nodes?${bad}`), 400);
    }
  });

  await t.step("filter options", async () => {
    const options = expectStatus(await admin.request("GET", "/api/v1/nodes/filter-options"), 200);
    assert.deepEqual(options, {
      os: ["Debian", "Fedora"],
      agent_versions: ["1.1.0", "1.2.0"],
      desktops: ["GNOME", "KDE"],
    });
  });
});

domain.domainTest(
  "node detail, notes, revoke, delete and metadata request",
  async ({ db, server, admin }, t) => {
    const group = await domain.createGroup(admin, "fleet");
    const node = await domain.seedNode(db, { name: "desk-7", groups: [group], serials: ["0a1b", "0c2d"] });

    await t.step(
      "read shows groups, certificate, connection and a compliance summary of what reaches it",
      async () => {
        const policy = await domain.createPolicy(admin, { name: "p" });
        await domain.setState(admin, policy.id, "released");
        await domain.bind(admin, policy.id, group, { enabled: true });
        const unbound = await domain.createPolicy(admin, { name: "stale" });
        await domain.report(db, node, policy.id, "non_compliant");
        await domain.report(db, node, unbound.id, "compliant");
        const detail = expectStatus(await admin.request("GET", `/api/v1/nodes/${node}`), 200);
        assert.equal(detail.name, "desk-7");
        assert.deepEqual(detail.groups, [{ id: group, name: "fleet" }]);
        assert.equal(detail.cert_serial, "0c2d");
        assert.equal(detail.cert_revoked, false);
        assert.equal(detail.connected, false);
        assert.deepEqual(detail.compliance, {
          compliant: 0,
          non_compliant: 1,
          inapplicable: 0,
          error: 0,
          unknown: 0,
          total: 1,
        });
      },
    );

    await t.step("notes can be edited; the name cannot", async () => {
      const updated = expectStatus(
        await admin.request("PUT", `/api/v1/nodes/${node}`, { notes: "room 7" }),
        200,
      );
      assert.equal(updated.notes, "room 7");
      const rename = expectStatus(
        await admin.request("PUT", `/api/v1/nodes/${node}`, { notes: "", name: "x" }),
        400,
      );
      assert.equal(rename.error.fields[0].field, "name");
    });

    await t.step(
      "metadata request: 409 while not connected, 202 and a METADATA_REQUEST command when connected",
      async () => {
        const refused = expectStatus(
          await admin.request("POST", `/api/v1/nodes/${node}/metadata-request`),
          409,
        );
        assert.match(refused.error.message, /^agent not connected/);
        await db.query("INSERT INTO server_replicas (id) VALUES ('replica-a')");
        await db.query("INSERT INTO node_streams (node_id, replica_id) VALUES ($1, 'replica-a')", [node]);
        const got = await notices(db, async () => {
          expectStatus(await admin.request("POST", `/api/v1/nodes/${node}/metadata-request`), 202);
        });
        assert.deepEqual(got, [{ kind: "node_command", nodeId: node, command: "metadata_request" }]);
        assert.equal(expectStatus(await admin.request("GET", `/api/v1/nodes/${node}`), 200).connected, true);
      },
    );

    await t.step("revoke puts every serial on the revoked list and disconnects the stream", async () => {
      await db.query("UPDATE nodes SET status = 'online', status_reason = '' WHERE id = $1", [node]);
      const got = await notices(db, async () => {
        const res = expectStatus(
          await admin.request("POST", `/api/v1/nodes/${node}/revoke`, { reason: "stolen" }),
          200,
        );
        assert.deepEqual(res.revoked_serials, ["0a1b", "0c2d"]);
      });
      assert.deepEqual(got, [{ kind: "node_command", nodeId: node, command: "disconnect" }]);
      const rows = await db.query<{ serial: string; reason: string }>(
        "SELECT serial, reason FROM revoked_certificates ORDER BY serial",
      );
      assert.deepEqual(rows, [{ serial: "0a1b", reason: "stolen" }, { serial: "0c2d", reason: "stolen" }]);
      const detail = expectStatus(await admin.request("GET", `/api/v1/nodes/${node}`), 200);
      assert.equal(detail.cert_revoked, true);
      // Offline in the same transaction, whatever becomes of the stream (its replica may be gone).
      assert.deepEqual(
        [detail.status, detail.status_reason, detail.connected],
        ["offline", "certificate revoked", false],
      );
      assert.equal((await db.query("SELECT 1 FROM node_streams WHERE node_id = $1", [node])).length, 0);
      const again = expectStatus(await admin.request("POST", `/api/v1/nodes/${node}/revoke`, {}), 200);
      assert.deepEqual(again.revoked_serials, [], "already revoked serials are not revoked twice");
    });

    await t.step("revoke needs node:revoke and a certificate", async () => {
      const editor = await server.loginAs({ permissions: ["node:view", "node:edit"] });
      expectStatus(await editor.request("POST", `/api/v1/nodes/${node}/revoke`, {}), 403);
      const bare = await domain.seedNode(db, { name: "no-cert" });
      assert.match(
        expectStatus(await admin.request("POST", `/api/v1/nodes/${bare}/revoke`, {}), 409).error.message,
        /no certificate/,
      );
    });

    await t.step(
      "delete revokes every serial first, disconnects, and the revocations outlive the node",
      async () => {
        const other = await domain.seedNode(db, {
          name: "desk-8",
          status: "online",
          groups: [group],
          serials: ["beef", "cafe"],
        });
        await db.query("INSERT INTO node_streams (node_id, replica_id) VALUES ($1, 'replica-a')", [other]);
        const got = await notices(db, async () => {
          expectStatus(await admin.request("DELETE", `/api/v1/nodes/${other}`), 204);
        });
        assert.deepEqual(got, [{ kind: "node_command", nodeId: other, command: "disconnect" }]);
        const rows = await db.query<{ serial: string; node_id: string | null; reason: string }>(
          "SELECT serial, node_id, reason FROM revoked_certificates WHERE serial IN ('beef', 'cafe') ORDER BY serial",
        );
        assert.deepEqual(rows, [
          { serial: "beef", node_id: null, reason: "node deleted" },
          { serial: "cafe", node_id: null, reason: "node deleted" },
        ]);
        expectStatus(await admin.request("GET", `/api/v1/nodes/${other}`), 404);
        assert.equal((await db.query("SELECT 1 FROM node_streams WHERE node_id = $1", [other])).length, 0);
        expectStatus(await admin.request("DELETE", `/api/v1/nodes/${other}`), 404);
        const audit = await db.query<{ resource_name: string }>(
          "SELECT resource_name FROM audit_logs WHERE resource_type = 'node' AND action = 'delete' AND outcome = 'success'",
        );
        assert.deepEqual(audit, [{ resource_name: "desk-8" }]);
      },
    );
  },
);
