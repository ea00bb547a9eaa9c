/**
 * The pieces of the agent's node life, on temp roots with the real enforcers: the node watcher (what fires a
 * re-evaluation and what does not), the watch targets the engine gathers per type, the stored policy set
 * (round trip with typed bytes, mode, a damaged file refused), and the engine starting from a stored set.
 */
import assert from "node:assert/strict";
import { create, toBinary } from "@bufbuild/protobuf";
import { NodeWatcher } from "../../agent/sync/node_watch.ts";
import { PolicyStore } from "../../agent/sync/policy_store.ts";
import { enforcerRegistry, lazyEnforcers } from "../../agent/enforcers/mod.ts";
import { FirefoxPolicySchema } from "../../shared/gen/svc/policy/v1/firefox_pb.ts";
import type { Logger } from "../../agent/log.ts";
import type { CachedPolicy } from "../../agent/sync/types.ts";
import { eventually } from "../helpers/agent_process.ts";
import {
  engineFor,
  firefoxPolicy,
  nodeTest,
  ORIGINAL_POLICIES,
  readFirefoxFile,
  tempNode,
} from "./helpers.ts";

function recordingLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const log = (msg: string, fields?: Record<string, unknown>) =>
    lines.push(`${msg} ${JSON.stringify(fields ?? {})}`);
  return { lines, debug: log, info: log, warn: log, error: log } as unknown as Logger & { lines: string[] };
}

Deno.test("node watcher: a target appearing fires once per burst; unrelated entries do not", async () => {
  const node = await tempNode({ firefox: false, original: null });
  await Deno.mkdir(`${node.root}/usr/lib`, { recursive: true });
  const fired: string[][] = [];
  const watcher = new NodeWatcher({
    fs: node.fs,
    logger: recordingLogger(),
    settleMs: 300,
    onChange: (paths) => fired.push(paths),
  });
  try {
    await watcher.setTargets(["/usr/lib/firefox-esr", "/etc/group"]);
    // /etc does not exist yet: its nearest existing ancestor (the root) is watched for the way to it.
    assert.deepEqual(watcher.watchedDirs(), [node.root, `${node.root}/usr/lib`].sort());
    await Deno.mkdir(`${node.root}/usr/lib/unrelated`);
    await Deno.writeTextFile(`${node.root}/usr/lib/unrelated/file`, "x");
    // What a package manager does: the directory, then its files, in quick succession.
    await Deno.mkdir(`${node.root}/usr/lib/firefox-esr`);
    await Deno.writeTextFile(`${node.root}/usr/lib/firefox-esr/application.ini`, "[App]\n");
    await Deno.mkdir(`${node.root}/usr/lib/firefox-esr/browser`);
    await eventually(() => fired.length > 0, 10_000, "a re-evaluation");
    // The directory that appeared is watched now, before it fills up.
    assert.ok(watcher.watchedDirs().includes(`${node.root}/usr/lib/firefox-esr`), `${watcher.watchedDirs()}`);
    await new Promise((r) => setTimeout(r, 600));
    // One burst is one re-evaluation (a loaded machine may split it); never the unrelated directory.
    assert.ok(fired.every((f) => f.length === 1 && f[0] === "/usr/lib/firefox-esr"), JSON.stringify(fired));

    // A file inside a watched target directory, and an account file created later, fire again.
    const burst = fired.length;
    await Deno.writeTextFile(`${node.root}/usr/lib/firefox-esr/omni.ja`, "x");
    await eventually(() => fired.length > burst, 10_000, "a second re-evaluation");
    await Deno.mkdir(`${node.root}/etc`);
    await Deno.writeTextFile(`${node.root}/etc/group`, "users:x:100:alice\n");
    await eventually(() => fired.some((f) => f.includes("/etc/group")), 10_000, "/etc/group seen");
    // Removal is a change too (the browser uninstalled).
    const before = fired.length;
    await Deno.remove(`${node.root}/usr/lib/firefox-esr`, { recursive: true });
    await eventually(() => fired.length > before, 10_000, "the removal seen");
  } finally {
    watcher.close();
    await node.cleanup();
  }
});

