/**
 * The Firefox and Thunderbird enforcers against the policy lists the real installed builds ship (Debian's
 * firefox-esr and thunderbird: omni.ja and application.ini linked into the temp root): a key the installed
 * version does not know is NON_COMPLIANT naming the version; known keys stay COMPLIANT. Skips, saying why,
 * where the packages are not installed.
 */
import assert from "node:assert/strict";
import { typedContentFor } from "../../shared/policy_types/mod.ts";
import { readZipEntry } from "../../agent/enforcers/known_policies.ts";
import type { CachedPolicy } from "../../agent/sync/types.ts";
import { engineFor, type TempNode, tempNode } from "./helpers.ts";

function cached(type: string, content: Record<string, unknown>, id: string): CachedPolicy {
  const text = JSON.stringify(content);
  return {
    id,
    name: id,
    type,
    version: 1,
    priority: 0,
    content: text,
    typed: typedContentFor(type, text)?.value,
  };
}

/** Links (or copies) host files into the node, following symbolic links on the host. */
async function place(node: TempNode, files: Record<string, string>): Promise<void> {
  for (const [nodePath, hostPath] of Object.entries(files)) {
    const target = `${node.root}${nodePath}`;
    await Deno.mkdir(target.slice(0, target.lastIndexOf("/")), { recursive: true });
    const real = await Deno.realPath(hostPath);
    await Deno.link(real, target).catch(() => Deno.copyFile(real, target));
  }
}

const BUILDS = [
  {
    type: "Firefox",
    appDir: "/usr/lib/firefox-esr",
    jar: "browser/omni.ja",
    policies: "/etc/firefox/policies/policies.json",
    known: { DisableTelemetry: true, NoDefaultBookmarks: true },
    unknown: { additional: { NotAFirefoxPolicy: true } },
    unknownKey: "NotAFirefoxPolicy",
  },
  {
    type: "Thunderbird",
    appDir: "/usr/lib/thunderbird",
    jar: "omni.ja",
    policies: "/etc/thunderbird/policies/policies.json",
    known: { DisableTelemetry: true, InAppNotification: { Disabled: true } },
    // A curated setting (marked deprecated in the catalogue) that Thunderbird 153 dropped.
    unknown: { LocalFileLinks: ["https://intranet.example"] },
    unknownKey: "LocalFileLinks",
  },
];

for (const build of BUILDS) {
  Deno.test(`${build.type}: a key the installed ${build.type} does not know is NON_COMPLIANT naming its version`, async () => {
    const jar = `${build.appDir}/${build.jar}`;
    const schema = await readZipEntry(jar, "modules/policies/policies-schema.json").catch(() => undefined);
    if (!schema) {
      console.log(
        `skipped: ${jar} has no policies-schema.json (install the Debian package to run this test)`,
      );
      return;
    }
    const version = /^Version=(.+)$/m.exec(await Deno.readTextFile(`${build.appDir}/application.ini`))![1]
      .trim();
    const node = await tempNode({ firefox: false, original: null });
    try {
      await place(node, {
        [jar]: jar,
        [`${build.appDir}/application.ini`]: `${build.appDir}/application.ini`,
      });
      const { engine, reports } = await engineFor(node);
      engine.handleEvent({
        kind: "SNAPSHOT",
        policy: cached(build.type, { ...build.known, ...build.unknown }, "p"),
        snapshotComplete: true,
      });
      await engine.idle();
      const written = JSON.parse(await Deno.readTextFile(`${node.root}${build.policies}`)).policies;
      assert.ok(build.unknownKey in written, "the key is written; the browser, not svc, ignores it");
      const result = reports.get("p")!;
      assert.equal(result.status, "NON_COMPLIANT", result.message);
      const items = Object.fromEntries(result.items.map((i) => [i.key, i]));
      for (const key of Object.keys(build.known)) assert.equal(items[key].status, "COMPLIANT", key);
      assert.equal(items[build.unknownKey].status, "NON_COMPLIANT");
      assert.equal(
        items[build.unknownKey].message,
        `${build.type} ${version} does not know the policy ${build.unknownKey} (not in its ${jar} schema) and ignores it`,
      );
    } finally {
      await node.cleanup();
    }
  });
}
