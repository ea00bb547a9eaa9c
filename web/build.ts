/**
 * Builds the web UI and embeds it in the server.
 *
 * 0. the comments of the policy content messages (`proto/svc/policy/v1/*.proto`) become
 *    `web/src/editors/proto_docs.gen.json`, the documentation and grouping of the generated policy forms;
 * 1. `deno bundle` turns `web/src/main.ts` (Lit + Shoelace) into a minified ES module and chunks: each page
 *    the shell imports lazily is its own chunk, and code shared between them is split out once;
 * 2. the app stylesheet is concatenated with Shoelace's light and dark themes;
 * 3. every icon the sources name is copied from Shoelace's bundled Bootstrap icons, and Shoelace's
 *    "system" icons (which it normally inlines as `data:` URLs that the CSP's `connect-src 'self'` refuses)
 *    are written out as files;
 * 4. `web/index.html` gets the content-hashed script and stylesheet names;
 * 5. everything is written to `web/dist/` and to `server/http/spa_assets.gen.ts`, the module the server
 *    serves from (with each file's gzip and brotli forms, compressed here once), so a plain `deno run` of
 *    the server needs no build step and no files on disk.
 *
 * `--check` builds in memory and fails when a committed generated file (`spa_assets.gen.ts`,
 * `proto_docs.gen.json`) differs from what the sources produce (a stale bundle).
 *
 * Usage: `deno run -A web/build.ts [--check]`
 */

import { brotliCompressSync, constants as zlib } from "node:zlib";
import { readProtoDocs } from "./proto_docs.ts";

const ROOT = new URL("../", import.meta.url);
const WEB = new URL("web/", ROOT);
const SRC = new URL("web/src/", ROOT);
const DIST = new URL("web/dist/", ROOT);
const GENERATED = new URL("server/http/spa_assets.gen.ts", ROOT);
const SHOELACE = new URL("node_modules/@shoelace-style/shoelace/dist/", ROOT);
const PROTO_POLICY = new URL("proto/svc/policy/v1/", ROOT);
const PROTO_DOCS = new URL("web/src/editors/proto_docs.gen.json", ROOT);

/** One built file, keyed by its URL path. */
interface BuiltAsset {
  path: string;
  contentType: string;
  body: string;
  /** Content-hashed file names never change content, so browsers may cache them forever. */
  immutable: boolean;
}

const encoder = new TextEncoder();

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", encoder.encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

function base64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

async function gzipBase64(text: string): Promise<string> {
  const stream = new Blob([encoder.encode(text)]).stream().pipeThrough(new CompressionStream("gzip"));
  return base64(new Uint8Array(await new Response(stream).arrayBuffer()));
}

/** Brotli at its best quality: compressed once at build time, served many times (and deterministic). */
function brotliBase64(text: string): string {
  const bytes = encoder.encode(text);
  return base64(
    brotliCompressSync(bytes, {
      params: {
        [zlib.BROTLI_PARAM_QUALITY]: zlib.BROTLI_MAX_QUALITY,
        [zlib.BROTLI_PARAM_MODE]: zlib.BROTLI_MODE_TEXT,
        [zlib.BROTLI_PARAM_SIZE_HINT]: bytes.length,
      },
    }),
  );
}

/** The bundle: the entry module and the chunks it imports (shared code, and one per lazily loaded page). */
interface Bundle {
  entry: string;
  /** File name (content-hashed by the bundler, e.g. `chunk-AB12CD34.js`) → text. */
  chunks: Map<string, string>;
}

async function bundleScript(): Promise<Bundle> {
  const outDir = await Deno.makeTempDir({ prefix: "svc-web-build-" });
  try {
    const cmd = new Deno.Command(Deno.execPath(), {
      args: [
        "bundle",
        "--quiet",
        "--platform",
        "browser",
        "--minify",
        "--code-splitting",
        "--outdir",
        outDir,
        new URL("main.ts", SRC).pathname,
      ],
      cwd: ROOT.pathname,
      stdout: "piped",
      stderr: "piped",
    });
    const result = await cmd.output();
    if (!result.success) {
      throw new Error(`deno bundle failed:\n${new TextDecoder().decode(result.stderr)}`);
    }
    const chunks = new Map<string, string>();
    let entry: string | undefined;
    for await (const file of Deno.readDir(outDir)) {
      const text = await Deno.readTextFile(`${outDir}/${file.name}`);
      if (file.name === "main.js") entry = text;
      else if (file.name.endsWith(".js")) chunks.set(file.name, text);
    }
    if (entry === undefined) throw new Error("deno bundle wrote no main.js; the bundler's layout changed");
    for (const name of chunks.keys()) {
      if (!/-[A-Z0-9]{8}\.js$/.test(name)) {
        throw new Error(`bundle chunk ${name} has no content hash; it could not be cached forever`);
      }
    }
    return { entry, chunks };
  } finally {
    await Deno.remove(outDir, { recursive: true });
  }
}

