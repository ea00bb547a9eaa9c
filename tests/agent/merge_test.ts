/**
 * Deterministic priority merge of browser key lists: the outcome never depends on the order the
 * cache holds the policies in; documented tiebreak and additive keys.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { canonicalJson, mergeKeys, readBackItems } from "../../agent/sync/key_merge.ts";
import { browserPolicyValues } from "../../agent/enforcers/browser_enforcer.ts";
import { renderMozillaPolicies } from "../../agent/enforcers/mozilla.ts";
import { firefoxType } from "../../shared/policy_types/firefox.ts";
import { firefoxPolicy } from "./helpers.ts";
import type { CachedPolicy } from "../../agent/sync/types.ts";

function keyed(policies: CachedPolicy[]) {
  return policies.map((policy) => ({ policy, values: browserPolicyValues(firefoxType, policy) }));
}

Deno.test("higher priority wins per key; equal priority → smaller policy id wins", () => {
  const a = firefoxPolicy({ disableTelemetry: false, blockAboutConfig: true }, { id: "a", priority: 5 });
  const b = firefoxPolicy({ disableTelemetry: true }, { id: "b", priority: 5 });
  const c = firefoxPolicy({ blockAboutConfig: false }, { id: "c", priority: 9 });
  const { merged } = mergeKeys(keyed([b, c, a]), firefoxType.mergeRule);
  assert.deepEqual(merged, { BlockAboutConfig: false, DisableTelemetry: false });
});

Deno.test("additive keys: extension lists are unioned without duplicates, entries merged by priority", () => {
  const low = firefoxPolicy({
    extensions: { install: ["https://x/a.xpi", "https://x/b.xpi"] },
    extensionSettings: { "a@x": { installationMode: "allowed" }, "b@x": { installationMode: "blocked" } },
  }, { id: "low", priority: 1 });
  const high = firefoxPolicy({
    extensions: { install: ["https://x/b.xpi", "https://x/c.xpi"] },
    extensionSettings: { "a@x": { installationMode: "force_installed", installUrl: "https://x/a.xpi" } },
    homepage: { url: "https://home.example/" },
  }, { id: "high", priority: 2 });
  const merge = mergeKeys(keyed([low, high]), firefoxType.mergeRule);
  assert.deepEqual(merge.merged.Extensions, {
    Install: ["https://x/b.xpi", "https://x/c.xpi", "https://x/a.xpi"],
  });
  assert.deepEqual(merge.merged.ExtensionSettings, {
    "a@x": { installation_mode: "force_installed", install_url: "https://x/a.xpi" },
    "b@x": { installation_mode: "blocked" },
  });
  // Per-policy read-back: low's a@x entry lost, its b@x entry and its install list are in.
  const items = readBackItems(merge, low, merge.merged, "/etc/firefox/policies/policies.json");
  const byKey = Object.fromEntries(items.map((i) => [i.key, i.status]));
  assert.deepEqual(byKey, {
    "ExtensionSettings.a@x": "INAPPLICABLE",
    "ExtensionSettings.b@x": "COMPLIANT",
    "Extensions.Install": "COMPLIANT",
  });
});

Deno.test("the rendered file is identical for every order of the same policies (property)", () => {
  const pool = [
    firefoxPolicy({ disableTelemetry: true, extensions: { install: ["https://e/1.xpi"] } }, {
      id: "p1",
      priority: 3,
    }),
    firefoxPolicy({ disableTelemetry: false, displayMenuBar: "never" }, { id: "p2", priority: 3 }),
    firefoxPolicy({ displayMenuBar: "always", extensions: { install: ["https://e/2.xpi"] } }, {
      id: "p3",
      priority: 7,
    }),
    firefoxPolicy({ preferences: { "browser.x": { value: { kind: { case: "boolValue", value: true } } } } }, {
      id: "p4",
      priority: 0,
    }),
    firefoxPolicy(
      { preferences: { "browser.x": { value: { kind: { case: "boolValue", value: false } } } } },
      {
        id: "p5",
        priority: 0,
      },
    ),
    firefoxPolicy({
      additional: { LegacySameSiteCookieBehaviorEnabled: { kind: { case: "boolValue", value: true } } },
    }, {
      id: "p6",
      priority: -2,
    }),
  ];
  const expected = renderMozillaPolicies(mergeKeys(keyed(pool), firefoxType.mergeRule).merged);
  fc.assert(
    fc.property(fc.shuffledSubarray(pool, { minLength: pool.length, maxLength: pool.length }), (order) => {
      assert.equal(renderMozillaPolicies(mergeKeys(keyed(order), firefoxType.mergeRule).merged), expected);
    }),
    { numRuns: 200 },
  );
  const merged = JSON.parse(expected).policies;
  assert.equal(merged.DisplayMenuBar, "always", "priority 7 beats 3");
  assert.equal(merged.DisableTelemetry, true, "p1 < p2 at equal priority");
  assert.deepEqual(merged.Extensions.Install, ["https://e/2.xpi", "https://e/1.xpi"]);
  assert.deepEqual(merged.Preferences["browser.x"], { Value: true }, "p4 < p5 at equal priority");
});

Deno.test("canonicalJson ignores key order", () => {
  assert.equal(canonicalJson({ b: 1, a: [{ d: 1, c: 2 }] }), canonicalJson({ a: [{ c: 2, d: 1 }], b: 1 }));
});
