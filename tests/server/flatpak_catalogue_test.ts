/**
 * The Flatpak catalogue over REST against a real signed repository built with the Flatpak tools and
 * served on 127.0.0.1 (tests/helpers/flatpak_repo.ts): the server reads the AppStream branch out of the
 * OSTree repository itself (refs, commit, dirtree and file objects), indexes it, reports an identical
 * refresh as unchanged and a new publication as ok, accepts a .flatpakrepo file and an air-gapped
 * upload, and counts every attempt. The outbound fetch is attacked: private and loopback targets are
 * refused unless the configuration allows them, non-http schemes never fetched, oversized answers cut.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer } from "../helpers/app.ts";
import { domainRoutes } from "../../server/http/routes/mod.ts";
import { expectStatus } from "./domain_helpers.ts";
import { buildFlatpakRepo, flatpakToolsMissing } from "../helpers/flatpak_repo.ts";
import { flatpakCatalogRefresh } from "../../server/metrics/counters.ts";
import { collectDatabaseFamilies } from "../../server/metrics/collector.ts";
import { isPrivateAddress, resolvePublic, safeFetch } from "../../server/flatpak/safe_fetch.ts";
import { readAppstream } from "../../server/flatpak/appstream.ts";
import { resolveRef } from "../../server/flatpak/ostree.ts";

const missing = await flatpakToolsMissing();
if (missing) console.warn(`Flatpak catalogue repository test skipped: ${missing}`);

async function refreshCount(repo: string, outcome: string): Promise<number> {
  const metric = await flatpakCatalogRefresh.get();
  return metric.values.find((v) => v.labels.repo === repo && v.labels.outcome === outcome)?.value ?? 0;
}

dbTest(
  "Flatpak catalogue: index a real repository's AppStream, refresh, .flatpakrepo, upload, metrics",
  async (db) => {
    const repo = await buildFlatpakRepo();
    const server = await createTestServer({
      db,
      routes: (ctx) => domainRoutes(ctx),
      config: { flatpak: { catalogAllowPrivateTargets: true } },
    });
    try {
      const admin = await server.loginAs({ superAdmin: true });
      const created = expectStatus(
        await admin.request("POST", "/api/v1/flatpak/repos", {
          name: "svctest",
          url: repo.url,
          title: "Test",
        }),
        201,
      );
      assert.equal(created.source, "url");
      assert.equal(created.last_success_at, null);
      const okBefore = await refreshCount("svctest", "ok");
      const first = expectStatus(
        await admin.request("POST", `/api/v1/flatpak/repos/${created.id}/refresh`),
        200,
      );
      assert.equal(first.outcome, "ok", JSON.stringify(first));
      assert.equal(first.repo.app_count, 1);
      assert.ok(first.repo.last_success_at);
      assert.equal(await refreshCount("svctest", "ok"), okBefore + 1);

      const hits = expectStatus(await admin.request("GET", "/api/v1/flatpak/apps?q=hello"), 200).items;
      assert.deepEqual(hits, [{
        app_id: "org.svc.Hello",
        name: "Hello svc",
        summary: "Prints a greeting for the svc tests",
        icon_url: "",
        versions: ["1.0"],
        repo: "svctest",
      }]);
      assert.deepEqual(
        expectStatus(await admin.request("GET", "/api/v1/flatpak/apps?q=nothing-like-it"), 200).items,
        [],
      );

      const unchangedBefore = await refreshCount("svctest", "unchanged");
      const again = expectStatus(
        await admin.request("POST", `/api/v1/flatpak/repos/${created.id}/refresh`),
        200,
      );
      assert.equal(again.outcome, "unchanged");
      assert.equal(await refreshCount("svctest", "unchanged"), unchangedBefore + 1);

      // Without loose refs the ref comes from the repository's summary (GVariant), to the same commit.
      const limits = { allowPrivate: true, maxBytes: 1 << 24, timeoutMs: 30_000 };
      const get = (path: string) => safeFetch(`${repo.url}${path}`, limits);
      const fromSummary = await resolveRef(
        (path) => path.startsWith("refs/") ? Promise.resolve(undefined) : get(path),
        "appstream2/x86_64",
      );
      assert.equal(fromSummary, await resolveRef(get, "appstream2/x86_64"));
      assert.equal(fromSummary, await repo.commitOf("appstream2/x86_64"));
      await repo.publish(2);
      const newer = expectStatus(
        await admin.request("POST", `/api/v1/flatpak/repos/${created.id}/refresh`),
        200,
      );
      assert.equal(newer.outcome, "ok");
      const v2 = expectStatus(await admin.request("GET", "/api/v1/flatpak/apps?q=org.svc"), 200).items;
      assert.deepEqual(v2[0].versions, ["2.0"]);

      // A .flatpakrepo file: URL, key and title come from it.
      const fromFile = expectStatus(
        await admin.request("POST", "/api/v1/flatpak/repos", {
          name: "from-file",
          flatpakrepo: `[Flatpak Repo]\nTitle=From a file\nUrl=${repo.url}\nGPGKey=${repo.gpgKeyBase64}\n`,
        }),
        201,
      );
      assert.equal(fromFile.url, repo.url);
      assert.equal(fromFile.title, "From a file");
      assert.equal(fromFile.gpg_key, repo.gpgKeyBase64);

      // Air-gapped: an upload repository filled with the AppStream file.
      const airgap = expectStatus(
        await admin.request("POST", "/api/v1/flatpak/repos", { name: "airgap", upload: true }),
        201,
      );
      const xml = `<?xml version="1.0"?><components version="0.8">
      <component type="desktop-application"><id>org.example.Editor</id><name>Editor</name>
      <name xml:lang="de">Bearbeiter</name><summary>Edits &amp; saves</summary>
      <icon type="remote" width="64" height="64">https://icons.example.org/editor.png</icon>
      <releases><release version="3.1"/><release version="3.0"/></releases></component>
      <component type="addon"><id>org.example.Editor.Plugin</id><name>Plugin</name></component>
    </components>`;
      const gz = new Uint8Array(
        await new Response(new Blob([xml]).stream().pipeThrough(new CompressionStream("gzip"))).arrayBuffer(),
      );
      const uploadsBefore = await refreshCount("airgap", "upload");
      const uploaded = await admin.raw("POST", `/api/v1/flatpak/repos/${airgap.id}/appstream`, {
        body: gz,
        contentType: "application/gzip",
      });
      assert.equal(uploaded.status, 200, uploaded.text);
      assert.equal(uploaded.json.app_count, 1, "addons are not applications");
      assert.equal(await refreshCount("airgap", "upload"), uploadsBefore + 1);
      const editor = expectStatus(await admin.request("GET", "/api/v1/flatpak/apps?q=editor"), 200).items[0];
      assert.deepEqual(editor, {
        app_id: "org.example.Editor",
        name: "Editor",
        summary: "Edits & saves",
        icon_url: "https://icons.example.org/editor.png",
        versions: ["3.1", "3.0"],
        repo: "airgap",
      });
      expectStatus(await admin.request("POST", `/api/v1/flatpak/repos/${airgap.id}/refresh`), 409);

      const families = await collectDatabaseFamilies(db, server.ctx.log);
      const apps = families.find((f) => f.name === "svc_flatpak_catalog_apps_total")!;
      assert.deepEqual(
        Object.fromEntries(apps.samples.map((s) => [s.labels.repo, s.value])),
        { "airgap": 1, "from-file": 0, "svctest": 1 },
      );
      const last = families.find((f) => f.name === "svc_flatpak_catalog_last_success_timestamp")!;
      assert.equal(last.samples.find((s) => s.labels.repo === "from-file")!.value, 0);
      assert.ok(last.samples.find((s) => s.labels.repo === "svctest")!.value > 1_700_000_000);

      const list = expectStatus(await admin.request("GET", "/api/v1/flatpak/repos"), 200).items;
      assert.deepEqual(list.map((r: { name: string }) => r.name), ["airgap", "from-file", "svctest"]);
      expectStatus(await admin.request("DELETE", `/api/v1/flatpak/repos/${airgap.id}`), 204);
      assert.deepEqual(
        expectStatus(await admin.request("GET", "/api/v1/flatpak/apps?q=editor"), 200).items,
        [],
      );
    } finally {
      await server.close();
      await repo.close();
    }
  },
  { ignore: missing !== undefined },
);

dbTest(
  "Flatpak catalogue: loopback and private targets refused by default, schemes and sizes limited",
  async (db) => {
    const target = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      () => new Response("x".repeat(5000)),
    );
    const server = await createTestServer({
      db,
      routes: (ctx) => domainRoutes(ctx),
    });
    try {
      const admin = await server.loginAs({ superAdmin: true });
      const url = `http://127.0.0.1:${target.addr.port}/appstream.xml`;
      const repo = expectStatus(
        await admin.request("POST", "/api/v1/flatpak/repos", { name: "internal", url }),
        201,
      );
      const errorsBefore = await refreshCount("internal", "error");
      const refused = expectStatus(
        await admin.request("POST", `/api/v1/flatpak/repos/${repo.id}/refresh`),
        200,
      );
      assert.equal(refused.outcome, "error");
      assert.match(refused.error, /resolves to 127\.0\.0\.1, a private or loopback address/);
      assert.match(refused.repo.last_error, /flatpak\.catalog_allow_private_targets/);
      assert.equal(await refreshCount("internal", "error"), errorsBefore + 1);

      for (const bad of ["file:///etc/passwd", "ftp://example.org/repo", "gopher://127.0.0.1/"]) {
        expectStatus(await admin.request("POST", "/api/v1/flatpak/repos", { name: "bad", url: bad }), 400);
      }
      const metadata = expectStatus(
        await admin.request("POST", "/api/v1/flatpak/repos", {
          name: "meta",
          url: "http://169.254.169.254/latest/",
        }),
        201,
      );
      const cloud = expectStatus(
        await admin.request("POST", `/api/v1/flatpak/repos/${metadata.id}/refresh`),
        200,
      );
      assert.match(cloud.error, /169\.254\.169\.254, a private or loopback address/);
      const fileRepo = expectStatus(
        await admin.request("POST", "/api/v1/flatpak/repos", {
          name: "redirector",
          url: `http://127.0.0.1:${target.addr.port}/x.flatpakrepo`,
        }),
        400,
      );
      assert.match(fileRepo.error.message, /private or loopback/);

      // Allowed loopback, but the answer is larger than the limit.
      const limits = { allowPrivate: true, maxBytes: 1000, timeoutMs: 10_000 };
      await assert.rejects(safeFetch(url, limits), /larger than 1000 bytes/);
      assert.equal((await safeFetch(url, { ...limits, maxBytes: 10_000 }))!.length, 5000);
      await assert.rejects(safeFetch("file:///etc/passwd", limits), /only http and https/);
      await assert.rejects(safeFetch("http://user:pw@127.0.0.1:1/", limits), /credentials are refused/);
      await assert.rejects(resolvePublic("127.0.0.1", false), /private or loopback/);

      for (
        const address of [
          "127.0.0.1",
          "10.1.2.3",
          "172.20.0.1",
          "192.168.1.1",
          "169.254.169.254",
          "100.64.0.1",
          "0.0.0.0",
          "::1",
          "::",
          "fe80::1",
          "fd00::1",
          "::ffff:127.0.0.1",
          "::ffff:7f00:1",
          "224.0.0.1",
          "ff02::1",
        ]
      ) {
        assert.equal(isPrivateAddress(address), true, address);
      }
      for (const address of ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]) {
        assert.equal(isPrivateAddress(address), false, address);
      }
    } finally {
      await server.close();
      await target.shutdown();
    }
  },
);

Deno.test("AppStream parsing ignores entity definitions and refuses documents that are not catalogues", async () => {
  const parse = async (xml: string) =>
    (await readAppstream(new TextEncoder().encode(xml), { maxBytes: 1 << 20 })).apps;
  const bomb = `<?xml version="1.0"?><!DOCTYPE c [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>
    <components><component type="desktop-application"><id>org.example.Bomb</id><name>&b;</name></component></components>`;
  const [app] = await parse(bomb);
  assert.equal(app.name, "&b;", "undefined entities stay literal text");
  await assert.rejects(parse("<html></html>"), /not an AppStream catalogue/);
  assert.deepEqual(
    await parse(`<components><component><id>not-an-id</id></component></components>`),
    [],
    "ids that are not application ids are skipped",
  );
});

dbTest("Flatpak repository URLs with credentials are refused, and older ones are never shown", async (db) => {
  const server = await createTestServer({ db, routes: (ctx) => domainRoutes(ctx) });
  try {
    const admin = await server.loginAs({ superAdmin: true });
    const secret = "s3cret-pass";
    const byUrl = expectStatus(
      await admin.request("POST", "/api/v1/flatpak/repos", {
        name: "private",
        url: `https://robot:${secret}@flatpak.example.org/repo/`,
      }),
      400,
    );
    assert.equal(byUrl.error.fields?.[0]?.field, "url", JSON.stringify(byUrl));
    assert.match(byUrl.error.message, /^url: .*credentials \(user:password@\): remove them/);
    const byFile = expectStatus(
      await admin.request("POST", "/api/v1/flatpak/repos", {
        name: "private",
        flatpakrepo: `[Flatpak Repo]\nTitle=Private\nUrl=https://robot:${secret}@flatpak.example.org/repo/\n`,
      }),
      400,
    );
    assert.equal(byFile.error.fields?.[0]?.field, "flatpakrepo", JSON.stringify(byFile));
    assert.match(byFile.error.message, /credentials/);
    assert.equal((await db.query("SELECT 1 FROM flatpak_repos")).length, 0, "nothing was stored");
    const audit = JSON.stringify(await db.query("SELECT details FROM audit_logs"));
    assert.ok(audit.includes("flatpak.example.org"), "the refusals are audited");
    assert.ok(!audit.includes(secret), "without the password");

    // A record stored before the refusal existed is shown without its credentials.
    await db.query(
      `INSERT INTO flatpak_repos (name, title, source, url, gpg_key, arch, last_error)
       VALUES ('legacy', '', 'url', $1, '', 'x86_64', $2)`,
      [
        `https://robot:${secret}@flatpak.example.org/legacy/`,
        `https://robot:${secret}@flatpak.example.org: URLs with credentials are refused`,
      ],
    );
    const listed = expectStatus(await admin.request("GET", "/api/v1/flatpak/repos"), 200);
    assert.equal(listed.items[0].url, "https://flatpak.example.org/legacy/");
    const one = await admin.request("GET", `/api/v1/flatpak/repos/${listed.items[0].id}`);
    for (const text of [JSON.stringify(listed), one.text]) assert.ok(!text.includes(secret), text);
  } finally {
    await server.close();
  }
});
