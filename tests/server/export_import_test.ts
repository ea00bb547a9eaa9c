/**
 * Export and import of policy bundles over HTTP: byte-identical round trips (YAML and JSON), dry run, all or
 * nothing, conflict modes, unknown types, structural attacks (size, document count, depth, aliases, tags,
 * unknown fields) and the binding permission.
 */
import assert from "node:assert/strict";
import type { TestClient } from "../helpers/app.ts";
import { expectStatus } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

const POLICIES: { name: string; type: string; content: unknown; description?: string }[] = [
  {
    name: "Firefox baseline",
    type: "Firefox",
    description: "Telemetry off\nand a home page",
    content: {
      disable_telemetry: true,
      Homepage: { URL: "https://intranet.example", Locked: true },
      additional: { Zeta: { On: "yes" }, Alpha: [1, 2.5, "1.0", null, true] },
    },
  },
  { name: "Thunderbird", type: "Thunderbird", content: { DisableTelemetry: true } },
  {
    name: "Chrome: kiosk",
    type: "Chrome",
    content: { HomepageLocation: "https://a.example", RestoreOnStartup: 1 },
  },
  { name: "Edge", type: "Edge", content: { TrackingPrevention: 3 } },
  {
    name: "Screen lock",
    type: "Dconf",
    content: {
      entries: [
        { schemaId: "org.gnome.desktop.screensaver", key: "lock-delay", value: "uint32 0", lock: true },
        { schema_id: "org.gnome.desktop.session", key: "idle-delay", value: "uint32 300" },
      ],
    },
  },
  {
    name: "Firewall",
    type: "Firewalld",
    content: { zones: [{ name: "public", services: ["ssh"], ports: [{ port: "443", protocol: "tcp" }] }] },
  },
  {
    name: "No USB mounts",
    type: "Polkit",
    content: {
      rules: [{ action_ids: ["org.freedesktop.udisks2.filesystem-mount"], result: "POLKIT_RESULT_NO" }],
    },
  },
  {
    name: "Apps",
    type: "Flatpak",
    content: {
      apps: [{ app_id: "org.mozilla.firefox", remote: "flathub", state: "FLATPAK_APP_STATE_LATEST" }],
    },
  },
  {
    name: "School hours",
    type: "SessionAccess",
    content: {
      rules: [{
        groups: ["kids"],
        effect: "SESSION_ACCESS_EFFECT_DENY",
        windows: [{ start: "22:00", end: "06:00" }],
      }],
    },
  },
  { name: "Encrypt", type: "DiskEncryption", content: { require_encryption: true } },
  { name: "KDE kiosk", type: "Kconfig", content: { action_restrictions: { shell_access: false } } },
];

async function seed(admin: TestClient): Promise<void> {
  const office = await domain.createGroup(admin, "office");
  const lab = await domain.createGroup(admin, "lab");
  const ids: string[] = [];
  for (const p of POLICIES) {
    ids.push((await domain.createPolicy(admin, { ...p, content: JSON.stringify(p.content) })).id);
  }
  await domain.bind(admin, ids[0], office, { priority: 10 });
  await domain.bind(admin, ids[0], lab, { priority: -3 });
  await domain.bind(admin, ids[4], lab);
}

async function exportText(admin: TestClient, query: string): Promise<string> {
  const res = await admin.request("GET", `/api/v1/policies/export?${query}`);
  assert.equal(res.status, 200, res.text);
  return res.text;
}

function importBundle(admin: TestClient, text: string, query = "", contentType = "application/yaml") {
  return admin.raw("POST", `/api/v1/policies/import${query ? `?${query}` : ""}`, { body: text, contentType });
}

async function wipe(admin: TestClient): Promise<void> {
  const list = expectStatus(await admin.request("GET", "/api/v1/policies/all?per_page=200"), 200);
  for (const p of list.items) {
    expectStatus(await admin.request("DELETE", `/api/v1/policies/all/${p.id}`), 204);
  }
}

