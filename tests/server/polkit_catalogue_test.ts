/**
 * The merged polkit action catalogue over REST: the built-in actions (with implicit defaults) are there before
 * any agent reports; agents' reports (through the same store the gRPC service uses) add actions and node
 * counts; search by id, description and vendor; shared prefixes for rules that name a prefix.
 */
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { ReportPolkitCatalogueRequestSchema } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { storePolkitCatalogue } from "../../server/grpc/catalogues.ts";
import { dbTest } from "../helpers/db.ts";
import { domainServer, expectStatus, seedNode } from "./domain_helpers.ts";

const BASE = "/api/v1/catalogues/polkit";

interface Item {
  action_id: string;
  description: string;
  default_any: string;
  default_inactive: string;
  default_active: string;
  node_count: number;
  builtin: boolean;
}

dbTest("Polkit catalogue: built-in before any report, merged with agents' reports, prefixes", async (db) => {
  const { server, admin } = await domainServer(db);
  try {
    const before = expectStatus(await admin.request("GET", `${BASE}?q=login1.reboot&limit=500`), 200);
    assert.equal(before.nodes_reporting, 0);
    assert.match(before.builtin_source, /polkitd/);
    const reboot = before.items.find((a: Item) => a.action_id === "org.freedesktop.login1.reboot");
    assert.ok(reboot, "built-in login1 reboot action is listed");
    assert.deepEqual([reboot.builtin, reboot.node_count, reboot.default_active], [true, 0, "yes"]);
    assert.ok(before.prefixes.some((p: { prefix: string }) => p.prefix === "org.freedesktop.login1."));

    const a = await seedNode(db, { name: "a" });
    const b = await seedNode(db, { name: "b" });
    const custom = {
      actionId: "org.example.backup.run",
      description: "Run the <nightly> backup",
      vendor: "Example",
      defaultAny: "no",
      defaultInactive: "auth_admin",
      defaultActive: "auth_admin_keep",
    };
    const rebootAction = {
      actionId: "org.freedesktop.login1.reboot",
      description: "Reboot the system",
      defaultAny: "auth_admin_keep",
      defaultInactive: "auth_admin_keep",
      defaultActive: "yes",
    };
    await storePolkitCatalogue(
      db,
      a,
      create(ReportPolkitCatalogueRequestSchema, { actions: [custom, rebootAction] }),
    );
    await storePolkitCatalogue(
      db,
      b,
      create(ReportPolkitCatalogueRequestSchema, { actions: [rebootAction] }),
    );

    const after = expectStatus(await admin.request("GET", `${BASE}?q=org.&limit=500`), 200);
    assert.equal(after.nodes_reporting, 2);
    assert.equal(after.items[0].action_id, "org.freedesktop.login1.reboot", "most widely installed first");
    assert.equal(after.items[0].node_count, 2);
    const mine = after.items.find((i: Item) => i.action_id === "org.example.backup.run");
    assert.deepEqual([mine.builtin, mine.node_count, mine.default_any], [false, 1, "no"]);

    const byText = expectStatus(
      await admin.request("GET", `${BASE}?q=${encodeURIComponent("nightly")}`),
      200,
    );
    assert.deepEqual(byText.items.map((i: Item) => i.action_id), ["org.example.backup.run"]);
    assert.equal(byText.items[0].description, "Run the <nightly> backup", "text is data, never markup");
    const limited = expectStatus(await admin.request("GET", `${BASE}?limit=3`), 200);
    assert.equal(limited.items.length, 3);
    assert.ok(limited.total > 50);
  } finally {
    await server.close();
  }
});