async function listSources(dir: URL): Promise<URL[]> {
  const files: URL[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const url = new URL(entry.name + (entry.isDirectory ? "/" : ""), dir);
    if (entry.isDirectory) files.push(...await listSources(url));
    else if (entry.name.endsWith(".ts")) files.push(url);
  }
  return files.sort((a, b) => a.href.localeCompare(b.href));
}

/**
 * Icon names used by the sources: `<sl-icon name="x">`, `<sl-icon-button name="x">`, the quoted names
 * inside `name=${a ? "x" : "y"}`, and `icon: "x"` in option objects. An icon named any other way would be
 * missing from the bundle and show as an empty square.
 */
async function usedIcons(): Promise<string[]> {
  const names = new Set<string>();
  const literal = /<sl-icon(?:-button)?\b[^>]*?\sname="([a-z0-9-]+)"/g;
  const expression = /<sl-icon(?:-button)?\b[^>]*?\sname=\$\{([^}]*)\}/g;
  const option = /\bicon: "([a-z0-9-]+)"/g;
  for (const file of await listSources(SRC)) {
    const text = await Deno.readTextFile(file);
    for (const m of text.matchAll(literal)) names.add(m[1]);
    for (const m of text.matchAll(option)) names.add(m[1]);
    for (const m of text.matchAll(expression)) {
      for (const q of m[1].matchAll(/"([a-z0-9-]+)"/g)) names.add(q[1]);
    }
  }
  return [...names].sort();
}

