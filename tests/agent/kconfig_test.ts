/**
 * The Kconfig enforcer on a temp root that has KDE Plasma (a plasmashell marker), read back with KDE's real
 * reader `kreadconfig5` (Debian libkf5config-bin) the way a session reads it: system files under
 * XDG_CONFIG_DIRS, a user configuration that tries to override every key. Values, immutability, merge by
 * priority, URL rules renumbered, escaping of hostile values, refusal of hostile names, no KDE →
 * INAPPLICABLE, no policy → no side effect.
 */
import assert from "node:assert/strict";
import { KconfigPolicySchema, KconfigUrlAction } from "../../shared/gen/svc/policy/v1/kconfig_pb.ts";
import { TamperWatcher } from "../../agent/tamper.ts";
import { kconfigEnforcer } from "../../agent/enforcers/kconfig.ts";
import { parseKconfigFile } from "../../shared/kconfig_format.ts";
import {
  assertHostileRefused,
  engineFor,
  kdeNode,
  nodeTest,
  noWritesIO,
  policyMaker,
  type TempNode,
  tempNode,
  untilRestored,
  watchedEngine,
} from "./helpers.ts";
import { Runner } from "../../agent/runner.ts";

const haveReader = await Deno.stat("/usr/bin/kreadconfig5").then(() => true, () => false);
if (!haveReader) {
  console.warn(
    "kreadconfig5 missing (Debian libkf5config-bin, installed by .ci/run): KDE reader tests skipped",
  );
}

const kconfigPolicy = policyMaker(KconfigPolicySchema, "Kconfig", "kconfig");

