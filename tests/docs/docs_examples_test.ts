/**
 * Every example in `docs/` is executed, so the admin guide cannot rot. A fenced block's info string says
 * what it is, and each kind has one check:
 *
 * - `json policy=<Type>`: policy content; it must pass the type's validation (the server's own check).
 * - `yaml server-config`: a server configuration file; it must load with the server's configuration loader.
 * - `yaml prometheus-rules`: alerting rules; every `svc_*` family they use must be one a real server exports.
 * - `sh`: commands run with bash against a real svc-server process (all blocks of one page in order, in one
 *   working directory), with `SVC_URL`, `SVC_DATA_DIR` and `SVC_ADMIN_PASSWORD` set as an operator would, and
 *   `svc-server` on the PATH (this checkout, with the running server's configuration). The server runs on
 *   PostgreSQL when `SVC_TEST_DATABASE_URL` is set; pages that run `svc-server` commands beside a running
 *   server need that (the embedded database belongs to one process) and are skipped, saying so, without it.
 * - `text`: output, file layouts or paths: not an example, nothing to run.
 *
 * A block of any other kind fails the test: a new kind of example needs a check here first.
 */
import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import { ConfigError, loadConfig } from "../../server/config/config.ts";
import { validatePolicyContent } from "../../shared/policy_types/mod.ts";
import { type ServerProcess, startServerProcess } from "../helpers/process.ts";
import { freshDb, TEST_DATABASE_URL, type TestDb } from "../helpers/db.ts";

const DOCS = new URL("../../docs/", import.meta.url).pathname;

interface Block {
  file: string;
  line: number;
  lang: string;
  attrs: Record<string, string>;
  body: string;
}

async function markdownFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    const path = join(dir, e.name);
    if (e.isDirectory) out.push(...await markdownFiles(path));
    else if (e.name.endsWith(".md")) out.push(path);
  }
  return out.sort();
}

function blocksOf(file: string, text: string): Block[] {
  const blocks: Block[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,})(.*)$/.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence, info] = open;
    const [lang = "", ...rest] = info.trim().split(/\s+/);
    const attrs = Object.fromEntries(rest.map((a) => {
      const [k, v = ""] = a.split("=", 2);
      return [k, v];
    }));
    const body: string[] = [];
    const start = i + 1;
    for (i++; i < lines.length && !lines[i].startsWith(`${indent}${fence}`); i++) {
      body.push(lines[i].slice(indent.length));
    }
    blocks.push({ file: relative(DOCS, file), line: start, lang, attrs, body: body.join("\n") });
  }
  return blocks;
}

const files = await markdownFiles(DOCS);
const allBlocks: Block[] = [];
for (const f of files) allBlocks.push(...blocksOf(f, await Deno.readTextFile(f)));
const where = (b: Block) => `docs/${b.file}:${b.line}`;

Deno.test("the docs have an admin guide page per policy type and the operations pages", async () => {
  const have = new Set(files.map((f) => relative(DOCS, f)));
  for (
    const page of [
      "admin/README.md",
      "operations/README.md",
      "architecture.md",
    ]
  ) assert.ok(have.has(page), `docs/${page} is missing`);
  const types = (await import("../../shared/policy_types/mod.ts")).listPolicyTypes().map((t) => t.wireName);
  for (const type of types) {
    const examples = allBlocks.filter((b) => b.lang === "json" && b.attrs.policy === type);
    assert.ok(examples.length > 0, `the admin guide has no example for ${type}`);
  }
});

Deno.test("every fenced block in docs/ is a known kind of example", () => {
  const known = new Set(["json", "yaml", "sh", "text"]);
  for (const b of allBlocks) {
    assert.ok(known.has(b.lang), `${where(b)}: a \`${b.lang || "(no language)"}\` block has no check`);
    if (b.lang === "json") assert.ok(b.attrs.policy, `${where(b)}: a json example must say policy=<Type>`);
    if (b.lang === "yaml") {
      assert.ok(
        b.attrs["server-config"] !== undefined || b.attrs["prometheus-rules"] !== undefined,
        `${where(b)}: a yaml example must be server-config or prometheus-rules`,
      );
    }
  }
});

Deno.test("policy examples in the admin guide pass the server's validation", () => {
  const examples = allBlocks.filter((b) => b.lang === "json");
  assert.ok(examples.length > 0);
  for (const b of examples) {
    try {
      validatePolicyContent(b.attrs.policy, b.body);
    } catch (err) {
      assert.fail(`${where(b)}: ${b.attrs.policy} example is refused: ${(err as Error).message}`);
    }
  }
});

