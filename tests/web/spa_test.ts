/**
 * The embedded web UI as the server serves it (`spaHandler` over the committed `spa_assets.gen.ts`), and the
 * build pipeline's staleness check that CI runs.
 */
import assert from "node:assert/strict";
import { brotliDecompressSync } from "node:zlib";
import { chooseEncoding, spaHandler } from "../../server/http/spa.ts";
import { SPA_ASSETS } from "../../server/http/spa_assets.gen.ts";
import { build } from "../../web/build.ts";

const handler = spaHandler();
const get = (path: string, headers: Record<string, string> = {}, method = "GET") =>
  handler(new Request(`https://svc.test${path}`, { method, headers }));

function scriptPath(): string {
  const html = SPA_ASSETS["/index.html"].body;
  const src = /<script type="module" src="([^"]+)"><\/script>/.exec(html)?.[1];
  assert.ok(src, "index.html loads the bundle");
  return src;
}

Deno.test("every client route and any other deep link gets the index document, never cached stale", async () => {
  for (
    const path of ["/", "/policies", "/policies/new", "/policies/3f0e/edit", "/nodes?node=x", "/no/such/page"]
  ) {
    const res = get(path);
    assert.equal(res.status, 200, path);
    assert.equal(res.headers.get("content-type"), "text/html; charset=utf-8");
    assert.equal(res.headers.get("cache-control"), "no-cache");
    assert.match(await res.text(), /<svc-app>/);
  }
});

Deno.test("the index document has no inline script or event handler (the CSP allows only 'self')", () => {
  const html = SPA_ASSETS["/index.html"].body;
  for (const m of html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)) {
    assert.match(m[1], /\bsrc="\/assets\//, "every script is a file of the bundle");
    assert.equal(m[2].trim(), "", "no inline code");
  }
  assert.doesNotMatch(html, /\son[a-z]+=/i, "no inline event handlers");
});

Deno.test("the content-hashed bundle is served as JavaScript and cached forever", async () => {
  const res = get(scriptPath());
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "text/javascript; charset=utf-8");
  assert.equal(res.headers.get("cache-control"), "public, max-age=31536000, immutable");
  assert.equal(await res.text(), SPA_ASSETS[scriptPath()].body);
});

Deno.test("the console is split by route: the entry is the shell, each page a chunk loaded on demand", () => {
  const scripts = Object.entries(SPA_ASSETS).filter(([path]) => path.endsWith(".js"));
  const entry = SPA_ASSETS[scriptPath()].body;
  const total = scripts.reduce((n, [, a]) => n + a.body.length, 0);
  assert.ok(entry.length < total / 2, `the entry is ${entry.length} of ${total} bytes of script`);
  const pages = [
    "dashboard",
    "policies",
    "policy_editor",
    "nodes",
    "node_groups",
    "policy_bindings",
    "compliance",
    "disk_encryption",
    "audit_logs",
    "settings",
  ];
  for (const page of pages) {
    const chunk = scripts.find(([path]) => path.startsWith(`/assets/${page}-`));
    assert.ok(chunk, `${page} is a chunk of its own`);
    assert.ok(chunk[1].immutable, `${chunk[0]} is content-hashed and cached forever`);
    assert.ok(
      entry.includes(`import("./${chunk[0].slice("/assets/".length)}")`),
      `the shell loads ${page} lazily`,
    );
  }
  // Every module a script imports is served.
  for (const [path, asset] of scripts) {
    for (const m of asset.body.matchAll(/(?:\bfrom\s*|\bimport\(\s*)"\.\/([^"]+)"/g)) {
      assert.ok(SPA_ASSETS[`/assets/${m[1]}`], `${path} imports ./${m[1]}, which is served`);
    }
  }
});

Deno.test("Shoelace's icons, including its system icons, are served locally", async () => {
  for (
    const path of ["/assets/icons/system/x-lg.svg", "/assets/icons/system/eye.svg", "/assets/icons/gear.svg"]
  ) {
    const res = get(path);
    assert.equal(res.status, 200, path);
    assert.equal(res.headers.get("content-type"), "image/svg+xml");
    assert.match(await res.text(), /^<svg\b/);
  }
});

Deno.test("a missing asset is a 404, not the index document", async () => {
  const res = get("/assets/app-0000000000000000.js");
  assert.equal(res.status, 404);
  assert.match(await res.text(), /no asset at \/assets\/app-0000000000000000\.js/);
});

