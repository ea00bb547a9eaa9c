/**
 * Catalogues from this machine's real GSettings schemas and polkit actions (copied under a temp
 * root), and the XML reader's refusal of DTD tricks.
 */
import assert from "node:assert/strict";
import { RootFs } from "../../agent/fs.ts";
import {
  POLKIT_ACTIONS_DIR,
  scanGSettingsSchemas,
  scanPolkitActions,
  SCHEMAS_DIR,
} from "../../agent/catalogue.ts";
import { parseXml, XmlError } from "../../agent/xml.ts";

async function copyDir(from: string, to: string): Promise<boolean> {
  try {
    await Deno.stat(from);
  } catch {
    return false;
  }
  await Deno.mkdir(to, { recursive: true });
  for await (const entry of Deno.readDir(from)) {
    // Links count as files (Debian's firewalld installs its .policy as a link to one of two variants).
    if (entry.isFile || entry.isSymlink) await Deno.copyFile(`${from}/${entry.name}`, `${to}/${entry.name}`);
  }
  return true;
}

Deno.test("GSettings schemas and polkit actions of this machine are catalogued", async (t) => {
  const root = await Deno.makeTempDir();
  try {
    const fs = await RootFs.open(root);
    assert.equal(await scanGSettingsSchemas(fs), undefined, "no directory → no catalogue");
    assert.equal(await scanPolkitActions(fs), undefined);

    await t.step("schemas", async () => {
      if (!(await copyDir(SCHEMAS_DIR, `${root}${SCHEMAS_DIR}`))) {
        return console.warn(
          `skipped: ${SCHEMAS_DIR} does not exist on this machine (install gsettings-desktop-schemas)`,
        );
      }
      const schemas = (await scanGSettingsSchemas(fs))!;
      let expected = 0;
      for await (const e of Deno.readDir(SCHEMAS_DIR)) {
        if (e.name.endsWith(".gschema.xml")) {
          expected +=
            (await Deno.readTextFile(`${SCHEMAS_DIR}/${e.name}`)).match(/<schema\s[^>]*id=/g)?.length ?? 0;
        }
      }
      assert.equal(schemas.length, expected);
      const background = schemas.find((s) => s.schemaId === "org.gnome.desktop.background");
      if (background) {
        assert.equal(background.path, "/org/gnome/desktop/background/");
        assert.equal(background.relocatable, false);
        const options = background.keys.find((k) => k.name === "picture-options")!;
        assert.equal(options.type, "s", "enum keys are strings");
        assert.ok(options.enumValues.some((v) => v.nick === "zoom"));
        assert.equal(options.defaultValue, "'zoom'");
      }
    });

    await t.step("polkit actions", async () => {
      if (!(await copyDir(POLKIT_ACTIONS_DIR, `${root}${POLKIT_ACTIONS_DIR}`))) {
        return console.warn(
          `skipped: ${POLKIT_ACTIONS_DIR} does not exist on this machine (install polkitd)`,
        );
      }
      const actions = (await scanPolkitActions(fs))!;
      const ids = new Set<string>();
      for await (const e of Deno.readDir(POLKIT_ACTIONS_DIR)) {
        if (!e.name.endsWith(".policy")) continue;
        for (
          const m of (await Deno.readTextFile(`${POLKIT_ACTIONS_DIR}/${e.name}`)).matchAll(
            /<action id="([^"]+)"/g,
          )
        ) {
          ids.add(m[1]);
        }
      }
      assert.deepEqual(actions.map((a) => a.actionId), [...ids].sort());
      const powerOff = actions.find((a) => a.actionId === "org.freedesktop.login1.power-off");
      if (powerOff) {
        assert.equal(powerOff.defaultActive, "yes");
        assert.ok(powerOff.description.length > 0 && !powerOff.description.includes("<"));
      }
    });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("XML reader: entities are not expanded, internal DTD subsets refused, malformed input rejected", () => {
  const laughs =
    `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]><a>&lol2;</a>`;
  assert.throws(() => parseXml(laughs), /internal subset/);
  const xxe = `<!DOCTYPE a SYSTEM "file:///etc/passwd"><a>&xxe; &lt;b&gt; &#65;&#x42;</a>`;
  assert.equal(parseXml(xxe).text, "&xxe; <b> AB");
  for (const bad of ["<a><b></a>", "<a>", "text", "<a></a><b></b>", '<a x="1></a>', "<a x=1></a>"]) {
    assert.throws(() => parseXml(bad), XmlError, bad);
  }
  assert.throws(() => parseXml("<a>".repeat(300) + "</a>".repeat(300)), /nested too deeply/);
  const doc = parseXml(`<r><k n="1">one<![CDATA[<two>]]></k><!-- c --><k n="2"/></r>`);
  assert.deepEqual(doc.children.map((c) => [c.attrs.n, c.text]), [["1", "one<two>"], ["2", ""]]);
});