domain.domainTest(
  "export → import → export is byte-identical, in YAML and JSON",
  async ({ db, admin }, t) => {
    await seed(admin);
    for (const format of ["yaml", "json"]) {
      await t.step(format, async () => {
        const first = await exportText(admin, `include_bindings=true&format=${format}`);
        assert.equal(
          await exportText(admin, `include_bindings=true&format=${format}`),
          first,
          "export is stable",
        );
        await wipe(admin);
        const report = expectStatus(await importBundle(admin, first, "", `application/${format}`), 200);
        assert.equal(report.ok, true);
        assert.equal(report.created, POLICIES.length + 3);
        const second = await exportText(admin, `include_bindings=true&format=${format}`);
        assert.equal(second, first);
      });
    }

    await t.step("the bundle has the envelope, slugs, canonical content and no state", async () => {
      const yaml = await exportText(admin, "include_bindings=true");
      assert.ok(
        yaml.startsWith(
          "apiVersion: svc.dev/v1\nkind: Policy\nmetadata:\n  name: apps\n  displayName: Apps\n",
        ),
      );
      assert.ok(yaml.includes('name: chrome-kiosk\n  displayName: "Chrome: kiosk"'));
      assert.ok(yaml.includes(
        "kind: PolicyBinding\nmetadata:\n  name: firefox-baseline-lab\nspec:\n  policy: firefox-baseline\n  nodeGroup: lab\n  priority: -3",
      ));
      assert.ok(
        !/^ {0,2}(state|version|deprecated):/m.test(yaml),
        "state, version and deprecation are not exported",
      );
      assert.match(
        yaml,
        /schema_id: org.gnome.desktop.screensaver/,
        "snake_case canonical names for non-browser types",
      );
      const imported =
        expectStatus(await admin.request("GET", "/api/v1/policies/all?per_page=200"), 200).items;
      assert.ok(
        imported.every((p: { state: string; version: number }) => p.state === "draft" && p.version === 1),
      );
      const bindings = expectStatus(await admin.request("GET", "/api/v1/policy-bindings"), 200).items;
      assert.ok(
        bindings.every((b: { state: string }) => b.state === "disabled"),
        "imported bindings start disabled",
      );
    });

    await t.step("export of chosen ids, without bindings; audited", async () => {
      const [first] =
        expectStatus(await admin.request("GET", "/api/v1/policies/all?sort=name&per_page=1"), 200).items;
      const res = await admin.request("GET", `/api/v1/policies/export?ids=${first.id}&format=json`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("content-disposition"), 'attachment; filename="apps.json"');
      const docs = JSON.parse(res.text);
      assert.deepEqual(docs.map((d: { kind: string }) => d.kind), ["Policy"]);
      expectStatus(await admin.request("GET", `/api/v1/policies/export?ids=${crypto.randomUUID()}`), 404);
      expectStatus(await admin.request("GET", "/api/v1/policies/export?ids=x;DROP"), 400);
      const audit = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM audit_logs WHERE action = 'policy.export'",
      );
      assert.ok(audit[0].n >= 4);
    });

    await t.step(
      "a policy of an unknown type is exported as stored and never blocks the export or its import",
      async () => {
        /** Two policies of a type this server does not know: JSON content and plain text. Answers the first. */
        const createFuture = async () => {
          const future = await domain.createPolicy(admin, {
            name: "future",
            type: "FutureType",
            content: '{"zeta": {"on": true}, "alpha": [1, "x"]}',
          });
          await domain.createPolicy(admin, {
            name: "future text",
            type: "FutureType",
            content: "not json at all",
          });
          return future;
        };
        const future = await createFuture();
        const groupId = await domain.createGroup(admin, "future-group");
        await domain.bind(admin, future.id, groupId);
        for (const format of ["yaml", "json"]) {
          const first = await exportText(admin, `include_bindings=true&format=${format}`);
          const docs = format === "json" ? JSON.parse(first) : undefined;
          if (docs) {
            const exported = docs.filter((d: { spec: { type?: string } }) => d.spec.type === "FutureType");
            assert.deepEqual(exported.map((d: { spec: { content: unknown } }) => d.spec.content), [
              { zeta: { on: true }, alpha: [1, "x"] },
              "not json at all",
            ]);
          } else {
            assert.match(first, /type: FutureType\n {2}content:\n {4}zeta:\n {6}on: true\n/);
            assert.match(first, /type: FutureType\n {2}content: not json at all\n/);
          }
          // Back into the same server: everything is there already.
          const again = expectStatus(
            await importBundle(admin, first, "on_conflict=skip", `application/${format}`),
            200,
          );
          assert.deepEqual([again.ok, again.errors], [true, 0]);
          // Into an empty server: the known types come back byte-identical; the unknown ones (and their binding)
          // are refused alone, named in the report, and the rest is written.
          await wipe(admin);
          const report = expectStatus(await importBundle(admin, first, "", `application/${format}`), 200);
          assert.equal(report.ok, true);
          assert.equal(report.created, POLICIES.length + 3);
          const refused = report.results.filter((r: { message: string }) =>
            r.message.startsWith("not imported")
          );
          assert.deepEqual(refused.map((r: { name: string }) => r.name), [
            "future",
            "future text",
            "future → future-group",
          ]);
          assert.match(refused[0].message, /policy type "FutureType" is unknown to this server/);
          const knownOnly = await exportText(admin, `include_bindings=true&format=${format}`);
          assert.ok(!knownOnly.includes("FutureType"));
          const recreated = await createFuture();
          await domain.bind(admin, recreated.id, groupId);
          assert.equal(await exportText(admin, `include_bindings=true&format=${format}`), first);
        }
      },
    );
  },
);