Deno.test("ETags revalidate, separately for each compressed representation", async () => {
  const first = get("/policies");
  const etag = first.headers.get("etag")!;
  await first.body?.cancel();
  assert.match(etag, /^"[0-9a-f]{32}"$/);
  const again = get("/nodes", { "if-none-match": etag });
  assert.equal(again.status, 304);
  assert.equal(again.body, null);
  const zipped = get("/", { "accept-encoding": "gzip, deflate" });
  assert.equal(zipped.headers.get("content-encoding"), "gzip");
  assert.equal(zipped.headers.get("vary"), "Accept-Encoding");
  const gzEtag = zipped.headers.get("etag")!;
  assert.notEqual(gzEtag, etag);
  const text = await new Response(zipped.body!.pipeThrough(new DecompressionStream("gzip"))).text();
  assert.equal(text, SPA_ASSETS["/index.html"].body);
  assert.equal(
    get("/", { "accept-encoding": "gzip", "if-none-match": etag }).status,
    200,
    "identity tag ≠ gzip tag",
  );
  assert.equal(get("/", { "accept-encoding": "gzip", "if-none-match": `W/${gzEtag}` }).status, 304);
  const refused = get("/", { "accept-encoding": "gzip;q=0" });
  assert.equal(refused.headers.get("content-encoding"), null);
  await refused.body?.cancel();
});

Deno.test("brotli is served to browsers that take it, smaller than gzip, with its own ETag", async () => {
  const path = scriptPath();
  const br = get(path, { "accept-encoding": "gzip, deflate, br, zstd" });
  assert.equal(br.headers.get("content-encoding"), "br");
  assert.equal(br.headers.get("vary"), "Accept-Encoding");
  assert.match(br.headers.get("etag")!, /-br"$/);
  const bytes = new Uint8Array(await br.arrayBuffer());
  assert.equal(Number(br.headers.get("content-length")), bytes.length);
  assert.equal(new TextDecoder().decode(brotliDecompressSync(bytes)), SPA_ASSETS[path].body);
  const gz = get(path, { "accept-encoding": "gzip" });
  assert.equal(gz.headers.get("content-encoding"), "gzip");
  const gzBytes = new Uint8Array(await gz.arrayBuffer());
  assert.ok(bytes.length < gzBytes.length, `brotli ${bytes.length} B < gzip ${gzBytes.length} B`);
  assert.equal(get(path, { "accept-encoding": "br", "if-none-match": br.headers.get("etag")! }).status, 304);
});

Deno.test("Accept-Encoding negotiation follows q-values", () => {
  assert.equal(chooseEncoding(null), undefined);
  assert.equal(chooseEncoding("identity"), undefined);
  assert.equal(chooseEncoding("gzip, deflate, br"), "br");
  assert.equal(chooseEncoding("br;q=0.5, gzip"), "gzip");
  assert.equal(chooseEncoding("gzip;q=0.8, br;q=0.8"), "br");
  assert.equal(chooseEncoding("br;q=0, gzip"), "gzip");
  assert.equal(chooseEncoding("br;q=0, gzip;q=0"), undefined);
  assert.equal(chooseEncoding("*"), "br");
  assert.equal(chooseEncoding("*;q=0, gzip"), "gzip");
  assert.equal(chooseEncoding("BR ; Q=1"), "br");
  assert.equal(chooseEncoding("br;q=nonsense, gzip"), "gzip");
});

Deno.test("HEAD carries the headers without a body; other methods are refused", async () => {
  const head = get("/compliance", {}, "HEAD");
  assert.equal(head.status, 200);
  assert.equal(head.body, null);
  assert.equal(
    Number(head.headers.get("content-length")),
    new TextEncoder().encode(SPA_ASSETS["/index.html"].body).length,
  );
  const post = get("/policies", {}, "POST");
  assert.equal(post.status, 405);
  assert.equal(post.headers.get("allow"), "GET, HEAD");
  await post.body?.cancel();
});

Deno.test("an asset table without an index document is refused at startup", () => {
  assert.throws(() => spaHandler({ assets: {} }), /run `deno task web:build`/);
});

Deno.test("the committed bundle is up to date, and a stale one is detected", async () => {
  const fresh = await build({ check: true });
  assert.deepEqual(fresh.stale, [], "run `deno task web:build` and commit the result");
  const dir = await Deno.makeTempDir({ prefix: "svc-web-build-" });
  try {
    const module = new URL(`file://${dir}/spa_assets.gen.ts`);
    const protoDocs = new URL(`file://${dir}/proto_docs.gen.json`);
    await Deno.copyFile(new URL("../../web/src/editors/proto_docs.gen.json", import.meta.url), protoDocs);
    const committed = await Deno.readTextFile(
      new URL("../../server/http/spa_assets.gen.ts", import.meta.url),
    );
    await Deno.writeTextFile(
      module,
      committed.replace("Every file of the web UI", "Every file of an older web UI"),
    );
    assert.deepEqual((await build({ check: true, paths: { module, protoDocs } })).stale, [module.pathname]);
    await Deno.writeTextFile(module, committed);
    await Deno.writeTextFile(protoDocs, "{}\n");
    assert.deepEqual((await build({ check: true, paths: { module, protoDocs } })).stale, [
      protoDocs.pathname,
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
