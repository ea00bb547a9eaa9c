/**
 * The agent repository under /agent/ as the server serves it, over a small repository laid out the way
 * `deno task build` writes one (manifest.json listing packages and index files): content types, HEAD, 405,
 * disabled without packages, traversal and symlink escapes attacked, the download counter (package GETs
 * only, arch normalised), the version check, and the REST route behind node:view. The full build and the
 * real package managers are exercised in tests/e2e/install_test.ts.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, TEST_ORIGIN } from "../helpers/app.ts";
import { buildRoutes } from "../../server/http/routes/mod.ts";
import { agentPackageDownloads } from "../../server/metrics/counters.ts";
import { normaliseArch, repoContentType } from "../../server/http/agent_repo.ts";
import { VERSION } from "../../shared/version.ts";

async function sha256(data: Uint8Array<ArrayBuffer>): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", data));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Writes a repository with one deb and one rpm (x86_64 in the rpm's name) and returns its directory. */
async function fakeRepo(options: { version?: string; packages?: boolean } = {}): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "svc-repo-test-" });
  const files: Record<string, string> = {
    "repo-key.asc": "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n-----END PGP PUBLIC KEY BLOCK-----\n",
    "deb/dists/stable/InRelease": "signed index",
    "deb/dists/stable/main/binary-amd64/Packages": "Package: svc-agent\n",
    "deb/pool/main/s/svc-agent/svc-agent_1_amd64.deb": "deb bytes",
    "rpm/x86_64/svc-agent-1.x86_64.rpm": "rpm bytes",
    "rpm/repodata/repomd.xml": "<repomd/>",
    "apk/svc-agent-1-r1.aarch64.apk": "apk bytes",
  };
  const manifestFiles = [];
  for (const [path, text] of Object.entries(files)) {
    await Deno.mkdir(`${dir}/${path.slice(0, path.lastIndexOf("/") + 1) || "."}`, { recursive: true });
    const data = new TextEncoder().encode(text);
    await Deno.writeFile(`${dir}/${path}`, data);
    manifestFiles.push({ path, sha256: await sha256(data), size: data.length });
  }
  const packages = options.packages === false ? [] : [
    { path: "deb/pool/main/s/svc-agent/svc-agent_1_amd64.deb", format: "deb", arch: "amd64" },
    { path: "rpm/x86_64/svc-agent-1.x86_64.rpm", format: "rpm", arch: "x86_64" },
    { path: "apk/svc-agent-1-r1.aarch64.apk", format: "apk", arch: "aarch64" },
  ];
  await Deno.writeTextFile(
    `${dir}/manifest.json`,
    JSON.stringify({
      version: options.version ?? VERSION,
      signed: true,
      signing_key: { fingerprint: "X", build_local: true, label: "build-local" },
      arches: ["amd64", "arm64"],
      packages,
      files: manifestFiles,
    }),
  );
  return dir;
}

async function downloads(format: string, arch: string): Promise<number> {
  const metric = await agentPackageDownloads.get();
  return metric.values.find((v) => v.labels.format === format && v.labels.arch === arch)?.value ?? 0;
}

function get(server: { fetch(r: Request): Promise<Response> }, path: string, method = "GET") {
  return server.fetch(new Request(`${TEST_ORIGIN}${path}`, { method }));
}