domain.domainTest(
  "import: dry run, all or nothing, conflict modes, unknown types, permissions",
  async ({ db, server, admin }, t) => {
    await domain.createGroup(admin, "office");
    const doc = (name: string, content: unknown = { DisableTelemetry: true }, type = "Firefox") =>
      `apiVersion: svc.dev/v1\nkind: Policy\nmetadata:\n  name: ${name}\n  displayName: ${name}\nspec:\n  type: ${type}\n  content: ${
        JSON.stringify(content)
      }\n`;
    const bindingDoc = (policy: string, group = "office") =>
      `apiVersion: svc.dev/v1\nkind: PolicyBinding\nmetadata:\n  name: ${policy}-${group}\nspec:\n  policy: ${policy}\n  nodeGroup: ${group}\n  priority: 5\n`;
    const count = async () => (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM policies"))[0].n;

    await t.step("dry run reports and writes nothing", async () => {
      const report = expectStatus(
        await importBundle(admin, doc("a") + "---\n" + bindingDoc("a"), "dry_run=true"),
        200,
      );
      assert.deepEqual([report.ok, report.dry_run, report.created], [true, true, 2]);
      assert.equal(await count(), 0);
    });

    await t.step("all or nothing: one bad document and nothing is written", async () => {
      const res = expectStatus(
        await importBundle(
          admin,
          doc("good") + "---\n" + doc("bad", { rules: [] }, "Polkit") + "---\n" +
            bindingDoc("good", "nowhere"),
        ),
        422,
      );
      assert.match(res.error.message, /nothing was written/);
      assert.deepEqual(res.error.fields.map((f: { field: string }) => f.field), [
        "documents[1]",
        "documents[2]",
      ]);
      assert.match(res.error.fields[0].message, /spec.content.rules: policy content needs at least one rule/);
      assert.match(res.error.fields[1].message, /node group "nowhere" does not exist/);
      assert.equal(await count(), 0);
    });

    await t.step("unknown types are refused alone; the rest of the bundle is imported", async () => {
      const res = expectStatus(
        await importBundle(admin, doc("x", { a: 1 }, "FutureType") + "---\n" + doc("y")),
        200,
      );
      assert.deepEqual([res.ok, res.created, res.skipped], [true, 1, 1]);
      assert.match(res.results[0].message, /policy type "FutureType" is unknown to this server/);
      assert.deepEqual(
        (await db.query<{ name: string }>("SELECT name FROM policies WHERE name IN ('x', 'y')")).map((r) =>
          r.name
        ),
        ["y"],
      );
      const known = expectStatus(
        await importBundle(admin, doc("z", "text content").replace("Firefox", "Chrome")),
        422,
      );
      assert.match(known.error.message, /spec.content: must be a mapping/);
    });

    await t.step("conflict modes: error, skip, new-version (drafts only, same type)", async () => {
      expectStatus(await importBundle(admin, doc("c") + "---\n" + bindingDoc("c")), 200);
      const clash = expectStatus(await importBundle(admin, doc("c")), 422);
      assert.match(clash.error.message, /already exists; import with on_conflict=skip or new-version/);
      const skip = expectStatus(
        await importBundle(admin, doc("c") + "---\n" + bindingDoc("c"), "on_conflict=skip"),
        200,
      );
      assert.deepEqual([skip.skipped, skip.created], [2, 0]);
      const same = expectStatus(await importBundle(admin, doc("c"), "on_conflict=new-version"), 200);
      assert.equal(same.results[0].message, "already up to date");
      const newer = expectStatus(
        await importBundle(admin, doc("c", { DisableTelemetry: false }), "on_conflict=new-version"),
        200,
      );
      assert.deepEqual([newer.updated, newer.results[0].message], [1, "now version 2"]);
      const retype = expectStatus(
        await importBundle(
          admin,
          doc("c", { entries: [{ schema_id: "org.a.b", key: "k", value: "1" }] }, "Dconf"),
          "on_conflict=new-version",
        ),
        422,
      );
      assert.match(retype.error.message, /types never change/);
      const [c] = expectStatus(await admin.request("GET", "/api/v1/policies/all?name=c"), 200).items;
      await domain.setState(admin, c.id, "released");
      const released = expectStatus(
        await importBundle(admin, doc("c", { DisableTelemetry: true }), "on_conflict=new-version"),
        422,
      );
      assert.match(released.error.message, /existing policy is released; move it to draft first/);
    });

    await t.step("bindings may refer to existing policies by name; they need binding:create", async () => {
      expectStatus(await importBundle(admin, doc("d")), 200);
      const importer = await server.loginAs({ permissions: ["policy:create", "policy:view"] });
      const denied = expectStatus(await importBundle(importer, bindingDoc("d")), 403);
      assert.match(denied.error.message, /binding:create/);
      expectStatus(await importBundle(importer, doc("e")), 200);
      const full = await server.loginAs({ permissions: ["policy:create", "binding:create"] });
      const ok = expectStatus(await importBundle(full, bindingDoc("d")), 200);
      assert.equal(ok.created, 1);
      const viewer = await server.loginAs({ permissions: ["policy:view"] });
      expectStatus(await importBundle(viewer, doc("f")), 403);
    });
  },
);

domain.domainTest(
  "import refuses hostile bundles with a message naming the problem",
  async ({ db, admin }) => {
    const policy = (extra = "", content = "{DisableTelemetry: true}") =>
      `apiVersion: svc.dev/v1\nkind: Policy\nmetadata:\n  name: p\nspec:\n  type: Firefox\n  content: ${content}\n${extra}`;
    const cases: [string, string, RegExp, number?][] = [
      [
        "aliases",
        "apiVersion: svc.dev/v1\nkind: Policy\nmetadata: &m {name: p}\nspec: {type: Firefox, content: *m}\n",
        /anchors are not allowed|aliases are not allowed/,
      ],
      ["billion laughs", "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n", /not allowed/],
      ["tags", policy("", "!!binary aGVsbG8="), /tags .* are not allowed/],
      ["custom tags", policy("", "!foo {a: 1}"), /Unresolved tag|not allowed/],
      ["duplicate keys", policy("kind: Policy\n"), /keys must be unique/],
      ["unknown envelope field", policy("status: released\n"), /documents\[0\].status: is not a known field/],
      ["wrong apiVersion", policy().replace("svc.dev/v1", "bor.dev/v1"), /apiVersion: must be svc.dev\/v1/],
      ["non-mapping document", "- 1\n- 2\n", /must be a mapping/],
      ["non-string keys", policy("", "{1: true}"), /mapping keys must be strings/],
      ["syntax", "a: [1, 2\n", /YAML syntax error/],
      ["bad slug", policy().replace("name: p", "name: ../P"), /metadata.name: must be a slug/],
      [
        "too many documents",
        Array.from({ length: 201 }, () => policy()).join("---\n"),
        /201 documents; the limit is 200/,
      ],
      ["deep YAML", `${policy("", "{a: " + "[".repeat(100) + "]".repeat(100) + "}")}`, /nested too deeply/],
      ["deep JSON", "[" + "[".repeat(100) + "]".repeat(100) + "]", /nested too deeply/],
      ["empty", "", /no documents/],
      ["separator flood", "---\n".repeat(100_000), /more than 200 documents/],
      ["deep after an apostrophe", policy("", "{a: it's " + "[".repeat(100_000) + "}"), /nested too deeply/],
      ["content not a mapping", policy("", "just text"), /spec.content: must be a mapping/],
      [
        "terminal escape in a display name",
        policy().replace("name: p", 'name: p\n  displayName: "Firefox \\e[31mred"'),
        /metadata.displayName: .*control character/,
      ],
      [
        "line separator in a description",
        policy().replace("name: p", 'name: p\n  description: "one\\u2028two"'),
        /metadata.description: /,
      ],
    ];
    for (const [label, text, pattern] of cases) {
      const res = await importBundle(admin, text);
      assert.ok(res.status === 422 || res.status === 400, `${label}: ${res.status} ${res.text}`);
      assert.match(res.json.error.message, pattern, label);
    }
    const big = await importBundle(admin, policy("", `{x: "${"A".repeat(1_100_000)}"}`));
    assert.equal(big.status, 413);
    const count = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM policies");
    assert.equal(count[0].n, 0);
  },
);
