/** The README's configuration table is generated from the key list: it names every key, once, as loaded. */
import assert from "node:assert/strict";
import { CONFIG_KEYS, envNameFor } from "../../server/config/config.ts";
import {
  renderConfigTable,
  TABLE_END,
  TABLE_START,
  undocumentedKeys,
} from "../../server/config/config_table.ts";

function rows(table: string): string[][] {
  return table.trim().split("\n").slice(2).map((l) => l.split("|").slice(1, -1).map((c) => c.trim()));
}

Deno.test("every configuration key has a line of meaning, and no line describes a key that is gone", () => {
  const { missing, stale } = undocumentedKeys();
  assert.deepEqual(
    { missing, stale },
    { missing: [], stale: [] },
    "edit CONFIG_DOCS in server/config/config_table.ts",
  );
});

Deno.test("README's configuration table is exactly the generated one (run deno task docs:config)", async () => {
  const readme = await Deno.readTextFile(new URL("../../README.md", import.meta.url));
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  assert.ok(start >= 0 && end > start, "README.md keeps the table markers");
  const inReadme = rows(readme.slice(start + TABLE_START.length, end));
  const generated = rows(renderConfigTable());
  assert.deepEqual(inReadme, generated, "README.md's table is stale: run deno task docs:config");
  assert.deepEqual(
    inReadme.map((r) => [r[0], r[1]]),
    CONFIG_KEYS.map((k) => [`\`${k.key}\``, `\`${envNameFor(k)}\``]),
    "one row per key, with the environment variable the loader reads",
  );
});