dbTest(
  "agent repository: files with content types, HEAD, 405, instructions page, counter on package GETs",
  async (db) => {
    const dir = await fakeRepo();
    const server = await createTestServer({ db, config: { agentRepo: { dir } } });
    try {
      const page = await get(server, "/agent/");
      assert.equal(page.status, 200);
      assert.match(page.headers.get("content-type")!, /^text\/html/);
      const html = await page.text();
      assert.match(html, /repo-key\.asc/);
      assert.match(html, /Signed-By/);
      assert.match(html, /repo_gpgcheck=1/);

      const cases: Array<[string, string]> = [
        ["/agent/manifest.json", "application/json"],
        ["/agent/repo-key.asc", "application/pgp-keys"],
        ["/agent/deb/dists/stable/InRelease", "text/plain; charset=utf-8"],
        ["/agent/rpm/repodata/repomd.xml", "application/xml"],
        ["/agent/deb/pool/main/s/svc-agent/svc-agent_1_amd64.deb", "application/vnd.debian.binary-package"],
        ["/agent/rpm/x86_64/svc-agent-1.x86_64.rpm", "application/x-rpm"],
      ];
      for (const [path, type] of cases) {
        const res = await get(server, path);
        assert.equal(res.status, 200, path);
        assert.equal(res.headers.get("content-type"), type, path);
        await res.body?.cancel();
      }

      // The counter: package GETs only, arch normalised (x86_64 → amd64, aarch64 → arm64).
      const deb0 = await downloads("deb", "amd64");
      const rpm0 = await downloads("rpm", "amd64");
      const apk0 = await downloads("apk", "arm64");
      const res = await get(server, "/agent/deb/pool/main/s/svc-agent/svc-agent_1_amd64.deb");
      assert.equal(await res.text(), "deb bytes");
      assert.equal(await downloads("deb", "amd64"), deb0 + 1);
      await (await get(server, "/agent/rpm/x86_64/svc-agent-1.x86_64.rpm")).text();
      assert.equal(await downloads("rpm", "amd64"), rpm0 + 1);
      await (await get(server, "/agent/apk/svc-agent-1-r1.aarch64.apk")).text();
      assert.equal(await downloads("apk", "arm64"), apk0 + 1);
      // Index, key and HEAD do not count.
      await (await get(server, "/agent/deb/dists/stable/main/binary-amd64/Packages")).text();
      await (await get(server, "/agent/repo-key.asc")).text();
      const head = await get(server, "/agent/deb/pool/main/s/svc-agent/svc-agent_1_amd64.deb", "HEAD");
      assert.equal(head.status, 200);
      assert.equal(head.headers.get("content-length"), "9");
      assert.equal(await head.text(), "");
      assert.equal(await downloads("deb", "amd64"), deb0 + 1);
      // A missing package file is a 404 and does not count.
      assert.equal((await get(server, "/agent/deb/pool/main/s/svc-agent/svc-agent_2_amd64.deb")).status, 404);
      assert.equal(await downloads("deb", "amd64"), deb0 + 1);

      for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
        const r = await get(server, "/agent/manifest.json", method);
        assert.equal(r.status, 405, method);
        assert.equal(r.headers.get("allow"), "GET, HEAD");
        await r.body?.cancel();
      }
      // ca.crt is served whatever the repository holds.
      const ca = await get(server, "/agent/ca.crt");
      assert.equal(ca.status, 200);
      assert.match(await ca.text(), /BEGIN CERTIFICATE/);
    } finally {
      await server.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
);

dbTest("agent repository: traversal, unlisted files and symlink escapes are refused", async (db) => {
  const dir = await fakeRepo();
  const outside = await Deno.makeTempDir({ prefix: "svc-repo-outside-" });
  await Deno.writeTextFile(`${outside}/secret`, "do not serve");
  // A file the manifest does not list, and a listed name that is a symlink out of the directory.
  await Deno.writeTextFile(`${dir}/deb/unlisted.txt`, "not in the manifest");
  await Deno.remove(`${dir}/rpm/repodata/repomd.xml`);
  await Deno.symlink(`${outside}/secret`, `${dir}/rpm/repodata/repomd.xml`);
  const server = await createTestServer({ db, config: { agentRepo: { dir } } });
  try {
    const attacks = [
      "/agent/../etc/passwd",
      "/agent/%2e%2e/%2e%2e/etc/passwd",
      "/agent/deb/..%2f..%2fmanifest.json",
      "/agent/deb/%2e%2e%2fmanifest.json",
      "/agent/deb/unlisted.txt",
      "/agent/rpm/repodata/repomd.xml",
      "/agent/deb%00/x",
      "/agent//etc/passwd",
      "/agent/%2fetc%2fpasswd",
      "/agent/deb/dists/stable/InRelease%00.txt",
      "/agent/%E0%A4%A",
    ];
    for (const path of attacks) {
      const res = await get(server, path);
      const text = await res.text();
      assert.ok(res.status === 404 || res.status === 400, `${path} answered ${res.status}`);
      assert.doesNotMatch(text, /do not serve|not in the manifest|root:/, path);
    }
  } finally {
    await server.close();
    await Deno.remove(dir, { recursive: true });
    await Deno.remove(outside, { recursive: true });
  }
});

dbTest(
  "agent repository: disabled without packages (404 except ca.crt); API reports state and version",
  async (db) => {
    const missing = await createTestServer({ db, config: { agentRepo: { dir: "/nonexistent/agent-repo" } } });
    const empty = await fakeRepo({ packages: false });
    const noPackages = await createTestServer({ db, config: { agentRepo: { dir: empty } } });
    const other = await fakeRepo({ version: "9.9.9" });
    const mismatched = await createTestServer({
      db,
      config: { agentRepo: { dir: other } },
      routes: (ctx, identity) => buildRoutes(ctx, identity),
    });
    try {
      for (const server of [missing, noPackages]) {
        for (const path of ["/agent/", "/agent", "/agent/manifest.json", "/agent/repo-key.asc"]) {
          const res = await get(server, path);
          assert.equal(res.status, 404, path);
          assert.match((await res.json()).error.message, /disabled/);
        }
        assert.equal((await get(server, "/agent/ca.crt")).status, 200);
      }
      // The REST route: node:view required; a mismatched version is reported.
      assert.equal((await mismatched.anonymous().request("GET", "/api/v1/agent-repo")).status, 401);
      const nobody = await mismatched.loginAs({ permissions: ["policy:view"] });
      assert.equal((await nobody.request("GET", "/api/v1/agent-repo")).status, 403);
      const viewer = await mismatched.loginAs({ permissions: ["node:view"] });
      const status = await viewer.request("GET", "/api/v1/agent-repo");
      assert.equal(status.status, 200);
      assert.equal(status.json.enabled, true);
      assert.equal(status.json.version, "9.9.9");
      assert.equal(status.json.server_version, VERSION);
      assert.equal(status.json.version_mismatch, true);
      assert.deepEqual(
        status.json.packages.map((p: { format: string; arch: string }) => `${p.format}/${p.arch}`).sort(),
        ["apk/arm64", "deb/amd64", "rpm/amd64"],
      );
      assert.ok(mismatched.logs.some((l) => l.includes("agent repository version differs")));
    } finally {
      for (const s of [missing, noPackages, mismatched]) await s.close();
      await Deno.remove(empty, { recursive: true });
      await Deno.remove(other, { recursive: true });
    }
  },
);

Deno.test("agent repository: arch labels and content types", () => {
  assert.equal(normaliseArch("x86_64"), "amd64");
  assert.equal(normaliseArch("aarch64"), "arm64");
  assert.equal(normaliseArch("ppc64el"), "ppc64le");
  assert.equal(normaliseArch("riscv64"), "unknown");
  assert.equal(repoContentType("arch/svc-agent-1-1-x86_64.pkg.tar.zst"), "application/zstd");
  assert.equal(repoContentType("deb/dists/stable/main/binary-amd64/Packages.gz"), "application/gzip");
  assert.equal(repoContentType("deb/dists/stable/Release.gpg"), "application/pgp-signature");
});
