/**
 * Directories svc created for a managed file are removed once the last managed file under them goes;
 * directories that existed before, or that hold someone else's files, stay. The record survives a restart
 * (state file).
 */
import assert from "node:assert/strict";
import { SILENT_LOGGER } from "../../agent/log.ts";
import { ManagedFiles } from "../../agent/sync/managed_files.ts";
import { engineFor, firefoxPolicy, nodeTest, syncSnapshot, tempNode } from "./helpers.ts";

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

nodeTest("directories svc created go with the last managed file; existing and shared ones stay", {
  make: () => tempNode({ original: null }),
}, async (node) => {
  await Deno.mkdir(`${node.root}/etc`);
  const { engine } = await engineFor(node);
  await syncSnapshot(engine, firefoxPolicy({ disableTelemetry: true }));
  assert.ok(await exists(`${node.root}/etc/firefox/policies/policies.json`));
  // Someone else's file next to svc's directory: /etc/firefox must stay.
  await Deno.writeTextFile(`${node.root}/etc/firefox/local.txt`, "mine\n");
  // A restarted agent still knows which directories it created.
  const reloaded = await engineFor(node, { managed: await ManagedFiles.load(node.dataDir, SILENT_LOGGER) });
  reloaded.engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
  await reloaded.engine.idle();
  assert.equal(
    await exists(`${node.root}/etc/firefox/policies`),
    false,
    "created by svc, now empty: removed",
  );
  assert.ok(await exists(`${node.root}/etc/firefox/local.txt`), "a directory holding other files stays");
  assert.ok(await exists(`${node.root}/etc`), "a directory that existed before stays");
  const state = JSON.parse(await Deno.readTextFile(`${node.dataDir}/state/managed-files.json`));
  assert.deepEqual(state.createdDirs, [], "nothing left to clean up later");
});

nodeTest("the directories of a file that stops being managed go; those of a file still managed stay", {
  make: () => tempNode({ original: null, flatpak: true }),
}, async (node) => {
  const { engine } = await engineFor(node);
  await syncSnapshot(engine, firefoxPolicy({ disableTelemetry: true }));
  const flatpakFile = node.config.firefox.flatpakPoliciesPath.replace("{arch}", "x86_64");
  const files = JSON.parse(await Deno.readTextFile(`${node.dataDir}/state/managed-files.json`)).files;
  assert.equal(files.length, 2, JSON.stringify(files));
  // Flatpak uninstalled: its file goes, with the directories created for it up to /var/lib/flatpak/extension.
  await Deno.remove(`${node.root}/var/lib/flatpak/app`, { recursive: true });
  engine.handleEvent({
    kind: "UPDATED",
    policy: firefoxPolicy({ disableTelemetry: false }, { id: "again" }),
    snapshotComplete: false,
  });
  await engine.idle();
  assert.equal(await exists(`${node.root}/var/lib/flatpak/extension`), false, flatpakFile);
  assert.ok(await exists(`${node.root}/var/lib/flatpak`), "existed before");
  assert.ok(
    await exists(`${node.root}/etc/firefox/policies/policies.json`),
    "the system file is still managed",
  );
  engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
  await engine.idle();
  assert.equal(await exists(`${node.root}/etc`), false, "svc created /etc in this empty root");
});
