/**
 * Honest read-back against the real firefox-esr installed here: a policy the installed Firefox still lists
 * in its schema but does nothing with (Firefox ≥ 140 keeps `DisablePocket` after removing Pocket; its
 * `Policies.sys.mjs` has no handler for it) is reported INAPPLICABLE with the reason, not COMPLIANT. Where
 * the implementation cannot be read (an omni.ja with the schema only), the per-version catalogue decides
 * the same. Skips, saying why, without Debian's firefox-esr.
 */
import assert from "node:assert/strict";
import { typedContentFor } from "../../shared/policy_types/mod.ts";
import { implementedMozillaPolicies, readZipEntry } from "../../agent/enforcers/known_policies.ts";
import type { CachedPolicy } from "../../agent/sync/types.ts";
import { engineFor, type TempNode, tempNode } from "./helpers.ts";

const APP_DIR = "/usr/lib/firefox-esr";
const JAR = `${APP_DIR}/browser/omni.ja`;
const SCHEMA = "modules/policies/policies-schema.json";
const IMPLEMENTATION = "modules/policies/Policies.sys.mjs";

function cached(content: Record<string, unknown>, id: string): CachedPolicy {
  const text = JSON.stringify(content);
  return {
    id,
    name: id,
    type: "Firefox",
    version: 1,
    priority: 0,
    content: text,
    typed: typedContentFor("Firefox", text)?.value,
  };
}

/** The installed Firefox's version and whether it fits this test, or why it does not. */
async function installed(): Promise<{ version: string } | string> {
  const schema = await readZipEntry(JAR, SCHEMA).catch(() => undefined);
  if (!schema) return `${JAR} has no ${SCHEMA} (apt-get install firefox-esr to run this test)`;
  const code = await readZipEntry(JAR, IMPLEMENTATION).catch(() => undefined);
  const implemented = code && implementedMozillaPolicies(new TextDecoder().decode(code));
  const listed = Object.keys(JSON.parse(new TextDecoder().decode(schema)).properties ?? {});
  if (!listed.includes("DisablePocket") || !implemented || implemented.has("DisablePocket")) {
    return "the installed Firefox does not list DisablePocket without implementing it (expected from Firefox 140 on)";
  }
  const ini = await Deno.readTextFile(`${APP_DIR}/application.ini`);
  return { version: /^Version=(.+)$/m.exec(ini)![1].trim() };
}

async function syncPolicies(node: TempNode, policies: CachedPolicy[]) {
  const { engine, reports } = await engineFor(node);
  engine.handleEvent({ kind: "SNAPSHOT", policy: policies[0], snapshotComplete: policies.length === 1 });
  for (const [i, p] of policies.slice(1).entries()) {
    engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: i === policies.length - 2 });
  }
  await engine.idle();
  return reports;
}

async function place(node: TempNode, nodePath: string, hostPath: string): Promise<void> {
  const target = `${node.root}${nodePath}`;
  await Deno.mkdir(target.slice(0, target.lastIndexOf("/")), { recursive: true });
  await Deno.link(await Deno.realPath(hostPath), target).catch(() => Deno.copyFile(hostPath, target));
}

Deno.test("Firefox: a key the installed version lists but ignores (DisablePocket) is INAPPLICABLE with the reason", async () => {
  const found = await installed();
  if (typeof found === "string") return console.log(`skipped: ${found}`);
  const node = await tempNode({ firefox: false, original: null });
  try {
    await place(node, JAR, JAR);
    await place(node, `${APP_DIR}/application.ini`, `${APP_DIR}/application.ini`);
    const reports = await syncPolicies(node, [
      cached({ DisablePocket: true, DisableTelemetry: true }, "mixed"),
      cached({ DisablePocket: true }, "pocket-only"),
    ]);
    const mixed = reports.get("mixed")!;
    const items = Object.fromEntries(mixed.items.map((i) => [i.key, i]));
    assert.equal(items.DisableTelemetry.status, "COMPLIANT");
    assert.equal(items.DisablePocket.status, "INAPPLICABLE");
    assert.equal(
      items.DisablePocket.message,
      `Firefox ${found.version} lists DisablePocket in its policy schema but has no handler for it ` +
        `(${IMPLEMENTATION} in ${JAR}), so the setting has no effect`,
    );
    assert.equal(mixed.status, "COMPLIANT", "what can work does work");
    const only = reports.get("pocket-only")!;
    assert.equal(only.status, "INAPPLICABLE", only.message);
    assert.match(only.message, /no handler for it/);
  } finally {
    await node.cleanup();
  }
});

Deno.test("Firefox: without a readable implementation the per-version catalogue marks DisablePocket inert", async () => {
  const found = await installed();
  if (typeof found === "string") return console.log(`skipped: ${found}`);
  const node = await tempNode({ firefox: false, original: null });
  const work = await Deno.makeTempDir();
  try {
    // An omni.ja holding the real schema only, made with the zip tool from the real file.
    await Deno.mkdir(`${work}/modules/policies`, { recursive: true });
    await Deno.writeFile(`${work}/modules/policies/policies-schema.json`, (await readZipEntry(JAR, SCHEMA))!);
    const zipped = await new Deno.Command("zip", { args: ["-q", "-r", "omni.ja", "modules"], cwd: work })
      .output();
    if (!zipped.success) return console.log("skipped: the zip tool is missing (apt-get install zip)");
    await place(node, JAR, `${work}/omni.ja`);
    await place(node, `${APP_DIR}/application.ini`, `${APP_DIR}/application.ini`);
    const reports = await syncPolicies(node, [cached({ DisablePocket: true, DisableTelemetry: true }, "p")]);
    const items = Object.fromEntries(reports.get("p")!.items.map((i) => [i.key, i]));
    assert.equal(items.DisablePocket.status, "INAPPLICABLE");
    assert.equal(
      items.DisablePocket.message,
      `Pocket was removed from Firefox 140; Firefox ${found.version} still lists DisablePocket in its policy ` +
        "schema but ignores it",
    );
    assert.equal(items.DisableTelemetry.status, "COMPLIANT");
  } finally {
    await node.cleanup();
    await Deno.remove(work, { recursive: true });
  }
});

Deno.test("the Policies object of a Policies.sys.mjs is read; other layouts are not guessed at", () => {
  const names = Array.from({ length: 25 }, (_, i) => `Policy${i}`);
  const source = `export var Policies = {\n  "3rdparty": {\n    x() {},\n  },\n${
    names.map((n) => `  ${n}: {\n    onBeforeUIStartup() {},\n  },\n`).join("")
  }};\n\nexport var PoliciesUtils = {\n  Other: {\n  },\n};\n`;
  const found = implementedMozillaPolicies(source)!;
  assert.ok(found.has("3rdparty") && found.has("Policy24"));
  assert.ok(!found.has("Other"), "members of later objects are not policies");
  assert.equal(implementedMozillaPolicies("const Policies = {};"), undefined);
  assert.equal(
    implementedMozillaPolicies(`export var Policies = {\n  A: {\n  },\n};\n`),
    undefined,
    "too few",
  );
});