async function iconAssets(): Promise<BuiltAsset[]> {
  const assets: BuiltAsset[] = [];
  for (const name of await usedIcons()) {
    let svg: string;
    try {
      svg = await Deno.readTextFile(new URL(`assets/icons/${name}.svg`, SHOELACE));
    } catch {
      throw new Error(
        `icon "${name}" is used in web/src but is not a Shoelace (Bootstrap) icon; pick another name`,
      );
    }
    assets.push({
      path: `/assets/icons/${name}.svg`,
      contentType: "image/svg+xml",
      body: svg,
      immutable: false,
    });
  }
  // Shoelace keeps its own system icons (caret, x-lg, eye…) as strings in one chunk; the resolver turns a
  // name into a data: URL, which the browser would have to fetch. Serve them as files instead.
  const { default: systemLibrary } = await import(
    new URL("components/icon/library.system.js", SHOELACE).href
  );
  const chunkText = await findSystemIconChunk();
  for (const m of chunkText.matchAll(/^ {2}"?([a-z0-9-]+)"?: `/gm)) {
    const url: string = systemLibrary.resolver(m[1]);
    if (!url.startsWith("data:image/svg+xml,")) continue;
    const svg = decodeURIComponent(url.slice("data:image/svg+xml,".length)).trim();
    assets.push({
      path: `/assets/icons/system/${m[1]}.svg`,
      contentType: "image/svg+xml",
      body: svg,
      immutable: false,
    });
  }
  if (!assets.some((a) => a.path.startsWith("/assets/icons/system/"))) {
    throw new Error("found no Shoelace system icons; the Shoelace layout changed — update web/build.ts");
  }
  return assets;
}

async function findSystemIconChunk(): Promise<string> {
  const entry = await Deno.readTextFile(new URL("components/icon/library.system.js", SHOELACE));
  const chunk = entry.match(/from "(\.\.\/\.\.\/chunks\/chunk\.[A-Z0-9]+\.js)"/);
  if (!chunk) throw new Error("cannot find the chunk holding Shoelace's system icons");
  return await Deno.readTextFile(new URL(chunk[1], new URL("components/icon/", SHOELACE)));
}

/** Builds every asset in memory. */
async function buildAssets(): Promise<BuiltAsset[]> {
  try {
    await Deno.stat(SHOELACE);
  } catch {
    throw new Error("node_modules/@shoelace-style/shoelace is missing: run `deno install` first");
  }
  const { entry: script, chunks } = await bundleScript();
  const css = [
    await Deno.readTextFile(new URL("themes/light.css", SHOELACE)),
    await Deno.readTextFile(new URL("themes/dark.css", SHOELACE)),
    await Deno.readTextFile(new URL("styles.css", SRC)),
  ].join("\n");
  const scriptName = `/assets/app-${(await sha256Hex(script)).slice(0, 16)}.js`;
  const cssName = `/assets/app-${(await sha256Hex(css)).slice(0, 16)}.css`;
  const template = await Deno.readTextFile(new URL("index.html", WEB));
  if (!template.includes("%APP_JS%") || !template.includes("%APP_CSS%")) {
    throw new Error("web/index.html must reference %APP_JS% and %APP_CSS%");
  }
  const index = template.replace("%APP_JS%", scriptName).replace("%APP_CSS%", cssName);
  return [
    { path: "/index.html", contentType: "text/html; charset=utf-8", body: index, immutable: false },
    { path: scriptName, contentType: "text/javascript; charset=utf-8", body: script, immutable: true },
    // The entry imports its chunks as `./chunk-….js`, i.e. from /assets/ next to it.
    ...[...chunks].map(([name, body]) => ({
      path: `/assets/${name}`,
      contentType: "text/javascript; charset=utf-8",
      body,
      immutable: true,
    })),
    { path: cssName, contentType: "text/css; charset=utf-8", body: css, immutable: true },
    {
      path: "/assets/favicon.svg",
      contentType: "image/svg+xml",
      body: await Deno.readTextFile(new URL("favicon.svg", WEB)),
      immutable: false,
    },
    ...await iconAssets(),
  ].sort((a, b) => a.path.localeCompare(b.path));
}

/** Renders the generated TypeScript module. */
async function renderModule(assets: BuiltAsset[]): Promise<string> {
  const lines = [
    "// Generated by web/build.ts from web/ — do not edit. Rebuild with `deno task web:build`.",
    "",
    "/** One embedded web asset. */",
    "export interface SpaAsset {",
    "  contentType: string;",
    "  /** The file's text. */",
    "  body: string;",
    "  /** The same bytes gzip-compressed, base64. */",
    "  gzip: string;",
    "  /** The same bytes brotli-compressed, base64. */",
    "  br: string;",
    "  /** Strong validator of the uncompressed body (quoted). */",
    "  etag: string;",
    "  /** Content-hashed name: cache forever. */",
    "  immutable: boolean;",
    "}",
    "",
    "/** Every file of the web UI, keyed by URL path. */",
    "export const SPA_ASSETS: Readonly<Record<string, SpaAsset>> = {",
  ];
  for (const a of assets) {
    const etag = `"${(await sha256Hex(a.body)).slice(0, 32)}"`;
    lines.push(
      `  ${JSON.stringify(a.path)}: {`,
      `    contentType: ${JSON.stringify(a.contentType)},`,
      `    etag: ${JSON.stringify(etag)},`,
      `    immutable: ${a.immutable},`,
      `    body: ${JSON.stringify(a.body)},`,
      `    gzip: ${JSON.stringify(await gzipBase64(a.body))},`,
      `    br: ${JSON.stringify(brotliBase64(a.body))},`,
      "  },",
    );
  }
  lines.push("};", "");
  return lines.join("\n");
}

async function writeDist(assets: BuiltAsset[]): Promise<void> {
  await Deno.remove(DIST, { recursive: true }).catch(() => {});
  for (const a of assets) {
    const file = new URL(a.path.slice(1), DIST);
    await Deno.mkdir(new URL("./", file), { recursive: true });
    await Deno.writeTextFile(file, a.body);
  }
}

/** Where the generated files go (tests point `--check` at copies). */
export interface GeneratedPaths {
  /** The embedded-asset module (`server/http/spa_assets.gen.ts`). */
  module: URL;
  /** The form documentation (`web/src/editors/proto_docs.gen.json`). */
  protoDocs: URL;
}

/** Outcome of {@link build}: `stale` names the generated files that differ from what the sources produce. */
export interface BuildResult {
  assets: number;
  bytes: number;
  stale: string[];
}

/**
 * Builds everything. With `check`, nothing is written and `stale` lists each generated file whose committed
 * content differs from a fresh build; otherwise the files (and `web/dist/`) are written.
 */
export async function build(
  options: { check: boolean; paths?: GeneratedPaths },
): Promise<BuildResult> {
  const paths = options.paths ?? { module: GENERATED, protoDocs: PROTO_DOCS };
  const stale: string[] = [];
  const docs = JSON.stringify(await readProtoDocs(PROTO_POLICY), null, 2) + "\n";
  if (options.check) {
    if (await Deno.readTextFile(paths.protoDocs).catch(() => "") !== docs) {
      stale.push(paths.protoDocs.pathname);
    }
  } else {
    await Deno.writeTextFile(paths.protoDocs, docs);
  }
  // The bundle embeds the documentation file as it is on disk; when that is stale it is reported above.
  const assets = await buildAssets();
  const module = await renderModule(assets);
  if (options.check) {
    if (await Deno.readTextFile(paths.module).catch(() => "") !== module) stale.push(paths.module.pathname);
  } else {
    await writeDist(assets);
    await Deno.writeTextFile(paths.module, module);
  }
  return { assets: assets.length, bytes: assets.reduce((n, a) => n + a.body.length, 0), stale };
}

async function main(args: string[]): Promise<number> {
  const check = args.includes("--check");
  const unknown = args.filter((a) => a !== "--check");
  if (unknown.length > 0) {
    console.error(`unknown argument ${unknown[0]}; usage: deno run -A web/build.ts [--check]`);
    return 2;
  }
  const result = await build({ check });
  if (result.stale.length > 0) {
    console.error(
      `stale generated files: ${
        result.stale.join(", ")
      }; the web sources or the policy .proto files changed ` +
        "since they were generated. Run `deno task web:build` and commit the result.",
    );
    return 1;
  }
  console.log(
    check
      ? "web bundle and generated files are up to date"
      : `built ${result.assets} web assets (${Math.round(result.bytes / 1024)} KiB) into web/dist, ` +
        "server/http/spa_assets.gen.ts and web/src/editors/proto_docs.gen.json",
  );
  return 0;
}

if (import.meta.main) {
  try {
    Deno.exit(await main(Deno.args));
  } catch (err) {
    console.error(`web build failed: ${(err as Error).message}`);
    Deno.exit(1);
  }
}
