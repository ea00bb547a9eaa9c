/**
 * The GSettings catalogue the agent reports: extends/override inheritance, vendor default overrides, enums,
 * flags, ranges, choices, relocatable schemas; reported once, then again only when the schemas directory
 * changes.
 */
import assert from "node:assert/strict";
import { GSettingsCatalogueReporter, type SchemaCatalogueReport } from "../../agent/catalogue.ts";
import { nodeTest, tempNode } from "./helpers.ts";

const SCHEMAS = "/usr/share/glib-2.0/schemas";
const XML = `<?xml version="1.0"?>
<schemalist>
  <enum id="org.example.Mode"><value nick="off" value="0"/><value nick="on" value="1"/></enum>
  <flags id="org.example.Parts"><value nick="a" value="1"/><value nick="b" value="2"/></flags>
  <schema id="org.example.base" path="/org/example/base/">
    <key name="mode" enum="org.example.Mode"><default>'off'</default><summary>The
      mode</summary></key>
    <key name="parts" flags="org.example.Parts"><default>[]</default></key>
    <key name="delay" type="u"><default>5</default><range min="1" max="60"/></key>
    <key name="size" type="s"><choices><choice value="small"/><choice value="big"/></choices><default>'small'</default></key>
  </schema>
  <schema id="org.example.derived" path="/org/example/derived/" extends="org.example.base">
    <override name="delay">10</override>
    <key name="extra" type="b"><default>false</default></key>
  </schema>
  <schema id="org.example.profile">
    <key name="name" type="s"><default>''</default></key>
  </schema>
</schemalist>
`;

nodeTest("GSettings catalogue: inheritance, vendor overrides, constraints; re-reported only on change", {
  make: () => tempNode({ firefox: false, original: null }),
}, async (node) => {
  await Deno.mkdir(`${node.root}${SCHEMAS}`, { recursive: true });
  await Deno.writeTextFile(`${node.root}${SCHEMAS}/org.example.gschema.xml`, XML);
  await Deno.writeTextFile(
    `${node.root}${SCHEMAS}/20_vendor.gschema.override`,
    "[org.example.base]\nsize='big'\n",
  );
  const sent: SchemaCatalogueReport[] = [];
  const reporter = new GSettingsCatalogueReporter();
  const send = (r: SchemaCatalogueReport) => {
    sent.push(r);
    return Promise.resolve();
  };
  assert.equal(await reporter.reportIfChanged(node.fs, send), "sent");
  const byId = new Map(sent[0].schemas.map((s) => [s.schemaId, s]));
  const base = byId.get("org.example.base")!;
  const key = (s: typeof base, n: string) => s.keys.find((k) => k.name === n)!;
  assert.deepEqual(key(base, "mode").enumValues, [{ nick: "off", value: 0 }, { nick: "on", value: 1 }]);
  assert.equal(key(base, "mode").type, "s");
  assert.equal(key(base, "mode").summary, "The mode");
  assert.equal(key(base, "parts").type, "as");
  assert.equal(key(base, "parts").flags, true);
  assert.deepEqual([key(base, "delay").rangeMin, key(base, "delay").rangeMax], ["1", "60"]);
  assert.deepEqual(key(base, "size").choices, ["small", "big"]);
  assert.equal(key(base, "size").defaultValue, "'big'", "vendor override applies");
  const derived = byId.get("org.example.derived")!;
  assert.deepEqual(derived.keys.map((k) => k.name), ["delay", "extra", "mode", "parts", "size"]);
  assert.equal(key(derived, "delay").defaultValue, "10");
  assert.equal(byId.get("org.example.profile")!.relocatable, true);

  assert.equal(await reporter.reportIfChanged(node.fs, send), "unchanged");
  assert.equal(sent.length, 1);
  await Deno.writeTextFile(
    `${node.root}${SCHEMAS}/org.other.gschema.xml`,
    `<schemalist><schema id="org.other" path="/org/other/"><key name="k" type="b"><default>true</default></key></schema></schemalist>`,
  );
  assert.equal(await reporter.reportIfChanged(node.fs, send), "sent");
  assert.ok(sent[1].schemas.some((s) => s.schemaId === "org.other"));

  // A failed send is retried at the next call.
  await Deno.remove(`${node.root}${SCHEMAS}/org.other.gschema.xml`);
  await assert.rejects(reporter.reportIfChanged(node.fs, () => Promise.reject(new Error("offline"))));
  assert.equal(await reporter.reportIfChanged(node.fs, send), "sent");
});
