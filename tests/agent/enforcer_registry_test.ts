/**
 * The lazy enforcer registry: every line's declared traits (what the engine reads before loading) match
 * the loaded module, and each type appears once. (What lazy loading saves is measured by
 * bench/agent_footprint.ts.)
 */
import assert from "node:assert/strict";
import { ENFORCERS } from "../../agent/enforcers/mod.ts";
import type { LazyEnforcer } from "../../agent/enforcers/lazy.ts";

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
  }
});
