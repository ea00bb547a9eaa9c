/**
 * The sync engine's handling rules 1–7 and enforcement rules 1–5, driven through stream events
 * with the real Firefox enforcer on a temp root.
 */
import assert from "node:assert/strict";
import {
  engineFor,
  firefoxPolicy,
  nodeTest,
  ORIGINAL_POLICIES,
  readFirefoxFile,
  tempNode,
} from "./helpers.ts";
import { FIREFOX_MARKER_KEY } from "../../agent/enforcers/firefox.ts";
import type { Enforcer } from "../../agent/sync/types.ts";
import { enforcerRegistry } from "../../agent/enforcers/mod.ts";
import { firefoxEnforcer } from "../../agent/enforcers/firefox.ts";
import { ManagedFiles } from "../../agent/sync/managed_files.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";
import { Runner } from "../../agent/runner.ts";

const POLICIES_JSON = "/etc/firefox/policies/policies.json";

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

nodeTest("empty snapshot on a fresh node has no side effects at all", {
  make: () => tempNode({ original: null }),
}, async (node) => {
  const { engine, reports } = await engineFor(node);
  engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
  await engine.idle();
  assert.equal(reports.size, 0);
  assert.equal(await exists(`${node.root}/etc`), false, "nothing created under the root");
  assert.equal(await exists(`${node.dataDir}/state`), false, "no state written");
});

nodeTest("snapshot → file written with the marker, original backed up; empty snapshot restores it", {
  make: tempNode,
}, async (node) => {
  const { engine, reports, managed } = await engineFor(node);
  const p = firefoxPolicy({ disableTelemetry: true, homepage: { url: "https://intranet.example/" } });
  engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: false });
  await engine.idle();
  assert.equal(reports.size, 0, "staging alone does not sync (rule 2)");
  engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
  await engine.idle();

  const file = await readFirefoxFile(node);
  assert.ok(file && FIREFOX_MARKER_KEY in file);
  assert.deepEqual(file.policies, {
    DisableTelemetry: true,
    Homepage: { URL: "https://intranet.example/" },
  });
  const report = reports.get(p.id)!;
  assert.equal(report.status, "COMPLIANT", report.message);
  assert.deepEqual(report.items.map((i) => [i.key, i.status]).sort(), [
    ["DisableTelemetry", "COMPLIANT"],
    ["Homepage", "COMPLIANT"],
  ]);
  assert.equal(report.items[0].schemaId, POLICIES_JSON);
  const record = managed.get(POLICIES_JSON)!;
  assert.equal(record.original.existed, true);
  const mode = (await Deno.stat(`${node.root}${POLICIES_JSON}`)).mode! & 0o777;
  assert.equal(mode, 0o644);

  // Rule 1: an empty snapshot empties the cache and undoes everything.
  reports.clear();
  engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
  await engine.idle();
  assert.equal(await Deno.readTextFile(`${node.root}${POLICIES_JSON}`), ORIGINAL_POLICIES);
  assert.equal(managed.list().length, 0);
  assert.equal(reports.size, 0);
  assert.deepEqual(engine.cached(), []);
});

nodeTest("no original: the managed file is removed when the last policy goes (rule 7)", {
  make: () => tempNode({ original: null }),
}, async (node) => {
  const { engine } = await engineFor(node);
  const a = firefoxPolicy({ blockAboutConfig: true });
  const b = firefoxPolicy({ disablePocket: true });
  engine.handleEvent({ kind: "SNAPSHOT", policy: a, snapshotComplete: false });
  engine.handleEvent({ kind: "SNAPSHOT", policy: b, snapshotComplete: true });
  await engine.idle();
  assert.deepEqual((await readFirefoxFile(node))?.policies, {
    BlockAboutConfig: true,
    DisablePocket: true,
  });
  // A snapshot without `a`: only b's key remains (rule 4: recomputed from the whole cache).
  engine.handleEvent({ kind: "SNAPSHOT", policy: b, snapshotComplete: true });
  await engine.idle();
  assert.deepEqual((await readFirefoxFile(node))?.policies, { DisablePocket: true });
  engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
  await engine.idle();
  assert.equal(await exists(`${node.root}${POLICIES_JSON}`), false);
});

