/**
 * The merged GSettings catalogue over REST: the built-in schemas are there before any agent reports; agents'
 * reports (through the same store the gRPC service uses) add schemas and node counts; search by schema id,
 * key name and summary; one schema with its keys; unknown schema 404; policy:view required.
 */
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { ReportSchemaCatalogueRequestSchema } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { storeSchemaCatalogue } from "../../server/grpc/catalogues.ts";
import { dbTest } from "../helpers/db.ts";
import { domainServer, expectStatus, seedNode } from "./domain_helpers.ts";

const BASE = "/api/v1/catalogues/gsettings";

dbTest(
  "GSettings catalogue: built-in before any report, merged with agents' reports and node counts",
  async (db) => {
    const { server, admin } = await domainServer(db);
    try {
      const before = expectStatus(await admin.request("GET", `${BASE}?q=screensaver`), 200);
      assert.equal(before.nodes_reporting, 0);
      assert.match(before.builtin_source, /gsettings-desktop-schemas/);
      const saver = before.items.find((s: { schema_id: string }) =>
        s.schema_id === "org.gnome.desktop.screensaver"
      );
      assert.ok(saver, "built-in screensaver schema is listed");
      assert.equal(saver.builtin, true);
      assert.equal(saver.node_count, 0);

      const bySummary = expectStatus(
        await admin.request("GET", `${BASE}?q=${encodeURIComponent("time before locking")}`),
        200,
      );
      assert.ok(
        bySummary.items.some((s: { matching_keys: { name: string }[] }) =>
          s.matching_keys.some((k) => k.name === "lock-delay")
        ),
      );

      const detail = expectStatus(await admin.request("GET", `${BASE}/org.gnome.desktop.screensaver`), 200);
      const lockDelay = detail.keys.find((k: { name: string }) => k.name === "lock-delay");
      assert.equal(lockDelay.type, "u");
      assert.equal(lockDelay.default_value, "0");
      const bg = expectStatus(await admin.request("GET", `${BASE}/org.gnome.desktop.background`), 200);
      const options = bg.keys.find((k: { name: string }) => k.name === "picture-options");
      assert.ok(options.enum_values.some((e: { nick: string }) => e.nick === "zoom"));

      const a = await seedNode(db, { name: "a" });
      const b = await seedNode(db, { name: "b" });
      const schema = {
        schemaId: "org.example.app",
        path: "/org/example/app/",
        keys: [{ name: "enabled", type: "b", summary: "Turn it on", defaultValue: "false" }],
      };
      const screensaver = {
        schemaId: "org.gnome.desktop.screensaver",
        path: "/org/gnome/desktop/screensaver/",
        keys: [{ name: "lock-delay", type: "u", summary: "Time before locking", defaultValue: "uint32 0" }],
      };
      await storeSchemaCatalogue(
        db,
        a,
        create(ReportSchemaCatalogueRequestSchema, { schemas: [schema, screensaver] }),
      );
      await storeSchemaCatalogue(
        db,
        b,
        create(ReportSchemaCatalogueRequestSchema, { schemas: [screensaver] }),
      );

      const after = expectStatus(await admin.request("GET", `${BASE}?q=org.`), 200);
      assert.equal(after.nodes_reporting, 2);
      assert.equal(after.items[0].schema_id, "org.gnome.desktop.screensaver", "most widely installed first");
      assert.equal(after.items[0].node_count, 2);
      const app = after.items.find((s: { schema_id: string }) => s.schema_id === "org.example.app");
      assert.deepEqual([app.node_count, app.builtin, app.key_count], [1, false, 1]);

      const missing = await admin.request("GET", `${BASE}/org.example.none`);
      assert.equal(missing.status, 404);
      assert.match(missing.text, /org\.example\.none is not in the catalogue/);
      const limited = expectStatus(await admin.request("GET", `${BASE}?limit=3`), 200);
      assert.equal(limited.items.length, 3);
      assert.ok(limited.total > 40);
    } finally {
      await server.close();
    }
  },
);