Deno.test("server configuration examples load with the server's configuration loader", async () => {
  const examples = allBlocks.filter((b) => b.lang === "yaml" && b.attrs["server-config"] !== undefined);
  assert.ok(examples.length > 0);
  const dir = await Deno.makeTempDir();
  try {
    for (const [i, b] of examples.entries()) {
      const path = join(dir, `${i}.yaml`);
      await Deno.writeTextFile(path, b.body);
      try {
        await loadConfig({ path, explicitPath: true, env: {} });
      } catch (err) {
        if (err instanceof ConfigError) assert.fail(`${where(b)}: ${err.message}`);
        throw err;
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** Runs the `sh` examples of every page against one real server; yields each page's transcript on failure. */
Deno.test({
  name: "shell examples run against a real svc-server, and alert rules use only exported families",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const tdb: TestDb | undefined = TEST_DATABASE_URL ? await freshDb("postgres") : undefined;
    const proc: ServerProcess = await startServerProcess(
      tdb ? { config: { database: { url: tdb.url } } } : {},
    );
    const bin = await Deno.makeTempDir({ prefix: "svc-docs-bin-" });
    const main = new URL("../../server/main.ts", import.meta.url).pathname;
    await Deno.writeTextFile(
      `${bin}/svc-server`,
      `#!/bin/sh\nexec "${Deno.execPath()}" run -A --quiet "${main}" "$@"\n`,
      { mode: 0o755 },
    );
    try {
      const env = {
        SVC_CONFIG: proc.configPath,
        SVC_URL: `https://localhost:${proc.webPort}`,
        SVC_DATA_DIR: proc.dataDir,
        SVC_ADMIN_PASSWORD: await proc.adminPassword(),
        SVC_METRICS_URL: `http://127.0.0.1:${proc.metricsPort}/metrics`,
        PATH: `${bin}:${Deno.env.get("PATH") ?? "/usr/bin:/bin"}`,
        HOME: Deno.env.get("HOME") ?? "/tmp",
        NO_COLOR: "1",
      };
      const pages = [...new Set(allBlocks.filter((b) => b.lang === "sh").map((b) => b.file))];
      for (const page of pages) {
        const blocks = allBlocks.filter((x) => x.lang === "sh" && x.file === page);
        const needsPostgres = !tdb && blocks.some((b) => /(^|[\s;|&(])svc-server\s/m.test(b.body));
        if (needsPostgres) {
          console.log(
            `docs/${page}: skipped: its svc-server commands need PostgreSQL: set SVC_TEST_DATABASE_URL`,
          );
        }
        await t.step({
          name: page,
          ignore: needsPostgres,
          fn: async () => {
            const cwd = await Deno.makeTempDir({ prefix: "svc-docs-" });
            try {
              for (const b of blocks) {
                const run = await new Deno.Command("bash", {
                  args: ["-euo", "pipefail", "-c", b.body],
                  cwd,
                  env,
                  clearEnv: true,
                  stdout: "piped",
                  stderr: "piped",
                }).output();
                const dec = new TextDecoder();
                assert.equal(
                  run.code,
                  0,
                  `${where(b)} failed (exit ${run.code}):\n${b.body}\n--- stdout\n${
                    dec.decode(run.stdout)
                  }\n--- stderr\n${dec.decode(run.stderr)}`,
                );
              }
            } finally {
              await Deno.remove(cwd, { recursive: true });
            }
          },
        });
      }

      await t.step("prometheus rules", async () => {
        const scrape = await (await fetch(env.SVC_METRICS_URL)).text();
        const families = new Set([...scrape.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]));
        const rules = allBlocks.filter((b) => b.lang === "yaml" && b.attrs["prometheus-rules"] !== undefined);
        assert.ok(rules.length > 0, "the operations guide has alerting rules");
        for (const b of rules) {
          for (const doc of parseAllDocuments(b.body)) {
            assert.equal(doc.errors.length, 0, `${where(b)}: ${doc.errors}`);
          }
          const parsed = parseYaml(b.body) as { groups: { rules: { alert?: string; expr: string }[] }[] };
          assert.ok(parsed.groups?.length, `${where(b)}: rules need groups`);
          for (const rule of parsed.groups.flatMap((g) => g.rules)) {
            assert.ok(rule.alert && rule.expr, `${where(b)}: every rule needs alert and expr`);
            for (const [name] of rule.expr.matchAll(/\bsvc_[a-z0-9_]+/g)) {
              const family = name.replace(/_(bucket|sum|count)$/, "");
              assert.ok(
                families.has(family) || families.has(name),
                `${where(b)}: alert ${rule.alert} uses ${name}, which the server does not export`,
              );
            }
          }
        }
      });
    } finally {
      await proc.stop();
      await Deno.remove(bin, { recursive: true });
      await tdb?.dispose();
    }
  },
});