nodeTest(
  "CREATED, UPDATED and DELETED set or drop the cache entry and sync (rule 3)",
  { make: tempNode },
  async (node) => {
    const { engine, reports } = await engineFor(node);
    engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
    const p = firefoxPolicy({ disableTelemetry: true }, { id: "p1" });
    engine.handleEvent({ kind: "CREATED", policy: p, snapshotComplete: false });
    await engine.idle();
    assert.deepEqual((await readFirefoxFile(node))?.policies, { DisableTelemetry: true });
    engine.handleEvent({
      kind: "UPDATED",
      policy: firefoxPolicy({ disableTelemetry: false }, { id: "p1", version: 2 }),
      snapshotComplete: false,
    });
    await engine.idle();
    assert.deepEqual((await readFirefoxFile(node))?.policies, { DisableTelemetry: false });
    assert.equal(reports.get("p1")?.status, "COMPLIANT");
    engine.handleEvent({ kind: "DELETED", policy: { ...p, content: "" }, snapshotComplete: false });
    await engine.idle();
    assert.equal(await Deno.readTextFile(`${node.root}${POLICIES_JSON}`), ORIGINAL_POLICIES);
  },
);

nodeTest("a partial snapshot is dropped by resetStaging (reconnect) and never reaches the cache", {
  make: tempNode,
}, async (node) => {
  const { engine } = await engineFor(node);
  const stale = firefoxPolicy({ disablePocket: true });
  engine.handleEvent({ kind: "SNAPSHOT", policy: stale, snapshotComplete: false });
  engine.resetStaging();
  const fresh = firefoxPolicy({ blockAboutProfiles: true });
  engine.handleEvent({ kind: "SNAPSHOT", policy: fresh, snapshotComplete: true });
  await engine.idle();
  assert.deepEqual(engine.cached().map((p) => p.id), [fresh.id]);
  assert.deepEqual((await readFirefoxFile(node))?.policies, { BlockAboutProfiles: true });
});

nodeTest(
  "unsupported type is NON_COMPLIANT and touches nothing (rule 5)",
  { make: tempNode },
  async (node) => {
    const { engine, reports } = await engineFor(node);
    engine.handleEvent({
      kind: "SNAPSHOT",
      policy: { id: "x1", name: "future", type: "Hologram", version: 1, priority: 0, content: "{}" },
      snapshotComplete: true,
    });
    await engine.idle();
    assert.deepEqual(reports.get("x1"), {
      policyId: "x1",
      status: "NON_COMPLIANT",
      message: "unsupported policy type Hologram",
      items: [],
    });
    assert.equal(await Deno.readTextFile(`${node.root}${POLICIES_JSON}`), ORIGINAL_POLICIES);
  },
);

nodeTest("Firefox not installed → INAPPLICABLE and nothing written (enforcement rule 2)", {
  make: () => tempNode({ firefox: false, original: null }),
}, async (node) => {
  const { engine, reports } = await engineFor(node);
  const p = firefoxPolicy({ disableTelemetry: true });
  engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
  await engine.idle();
  assert.equal(reports.get(p.id)?.status, "INAPPLICABLE");
  assert.match(reports.get(p.id)!.message, /Firefox is not installed/);
  assert.equal(await exists(`${node.root}/etc`), false);
});