Deno.test("engine: watch targets come only from types with policies; every desktop type names its own", async () => {
  const node = await tempNode();
  try {
    const { engine } = await engineFor(node);
    assert.deepEqual(engine.watchTargets(), []);
    engine.handleEvent({
      kind: "SNAPSHOT",
      policy: firefoxPolicy({ disableTelemetry: true }),
      snapshotComplete: true,
    });
    await engine.idle();
    const targets = engine.watchTargets();
    for (
      const path of ["/usr/lib/firefox-esr", "/usr/lib/firefox", "/var/lib/flatpak/app/org.mozilla.firefox"]
    ) {
      assert.ok(targets.includes(path), `${path} in ${targets}`);
    }
    assert.ok(!targets.includes("/etc/group"), "SessionAccess has no policy here");
  } finally {
    await node.cleanup();
  }
  // Each type that depends on what is installed says where it looks (loaded modules).
  const expected: Record<string, string> = {
    Firefox: "/usr/lib/firefox-esr",
    Thunderbird: "/usr/lib/thunderbird",
    Chrome: "/usr/lib/chromium",
    Edge: "/opt/microsoft/msedge",
    Dconf: "/usr/share/glib-2.0/schemas",
    Polkit: "/usr/share/polkit-1/actions",
    Kconfig: "/usr/bin/kreadconfig5",
    Firewalld: "/etc/firewalld",
    Flatpak: "/var/lib/flatpak/app",
    SessionAccess: "/etc/group",
  };
  for (const lazy of lazyEnforcers()) {
    if (!(lazy.type in expected)) continue;
    const real = await lazy.load();
    const paths = real.watches?.({ config: node.config } as never) ?? [];
    assert.ok(paths.includes(expected[lazy.type]), `${lazy.type} watches ${paths}`);
  }
});

Deno.test("stored policy set: round trip with typed bytes, mode 0600, a damaged file is refused", async () => {
  const node = await tempNode();
  const logger = recordingLogger();
  try {
    const store = new PolicyStore(node.dataDir, logger);
    assert.equal(await store.load(), undefined);
    const bytes = toBinary(FirefoxPolicySchema, create(FirefoxPolicySchema, { disableTelemetry: true }));
    const policy: CachedPolicy = {
      id: "p1",
      name: "one",
      type: "Firefox",
      version: 3,
      priority: 7,
      content: '{"DisableTelemetry":true}',
      typed: { case: "firefoxPolicy", value: bytes },
    };
    await store.save([policy]);
    assert.equal((await Deno.stat(store.path)).mode! & 0o777, 0o600);
    const loaded = await store.load();
    assert.deepEqual(loaded?.policies, [policy]);

    // One changed character in the body: the checksum no longer matches, the file is not used.
    const text = await Deno.readTextFile(store.path);
    await Deno.writeTextFile(store.path, text.replace('\\"version\\":3', '\\"version\\":4'));
    assert.notEqual(await Deno.readTextFile(store.path), text, "the edit landed");
    assert.equal(await store.load(), undefined);
    assert.match(logger.lines.join("\n"), /the stored policy set is damaged and is not used/);
    await Deno.writeTextFile(store.path, text.slice(0, 40));
    assert.equal(await store.load(), undefined, "a torn file too");
  } finally {
    await node.cleanup();
  }
});

function policiesOf(file: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  return file?.policies as Record<string, unknown> | undefined;
}

nodeTest("engine restored from a stored set enforces at once; a snapshot then replaces it", {
  make: () => tempNode({ original: null }),
}, async (node) => {
  const { engine, reports } = await engineFor(node, { enforcers: enforcerRegistry() });
  const stored = firefoxPolicy({ disableTelemetry: true }, { id: "stored" });
  engine.restore([stored]);
  await engine.idle();
  assert.equal(policiesOf(await readFirefoxFile(node))?.DisableTelemetry, true);
  assert.equal(reports.get("stored")?.status, "COMPLIANT");
  // A restore after the server's snapshot does nothing: the server's set wins.
  engine.handleEvent({
    kind: "SNAPSHOT",
    policy: firefoxPolicy({ disablePocket: true }, { id: "live" }),
    snapshotComplete: true,
  });
  await engine.idle();
  engine.restore([stored]);
  await engine.idle();
  assert.deepEqual(engine.cached().map((p) => p.id), ["live"]);
  const file = policiesOf(await readFirefoxFile(node));
  assert.equal(file?.DisablePocket, true);
  assert.equal(file?.DisableTelemetry, undefined);
});

nodeTest(
  "svc-agent release takes back every managed file and the stored set",
  { make: tempNode },
  async (node) => {
    const { engine, managed } = await engineFor(node);
    engine.handleEvent({
      kind: "SNAPSHOT",
      policy: firefoxPolicy({ disableTelemetry: true }),
      snapshotComplete: true,
    });
    await engine.idle();
    assert.equal(policiesOf(await readFirefoxFile(node))?.DisableTelemetry, true);
    assert.equal(managed.list().length, 1);
    const store = new PolicyStore(node.dataDir, recordingLogger());
    await store.save(engine.cached());

    const { releaseAll } = await import("../../agent/release.ts");
    const outcome = await releaseAll(node.config, recordingLogger());
    assert.deepEqual(outcome, { released: ["/etc/firefox/policies/policies.json"], remaining: [] });
    // The node's own file is back as it was before svc.
    assert.equal(
      await Deno.readTextFile(`${node.root}/etc/firefox/policies/policies.json`),
      ORIGINAL_POLICIES,
    );
    assert.equal(await store.load(), undefined, "a later start does not enforce the old set");
  },
);