/** kreadconfig5 as a user session whose own config tries to override `userFiles`. */
async function kread(
  node: TempNode,
  userFiles: Record<string, string>,
  file: string,
  groups: string[],
  key: string,
) {
  const home = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${home}/.config`);
    for (const [name, text] of Object.entries(userFiles)) {
      await Deno.writeTextFile(`${home}/.config/${name}`, text);
    }
    const out = await new Deno.Command("kreadconfig5", {
      args: ["--file", file, ...groups.flatMap((g) => ["--group", g]), "--key", key],
      env: { XDG_CONFIG_DIRS: `${node.root}/etc/xdg`, XDG_CONFIG_HOME: `${home}/.config`, HOME: home },
      stdout: "piped",
    }).output();
    return new TextDecoder().decode(out.stdout).replace(/\n$/, "");
  } finally {
    await Deno.remove(home, { recursive: true });
  }
}

nodeTest(
  "kconfig: values and immutability as KDE's reader sees them; merge by priority; URL rules renumbered",
  { make: kdeNode, ignore: !haveReader },
  async (node) => {
    const { engine, reports } = await engineFor(node);
    const high = kconfigPolicy({
      entries: [
        { file: "kscreenlockerrc", group: "Daemon", key: "Timeout", value: "5", immutable: true },
        { file: "kdeglobals", group: "Icons", key: "Theme", value: "breeze-dark" },
        {
          file: "plasma-org.kde.plasma.desktop-appletsrc",
          group: "Containments",
          subgroups: ["1", "Wallpaper", "org.kde.image", "General"],
          key: "Image",
          value: "file:///usr/share/wallpapers/corp.png",
          immutable: true,
        },
      ],
      actionRestrictions: { shell_access: false },
      urlRestrictions: [{ action: KconfigUrlAction.OPEN, protocol: "file", allow: false }],
    }, { priority: 20, name: "high" });
    const low = kconfigPolicy({
      entries: [
        { file: "kscreenlockerrc", group: "Daemon", key: "Timeout", value: "30", immutable: true },
        // Hostile-looking value: escaped, read back literally by KDE.
        { file: "kwinrc", group: "Windows", key: "Note", value: " a\\b [Evil] x=$HOME #c " },
      ],
      urlRestrictions: [{ action: KconfigUrlAction.LIST, protocol: "smb", allow: false }],
      kcmRestrictions: ["kcm_kscreen"],
    }, { priority: 10, name: "low" });
    engine.handleEvent({ kind: "SNAPSHOT", policy: high, snapshotComplete: false });
    engine.handleEvent({ kind: "SNAPSHOT", policy: low, snapshotComplete: true });
    await engine.idle();

    const rh = reports.get(high.id)!;
    assert.equal(rh.status, "COMPLIANT", JSON.stringify(rh.items, null, 1));
    const rl = reports.get(low.id)!;
    const timeout = rl.items.find((i) => i.key === "[Daemon] Timeout")!;
    assert.equal(timeout.status, "INAPPLICABLE");
    assert.match(timeout.message, /"high"; applied value: 5 \(immutable\)/);
    assert.equal(rl.status, "COMPLIANT", JSON.stringify(rl.items, null, 1));

    // A user who sets the locked keys themselves still gets the policy's values.
    const user = {
      kscreenlockerrc: "[Daemon]\nTimeout=99\n",
      kdeglobals: "[Icons]\nTheme=oxygen\n[KDE Action Restrictions]\nshell_access=true\n",
      kwinrc: "[Windows]\nNote=user\n",
    };
    assert.equal(await kread(node, user, "kscreenlockerrc", ["Daemon"], "Timeout"), "5");
    assert.equal(
      await kread(node, user, "kdeglobals", ["KDE Action Restrictions"], "shell_access"),
      "false",
    );
    // Not immutable: the user's own value wins, the system one is the default.
    assert.equal(await kread(node, user, "kdeglobals", ["Icons"], "Theme"), "oxygen");
    assert.equal(await kread(node, {}, "kdeglobals", ["Icons"], "Theme"), "breeze-dark");
    assert.equal(await kread(node, {}, "kwinrc", ["Windows"], "Note"), " a\\b [Evil] x=$HOME #c ");
    assert.equal(await kread(node, {}, "kwinrc", ["Evil"], "x"), "");
    assert.equal(
      await kread(node, {}, "plasma-org.kde.plasma.desktop-appletsrc", [
        "Containments",
        "1",
        "Wallpaper",
        "org.kde.image",
        "General",
      ], "Image"),
      "file:///usr/share/wallpapers/corp.png",
    );
    // URL rules: the lower priority first, the higher one last (it wins), one count.
    assert.equal(
      await kread(node, {}, "kdeglobals", ["KDE URL Restrictions"], "rule_1"),
      "list,,,,smb,,,false",
    );
    assert.equal(
      await kread(node, {}, "kdeglobals", ["KDE URL Restrictions"], "rule_2"),
      "open,,,,file,,,false",
    );
    assert.equal(await kread(node, {}, "kdeglobals", ["KDE URL Restrictions"], "rule_count"), "2");
    for (const f of ["kde5rc", "kde6rc"]) {
      const text = await Deno.readTextFile(`${node.root}/etc/${f}`);
      assert.match(text, /\[KDE Control Module Restrictions\]\[\$i\]\nkcm_kscreen=false\n/);
    }
    // Deterministic: the same policies give the same bytes.
    const before = await Deno.readTextFile(`${node.root}/etc/xdg/kdeglobals`);
    engine.handleEvent({ kind: "SNAPSHOT", policy: low, snapshotComplete: false });
    engine.handleEvent({ kind: "SNAPSHOT", policy: high, snapshotComplete: true });
    await engine.idle();
    assert.equal(await Deno.readTextFile(`${node.root}/etc/xdg/kdeglobals`), before);

    engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
    await engine.idle();
    const left = await Array.fromAsync(Deno.readDir(`${node.root}/etc/xdg`)).catch(() => []);
    assert.deepEqual(left, [], "no svc file is left in /etc/xdg");
    assert.equal(await Deno.stat(`${node.root}/etc/kde5rc`).catch(() => undefined), undefined);
  },
);

nodeTest("kconfig: hostile names forced past the server are refused by the agent; nothing is written", {
  make: kdeNode,
}, async (node) => {
  const { engine, reports } = await engineFor(node);
  const hostile: Record<string, unknown>[] = [
    { entries: [{ file: "kdeglobals", group: "Icons]\n[KDE Action Restrictions", key: "k", value: "v" }] },
    { entries: [{ file: "kdeglobals", group: "Icons", key: "Theme[$i]", value: "v" }] },
    { entries: [{ file: "kdeglobals", group: "Icons", key: "a=b", value: "v" }] },
    { entries: [{ file: "kdeglobals", group: "Icons", key: "$HOME", value: "v" }] },
    { entries: [{ file: "../../etc/passwd", group: "g", key: "k", value: "v" }] },
    { entries: [{ file: "kde5rc", group: "g", key: "k", value: "v" }] },
    { entries: [{ file: "mimeapps.list", group: "g", key: "k", value: "v" }] },
    { entries: [{ file: "kdeglobals", group: "g", key: "k", value: "a\u0000b" }] },
    { entries: [{ file: "kdeglobals", group: "g", key: "k", value: "v\n[$i]\nevil=1" }] },
    { action_restrictions: { "shell_access]\n[x": false } },
    { url_restrictions: [{ action: "KCONFIG_URL_ACTION_OPEN", host: "a,b" }] },
    { kcm_restrictions: ["kcm\n[x]"] },
  ];
  await assertHostileRefused(engine, reports, "Kconfig", hostile);
  assert.equal(await Deno.stat(`${node.root}/etc`).catch(() => undefined), undefined);
});

nodeTest(
  "kconfig: a node without KDE reports INAPPLICABLE and nothing is written; no policy, no side effect",
  { make: () => tempNode({ firefox: false, original: null }) },
  async (node) => {
    const { engine, reports } = await engineFor(node);
    const p = kconfigPolicy({ actionRestrictions: { shell_access: false } });
    engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
    await engine.idle();
    assert.equal(reports.get(p.id)!.status, "INAPPLICABLE");
    assert.match(reports.get(p.id)!.message, /KDE Plasma is not installed/);
    assert.equal(await Deno.stat(`${node.root}/etc`).catch(() => undefined), undefined);
    const result = await kconfigEnforcer.sync([], noWritesIO(node, (await engineFor(node)).runner));
    assert.deepEqual(result, { policies: [], changed: [] });
  },
);

nodeTest("kconfig: a change asks users to log in again (notifying type); an unchanged resync does not", {
  make: kdeNode,
}, async (node) => {
  const changed: string[][] = [];
  const { engine } = await engineFor(node, {
    onSynced: (summary) => {
      changed.push(
        [...summary.changed.keys()].filter((t) => t === "Kconfig" && kconfigEnforcer.notifiesUsers),
      );
    },
  });
  const p = kconfigPolicy({ resourceRestrictions: { wallpaper: false } });
  engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
  await engine.idle();
  engine.handleEvent({ kind: "UPDATED", policy: p, snapshotComplete: false });
  await engine.idle();
  assert.deepEqual(changed, [["Kconfig"], []]);
});

Deno.test("kconfig: an original /etc/xdg file is backed up and put back; a tampered file is restored", async () => {
  const node = await kdeNode();
  let watcher: TamperWatcher | undefined;
  try {
    const original = "[Windows]\nBorderlessMaximizedWindows=false\n";
    await Deno.mkdir(`${node.root}/etc/xdg`, { recursive: true });
    await Deno.writeTextFile(`${node.root}/etc/xdg/kwinrc`, original);
    const watched = await watchedEngine(node, { recordAtTamper: true });
    watcher = watched.watcher;
    const { engine, events } = watched;
    const p = kconfigPolicy({
      entries: [{
        file: "kwinrc",
        group: "Windows",
        key: "BorderlessMaximizedWindows",
        value: "true",
        immutable: true,
      }],
    });
    engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
    await engine.idle();
    const path = `${node.root}/etc/xdg/kwinrc`;
    const written = await Deno.readTextFile(path);
    assert.match(written, /\[Windows\]\[\$i\]\nBorderlessMaximizedWindows=true/);

    await Deno.writeTextFile(path, "[Windows]\nBorderlessMaximizedWindows=false\n");
    await untilRestored(engine, path, written, () => events.length > 0);
    assert.deepEqual(events.map((e) => e.path), ["/etc/xdg/kwinrc"]);
    assert.equal(await Deno.readTextFile(path), written);

    engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
    await engine.idle();
    assert.equal(await Deno.readTextFile(path), original);
  } finally {
    await watcher?.close();
    await node.cleanup();
  }
});

Deno.test("kconfig: without kreadconfig the agent's own parser reads values and immutability back", async () => {
  const node = await kdeNode();
  const empty = await Deno.makeTempDir();
  try {
    // No KDE reader on the runner's PATH (the process environment stays untouched: test modules share it).
    const { engine, reports, runner } = await engineFor(node, { runner: new Runner({ path: empty }) });
    const p = kconfigPolicy({
      entries: [
        {
          file: "kwinrc",
          group: "Windows",
          key: "BorderlessMaximizedWindows",
          value: "true",
          immutable: true,
        },
        { file: "kwinrc", group: "Windows", key: "Placement", value: " Smart\\ " },
      ],
      kcmRestrictions: ["kcm_kscreen"],
    });
    engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: true });
    await engine.idle();
    const r = reports.get(p.id)!;
    assert.equal(r.status, "COMPLIANT", JSON.stringify(r.items));
    assert.equal(r.items.length, 4);
    assert.deepEqual(runner.history, [], "no reader was run");
    // A hand edit that drops the immutability marker is seen by the parser too.
    const file = `${node.root}/etc/xdg/kwinrc`;
    const text = await Deno.readTextFile(file);
    await Deno.writeTextFile(
      file,
      text.replace("BorderlessMaximizedWindows[$i]", "BorderlessMaximizedWindows"),
    );
    const parsed = parseKconfigFile(await Deno.readTextFile(file)).get("Windows")!;
    assert.equal(parsed.get("BorderlessMaximizedWindows")!.immutable, false);
    assert.equal(parsed.get("Placement")!.value, " Smart\\ ");
  } finally {
    await Deno.remove(empty, { recursive: true });
    await node.cleanup();
  }
});