nodeTest("Flatpak Firefox gets the same file in its extension path; none written there without it", {
  make: () => tempNode({ flatpak: true }),
}, async (node) => {
  const { engine, reports } = await engineFor(node);
  const p = firefoxPolicy({ disableTelemetry: true });
  engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
  await engine.idle();
  const flatpak =
    `${node.root}/var/lib/flatpak/extension/org.mozilla.firefox.systemconfig/${Deno.build.arch}` +
    `/stable/policies/policies.json`;
  assert.equal(await Deno.readTextFile(flatpak), await Deno.readTextFile(`${node.root}${POLICIES_JSON}`));
  assert.equal(reports.get(p.id)?.items.length, 2, "one item per file");
  await Deno.remove(`${node.root}/var/lib/flatpak/app/org.mozilla.firefox`, { recursive: true });
  engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
  await engine.idle();
  assert.equal(await exists(flatpak), false, "Flatpak uninstalled → its managed file is removed");
});

nodeTest("overridden keys are INAPPLICABLE naming the winning policy (enforcement rule 4)", {
  make: tempNode,
}, async (node) => {
  const { engine, reports } = await engineFor(node);
  const high = firefoxPolicy({ disableTelemetry: true }, { id: "b-high", name: "Strict", priority: 10 });
  const low = firefoxPolicy({ disableTelemetry: false, disablePocket: true }, {
    id: "a-low",
    name: "Lenient",
    priority: 1,
  });
  engine.handleEvent({ kind: "SNAPSHOT", policy: low, snapshotComplete: false });
  engine.handleEvent({ kind: "SNAPSHOT", policy: high, snapshotComplete: true });
  await engine.idle();
  assert.deepEqual((await readFirefoxFile(node))?.policies, {
    DisablePocket: true,
    DisableTelemetry: true,
  });
  assert.equal(reports.get("b-high")?.status, "COMPLIANT");
  const lowReport = reports.get("a-low")!;
  assert.equal(lowReport.status, "COMPLIANT", "its remaining key applies");
  const telemetry = lowReport.items.find((i) => i.key === "DisableTelemetry")!;
  assert.equal(telemetry.status, "INAPPLICABLE");
  assert.match(telemetry.message, /overridden by higher-priority policy "Strict" \(b-high, priority 10\)/);
});

nodeTest("read-back: an edited file is NON_COMPLIANT until the next sync restores it (rule 3)", {
  make: tempNode,
}, async (node) => {
  const { engine, reports } = await engineFor(node);
  const p = firefoxPolicy({ disableTelemetry: true, blockAboutConfig: true });
  engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
  await engine.idle();
  const path = `${node.root}${POLICIES_JSON}`;
  const edited = JSON.parse(await Deno.readTextFile(path));
  edited.policies.DisableTelemetry = false;
  await Deno.writeTextFile(path, JSON.stringify(edited));
  // Read back directly (no write): the enforcer reports what is really there.
  const managed = await ManagedFiles.load(node.dataDir, SILENT_LOGGER);
  assert.equal(await managed.isIntact(node.fs, POLICIES_JSON), false);
  const readOnly: Enforcer = {
    ...firefoxEnforcer,
    sync: (policies, io) =>
      firefoxEnforcer.sync(policies, { ...io, writeManaged: () => Promise.resolve(false) }),
  };
  const { engine: probe, reports: probeReports } = await engineFor(node, {
    enforcers: enforcerRegistry([readOnly]),
    managed,
    runner: new Runner(),
  });
  probe.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
  await probe.idle();
  const report = probeReports.get(p.id)!;
  assert.equal(report.status, "NON_COMPLIANT");
  assert.match(report.message, /DisableTelemetry \(expected true, found false\)/);
  // The real sync rewrites it.
  engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
  await engine.idle();
  assert.equal(reports.get(p.id)?.status, "COMPLIANT");
  assert.equal(
    (await readFirefoxFile(node) as { policies: Record<string, unknown> }).policies.DisableTelemetry,
    true,
  );
});

