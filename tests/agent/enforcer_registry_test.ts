/**
 * The lazy enforcer registry: every line's declared traits (what the engine reads before loading) match
 * the loaded module, and each type appears once. (What lazy loading saves is measured by
 * bench/agent_footprint.ts.)
 */
import assert from "node:assert/strict";
import { enforcerRegistry, ENFORCERS, lazyEnforcers } from "../../agent/enforcers/mod.ts";
import type { LazyEnforcer } from "../../agent/enforcers/lazy.ts";
import type { EnforcerIO } from "../../agent/sync/types.ts";
import { engineFor, nodeTest, tempNode } from "./helpers.ts";

Deno.test("every registry line declares the traits of the enforcer it loads", async () => {
  const types = ENFORCERS.map((e) => e.type);
  assert.equal(new Set(types).size, types.length, `a type is registered twice: ${types}`);
  for (const entry of ENFORCERS) {
    const lazy = entry as Partial<LazyEnforcer>;
    const real = lazy.load ? await lazy.load() : entry;
    assert.equal(real.type, entry.type);
    assert.equal(entry.notifiesUsers, real.notifiesUsers, `${entry.type}: notifiesUsers`);
    assert.equal(entry.background ?? false, real.background ?? false, `${entry.type}: background`);
    assert.equal(entry.hasResidue !== undefined, real.hasResidue !== undefined, `${entry.type}: residue`);
    assert.deepEqual(entry.companions ?? [], real.companions ?? [], `${entry.type}: companions`);
  }
});

nodeTest("an idle agent's syncs load no enforcer module; Flatpak loads once svc recorded installs", {
  make: tempNode,
}, async (node) => {
  const enforcers = lazyEnforcers();
  const { engine } = await engineFor(node, { enforcers: enforcerRegistry(enforcers) });
  // An empty snapshot is synced like any other: types without policies are asked about residue.
  engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
  await engine.idle();
  await engine.requestSync();
  assert.deepEqual(enforcers.filter((e) => e.loaded()).map((e) => e.type), []);

  const flatpak = enforcers.find((e) => e.type === "Flatpak")!;
  const io = { config: node.config } as EnforcerIO;
  assert.equal(await flatpak.hasResidue!(io), false);
  assert.equal(flatpak.loaded(), false);
  await Deno.mkdir(`${node.dataDir}/state`, { recursive: true });
  await Deno.writeTextFile(
    `${node.dataDir}/state/flatpak.json`,
    JSON.stringify({ version: 1, remotes: {}, refs: ["app/org.example.App/x86_64/stable"] }),
  );
  assert.equal(await flatpak.hasResidue!(io), true);
  assert.equal(flatpak.loaded(), true);
});
