/**
 * Server data is untrusted: hostile policies fed straight into the agent (as if the server had
 * been compromised and skipped its own validation) never reach the disk.
 */
import assert from "node:assert/strict";
import { create, toJsonString } from "@bufbuild/protobuf";
import { FirefoxPolicySchema } from "../../shared/gen/svc/policy/v1/firefox_pb.ts";
import { engineFor, firefoxPolicy, nodeTest, ORIGINAL_POLICIES, tempNode } from "./helpers.ts";
import type { CachedPolicy } from "../../agent/sync/types.ts";

async function listTree(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = `${prefix}/${entry.name}`;
    out.push(path);
    if (entry.isDirectory) out.push(...await listTree(`${dir}/${entry.name}`, path));
  }
  return out.sort();
}

/** Everything under a temp node's root once svc wrote Firefox's policies.json there: nothing else. */
const FIREFOX_NODE_TREE = [
  "/etc",
  "/etc/firefox",
  "/etc/firefox/policies",
  "/etc/firefox/policies/policies.json",
  "/usr",
  "/usr/lib",
  "/usr/lib/firefox",
];

function hostileAdditional(key: string, id: string): CachedPolicy {
  const message = create(FirefoxPolicySchema, {
    additional: { [key]: { kind: { case: "stringValue", value: "pwned" } } },
  });
  return {
    id,
    name: id,
    type: "Firefox",
    version: 1,
    priority: 100,
    content: toJsonString(FirefoxPolicySchema, message),
    typed: message,
  };
}

nodeTest("hostile policy keys (path traversal, newline, NUL, separators) are rejected before the disk", {
  make: tempNode,
}, async (node) => {
  const { engine, reports } = await engineFor(node);
  const good = firefoxPolicy({ disableTelemetry: true }, { id: "good" });
  const hostile = [
    "../../../etc/cron.d/x",
    "Key\nInjected",
    "Key\0Nul",
    "a/b",
    'Key\r\n"x": 1',
    "",
    "x".repeat(300),
  ].map((key, i) => hostileAdditional(key, `evil-${i}`));
  for (const p of hostile) engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: false });
  engine.handleEvent({ kind: "SNAPSHOT", policy: good, snapshotComplete: true });
  await engine.idle();

  for (const p of hostile) {
    assert.equal(
      reports.get(p.id)?.status,
      "ERROR",
      `${JSON.stringify(p.id)}: ${reports.get(p.id)?.message}`,
    );
    assert.match(reports.get(p.id)!.message, /rejected by the agent/);
  }
  assert.equal(reports.get("good")?.status, "COMPLIANT");
  const bytes = await Deno.readFile(`${node.root}/etc/firefox/policies/policies.json`);
  const text = new TextDecoder().decode(bytes);
  assert.equal(bytes.includes(0), false, "no NUL byte on disk");
  assert.doesNotMatch(text, /pwned|Injected|cron/);
  assert.deepEqual(JSON.parse(text).policies, { DisableTelemetry: true });
  assert.deepEqual(await listTree(node.root), FIREFOX_NODE_TREE);
});

nodeTest("hostile values: bad URL schemes and NUL are rejected; a newline stays inside its JSON string", {
  make: tempNode,
}, async (node) => {
  const { engine, reports } = await engineFor(node);
  const badUrl = firefoxPolicy({ homepage: { url: "javascript:alert(1)" } }, { id: "bad-url" });
  const nul = firefoxPolicy({ appUpdatePin: "128.\0" }, { id: "nul" });
  engine.handleEvent({ kind: "SNAPSHOT", policy: badUrl, snapshotComplete: false });
  engine.handleEvent({ kind: "SNAPSHOT", policy: nul, snapshotComplete: true });
  await engine.idle();
  for (const id of ["bad-url", "nul"]) {
    assert.equal(reports.get(id)?.status, "ERROR", `${id}: ${reports.get(id)?.message}`);
  }
  // Nothing valid to apply: the original stays.
  assert.equal(
    await Deno.readTextFile(`${node.root}/etc/firefox/policies/policies.json`),
    ORIGINAL_POLICIES,
  );

  const injection = 'Ask IT\n}, "policies": {"BlockAboutConfig": false';
  const newline = firefoxPolicy({ extensionSettings: { "*": { blockedInstallMessage: injection } } }, {
    id: "newline",
  });
  engine.handleEvent({ kind: "SNAPSHOT", policy: newline, snapshotComplete: true });
  await engine.idle();
  const text = await Deno.readTextFile(`${node.root}/etc/firefox/policies/policies.json`);
  assert.deepEqual(JSON.parse(text).policies, {
    ExtensionSettings: { "*": { blocked_install_message: injection } },
  });
  assert.equal(text.split("\n").length, 11, "the value's newline is escaped, not a line of the file");
});

nodeTest("oversized, deeply nested or malformed content is refused by the guarded parser", {
  make: () => tempNode({ original: null }),
}, async (node) => {
  const { engine, reports } = await engineFor(node);
  let deep: unknown = "x";
  for (let i = 0; i < 200; i++) deep = [deep];
  const cases: CachedPolicy[] = [
    { content: JSON.stringify({ DefaultDownloadDirectory: "a".repeat(10 * 1024 * 1024) }) },
    { content: JSON.stringify({ additional: { Deep: deep } }) },
    { content: '{"DisableTelemetry": "yes"}' },
    { content: "[]" },
  ].map((c, i) => ({ id: `c${i}`, name: `c${i}`, type: "Firefox", version: 1, priority: 0, ...c }));
  for (const p of cases) engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: false });
  engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
  await engine.idle();
  for (const p of cases) assert.equal(reports.get(p.id)?.status, "ERROR", p.id);
  assert.deepEqual(await listTree(node.root), ["/usr", "/usr/lib", "/usr/lib/firefox"]);
});

nodeTest("hostile type names and policy ids never become paths", { make: tempNode }, async (node) => {
  const { engine, reports } = await engineFor(node);
  const weirdType: CachedPolicy = {
    id: "t1",
    name: "t",
    type: "../../../tmp/evil",
    version: 1,
    priority: 0,
    content: "{}",
  };
  const weirdId = firefoxPolicy({ disablePocket: true }, { id: "../../../../etc/shadow\n" });
  engine.handleEvent({ kind: "SNAPSHOT", policy: weirdType, snapshotComplete: false });
  engine.handleEvent({ kind: "SNAPSHOT", policy: weirdId, snapshotComplete: true });
  await engine.idle();
  assert.equal(reports.get("t1")?.message, "unsupported policy type ../../../tmp/evil");
  assert.equal(reports.get(weirdId.id)?.status, "COMPLIANT");
  assert.deepEqual(await listTree(node.root), FIREFOX_NODE_TREE);
  const state = await listTree(node.dataDir);
  assert.ok(
    state.every((p) => /^\/state(\/managed-files\.json|\/backups(\/[0-9a-f]{64})?)?$/.test(p)),
    state.join(),
  );
});