nodeTest(
  "syncs run in the background, one at a time, and requests coalesce (rule 6)",
  { make: tempNode },
  async (node) => {
    let running = 0;
    let maxRunning = 0;
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => release = r);
    const slow: Enforcer = {
      type: "Slow",
      notifiesUsers: false,
      async sync(policies) {
        running++;
        runs++;
        maxRunning = Math.max(maxRunning, running);
        await gate;
        running--;
        return {
          policies: policies.map((p) => ({ policyId: p.id, status: "COMPLIANT", message: "", items: [] })),
          changed: [],
        };
      },
    };
    const { engine } = await engineFor(node, { enforcers: enforcerRegistry([slow]) });
    const policy = { id: "s1", name: "slow", type: "Slow", version: 1, priority: 0, content: "{}" };
    const started = performance.now();
    engine.handleEvent({ kind: "SNAPSHOT", policy, snapshotComplete: true });
    for (let i = 0; i < 5; i++) engine.handleEvent({ kind: "UPDATED", policy, snapshotComplete: false });
    assert.ok(performance.now() - started < 50, "handleEvent does not wait for the sync");
    release();
    await engine.idle();
    assert.equal(maxRunning, 1, "never two syncs at once");
    assert.equal(runs, 2, "five requests during a run coalesce into one follow-up run");
  },
);

nodeTest("no sync runs before the first complete snapshot (managed files of the last run are kept)", {
  make: tempNode,
}, async (node) => {
  const first = await engineFor(node);
  const p = firefoxPolicy({ disableTelemetry: true });
  first.engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
  await first.engine.idle();
  const written = await Deno.readTextFile(`${node.root}${POLICIES_JSON}`);
  // A restarted agent: a sync request (e.g. from the tamper watcher) before the snapshot waits.
  const second = await engineFor(node);
  let finished = false;
  const pending = second.engine.requestSync().then(() => finished = true);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(finished, false);
  assert.equal(await Deno.readTextFile(`${node.root}${POLICIES_JSON}`), written);
  second.engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
  await pending;
  assert.equal(await Deno.readTextFile(`${node.root}${POLICIES_JSON}`), written);
  assert.equal(second.reports.get(p.id)?.status, "COMPLIANT");
});

nodeTest("an enforcer that throws reports ERROR for its policies and other types still sync", {
  make: tempNode,
}, async (node) => {
  const broken: Enforcer = {
    type: "Broken",
    notifiesUsers: false,
    sync: () => Promise.reject(new Error("disk on fire")),
  };
  const { engine, reports } = await engineFor(node, {
    enforcers: enforcerRegistry([broken, firefoxEnforcer]),
  });
  const ff = firefoxPolicy({ disableTelemetry: true });
  engine.handleEvent({
    kind: "SNAPSHOT",
    policy: { id: "b1", name: "b", type: "Broken", version: 1, priority: 0, content: "{}" },
    snapshotComplete: false,
  });
  engine.handleEvent({ kind: "SNAPSHOT", policy: ff, snapshotComplete: true });
  await engine.idle();
  assert.equal(reports.get("b1")?.status, "ERROR");
  assert.equal(reports.get("b1")?.message, "Broken sync failed: disk on fire");
  assert.equal(reports.get(ff.id)?.status, "COMPLIANT");
});

nodeTest("a policy whose typed content is missing is parsed from content (server parse failure)", {
  make: tempNode,
}, async (node) => {
  const { engine, reports } = await engineFor(node);
  const p = firefoxPolicy({ disableTelemetry: true }, { typed: false });
  const broken = { ...firefoxPolicy({ disablePocket: true }, { typed: false }), content: "{not json" };
  engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: false });
  engine.handleEvent({ kind: "SNAPSHOT", policy: broken, snapshotComplete: true });
  await engine.idle();
  assert.equal(reports.get(p.id)?.status, "COMPLIANT");
  assert.equal(reports.get(broken.id)?.status, "ERROR");
  assert.match(reports.get(broken.id)!.message, /rejected by the agent/);
  assert.deepEqual((await readFirefoxFile(node))?.policies, { DisableTelemetry: true });
});
