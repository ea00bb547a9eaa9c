/**
 * The shared hostile-string corpus against both desktop types, at both trust boundaries:
 *
 * - the server's validation (`validatePolicyContent`) refuses every hostile string in every Dconf and Kconfig
 *   name (schema id, dconf path, key, database, profile; KDE file, group, key) wherever it sits in a valid
 *   value, and every line-breaking or invisible one in a value;
 * - content forced past the server into the agent's cache is refused by the agent (ERROR "rejected by the
 *   agent"), and nothing is written and no tool runs;
 * - the hostile strings a Kconfig value may carry (all but U+FEFF, which KDE's reader drops and the rules refuse) (quotes, `$`, `[x]`, `=`, `#`, backslashes, …) are written
 *   escaped and KDE's own reader (`kreadconfig5`) gives each back literally, with no extra group or key.
 */
import assert from "node:assert/strict";
import { validatePolicyContent } from "../../shared/policy_types/mod.ts";
import {
  embedded,
  HOSTILE_STRINGS,
  type HostileClass,
  type HostileString,
  INVISIBLE_OR_INVALID,
  LINE_BREAKING,
} from "../helpers/hostile_strings.ts";
import type { CachedPolicy } from "../../agent/sync/types.ts";
import { engineFor, kdeNode, nodeTest, type TempNode } from "./helpers.ts";

const has = (h: HostileString, classes: readonly HostileClass[]) =>
  h.classes.some((c) => classes.includes(c));
const MUST_STAY_ON_ONE_LINE = [...LINE_BREAKING, ...INVISIBLE_OR_INVALID];

/** A Dconf content with `field` of its one entry (or the policy) set to `value`. */
function dconfContent(field: string, value: string): Record<string, unknown> {
  const entry: Record<string, unknown> = {
    schema_id: "org.gnome.desktop.screensaver",
    key: "lock-delay",
    value: "uint32 300",
  };
  const content: Record<string, unknown> = { entries: [entry] };
  if (field === "db_name" || field === "profile") content[field] = value;
  else entry[field] = value;
  return content;
}

/** A Kconfig content with `field` of its one entry set to `value`. */
function kconfigContent(field: string, value: string): Record<string, unknown> {
  const entry: Record<string, unknown> = {
    file: "kdeglobals",
    group: "Icons",
    key: "Theme",
    value: "breeze",
  };
  entry[field] = value;
  return { entries: [entry] };
}

/** Every (label, content) the server must refuse. */
function hostileContents(): { label: string; type: "Dconf" | "Kconfig"; content: Record<string, unknown> }[] {
  const out: { label: string; type: "Dconf" | "Kconfig"; content: Record<string, unknown> }[] = [];
  const names: [
    "Dconf" | "Kconfig",
    string,
    string,
    (field: string, v: string) => Record<string, unknown>,
    HostileClass[],
  ][] = [
    ["Dconf", "schema_id", "org.gnome.desktop.screensaver", dconfContent, []],
    ["Dconf", "key", "lock-delay", dconfContent, []],
    // Inside a dconf path, "../" only makes a component such as "g../nome" (refused as ".." alone elsewhere).
    ["Dconf", "path", "/org/gnome/", dconfContent, ["path"]],
    ["Dconf", "db_name", "local", dconfContent, []],
    ["Dconf", "profile", "user", dconfContent, []],
    ["Kconfig", "file", "kdeglobals", kconfigContent, []],
    // Group and key names may hold quotes, '*', '~', '/' (keys only) and inner spaces: harmless there.
    ["Kconfig", "group", "Icons", kconfigContent, ["quote", "markup", "path", "zero-width", "shell"]],
    ["Kconfig", "key", "Theme", kconfigContent, ["quote", "markup", "path", "zero-width", "shell"]],
  ];
  for (const [type, field, valid, make, harmless] of names) {
    for (const h of HOSTILE_STRINGS) {
      const mustRefuse = has(h, MUST_STAY_ON_ONE_LINE) || has(h, ["ini", "backslash", "over-long"]) ||
        !has(h, harmless);
      if (!mustRefuse) continue;
      for (const value of embedded(h, valid)) {
        if (value === valid || (value === "" && (field === "db_name" || field === "profile"))) continue;
        // An option-like value is hostile at the start of a name only ("lock-delay--" is a fine dconf key).
        if (h.classes.every((c) => c === "option") && !value.startsWith("-")) continue;
        if (type === "Kconfig" && !has(h, [...MUST_STAY_ON_ONE_LINE, "ini", "backslash", "over-long"])) {
          // Names may contain most punctuation; refused are what breaks the format, what no KDE name uses
          // ('|', '<', '>', '`', '..'), a leading '-' (an option to kreadconfig), and '/' in a group or at
          // the ends of a key (Kiosk keys such as action/logout use it inside).
          const refusedInName = /[[\]=$\\#;|<>`]|\.\.|^-/.test(value) || value.trim() !== value ||
            value === "" || (field === "group" ? value.includes("/") : /^\/|\/$|\/\//.test(value));
          if (!refusedInName) continue;
        }
        if (
          type === "Dconf" && field === "path" && !has(h, MUST_STAY_ON_ONE_LINE) &&
          !/[^A-Za-z0-9_.:/-]/.test(value)
        ) {
          continue;
        }
        out.push({
          label: `${type}.${field} ← ${h.name}: ${JSON.stringify(value).slice(0, 60)}`,
          type,
          content: make(field, value),
        });
      }
    }
  }
  // Values: everything that could leave the line, in any position; raw (unquoted) text around a GVariant.
  for (const h of HOSTILE_STRINGS) {
    if (has(h, MUST_STAY_ON_ONE_LINE)) {
      for (const value of embedded(h, "'Adwaita'")) {
        out.push({ label: `Dconf.value ← ${h.name}`, type: "Dconf", content: dconfContent("value", value) });
      }
      for (const value of embedded(h, "breeze")) {
        out.push({
          label: `Kconfig.value ← ${h.name}`,
          type: "Kconfig",
          content: kconfigContent("value", value),
        });
      }
    } else if (h.value.trim() !== "") {
      for (const value of [h.value, `${h.value}'Adwaita'`, `'Adwaita'${h.value}`]) {
        out.push({
          label: `Dconf.value ← raw ${h.name}`,
          type: "Dconf",
          content: dconfContent("value", value),
        });
      }
    }
  }
  for (const value of embedded({ name: "BOM", value: "\ufeff", classes: ["zero-width"] }, "breeze")) {
    out.push({ label: "Kconfig.value ← U+FEFF", type: "Kconfig", content: kconfigContent("value", value) });
  }
  return out;
}

const CASES = hostileContents();

Deno.test(`desktop types: the server refuses ${CASES.length} hostile contents, naming the field`, () => {
  const accepted = CASES.filter(({ type, content }) =>
    validatePolicyContent(type, JSON.stringify(content)).length === 0
  );
  assert.deepEqual(accepted.map((c) => c.label), []);
});

nodeTest(
  "desktop types: the same contents forced past the server are refused by the agent; nothing is written",
  { make: kdeNode },
  async (node) => {
    const { engine, reports, runner } = await engineFor(node);
    const policies: CachedPolicy[] = CASES.map((c, i) => ({
      id: `h${String(i).padStart(5, "0")}`,
      name: c.label,
      type: c.type,
      version: 1,
      priority: i,
      content: JSON.stringify(c.content),
    }));
    policies.forEach((policy, i) =>
      engine.handleEvent({ kind: "SNAPSHOT", policy, snapshotComplete: i === policies.length - 1 })
    );
    await engine.idle();
    const notRefused = policies.filter((p) => {
      const r = reports.get(p.id);
      return r?.status !== "ERROR" || !/rejected by the agent/.test(r.message);
    });
    assert.deepEqual(notRefused.map((p) => `${p.name} → ${JSON.stringify(reports.get(p.id))}`), []);
    assert.equal(await Deno.stat(`${node.root}/etc`).catch(() => undefined), undefined, "nothing under /etc");
    assert.deepEqual(runner.history.map((c) => c.cmd), [], "no tool ran");
  },
);

const haveReader = await Deno.stat("/usr/bin/kreadconfig5").then(() => true, () => false);
if (!haveReader) {
  console.log("skipped: KDE read-back of hostile values needs kreadconfig5 (libkf5config-bin)");
}

/** Syncs one Kconfig policy of `entries`, which the server's validation accepts, and asserts it COMPLIANT. */
async function syncValidKconfig(node: TempNode, entries: Record<string, unknown>[]): Promise<void> {
  const content = JSON.stringify({ entries });
  assert.deepEqual(validatePolicyContent("Kconfig", content), []);
  const { engine, reports } = await engineFor(node);
  engine.handleEvent({
    kind: "SNAPSHOT",
    policy: { id: "p", name: "p", type: "Kconfig", version: 1, priority: 0, content },
    snapshotComplete: true,
  });
  await engine.idle();
  const r = reports.get("p")!;
  assert.equal(r.status, "COMPLIANT", JSON.stringify(r.items.filter((i) => i.status !== "COMPLIANT")));
}

/** What KDE's own reader (kreadconfig5 `args`) reads with the node's /etc/xdg and an empty `home`. */
async function kreadconfig(node: TempNode, home: string, args: string[]): Promise<string> {
  const out = await new Deno.Command("kreadconfig5", {
    args,
    env: { XDG_CONFIG_DIRS: `${node.root}/etc/xdg`, XDG_CONFIG_HOME: `${home}/.config`, HOME: home },
    stdout: "piped",
  }).output();
  return new TextDecoder().decode(out.stdout).replace(/\n$/, "");
}

Deno.test({
  name: "kconfig: every hostile string a value may carry is escaped and read back literally by kreadconfig5",
  ignore: !haveReader,
  async fn() {
    const node = await kdeNode();
    try {
      const carried = HOSTILE_STRINGS.filter((h) =>
        !has(h, MUST_STAY_ON_ONE_LINE) && h.value.length <= 65536 && h.value !== "" && h.value !== "\ufeff"
      );
      const entries = carried.map((h, i) => ({
        file: "kwinrc",
        group: "Hostile",
        key: `k${i}`,
        value: h.value,
      }));
      await syncValidKconfig(node, entries);
      // Independently of the agent's own read-back: KDE's reader, and no group or key appeared.
      const home = await Deno.makeTempDir();
      try {
        for (const [i, h] of carried.entries()) {
          const read = await kreadconfig(node, home, [
            "--file",
            "kwinrc",
            "--group",
            "Hostile",
            "--key",
            `k${i}`,
          ]);
          assert.equal(read, h.value, h.name);
        }
        const text = await Deno.readTextFile(`${node.root}/etc/xdg/kwinrc`);
        assert.equal(text.split("\n").filter((l) => l.startsWith("[")).length, 1, "one group only");
        assert.equal(text.split("\n").filter((l) => /^k\d+=/.test(l)).length, carried.length);
      } finally {
        await Deno.remove(home, { recursive: true });
      }
    } finally {
      await node.cleanup();
    }
  },
});

Deno.test({
  name: "kconfig: group and key names real KDE files use are written and read back by kreadconfig5",
  ignore: !haveReader,
  async fn() {
    const node = await kdeNode();
    try {
      const entries = [
        { file: "kdeglobals", group: "KDE Action Restrictions", key: "plasma/plasmashell/unlockedDesktop" },
        { file: "kwinrc", group: "org.kde.kdecoration2", key: "library" },
        { file: "kwinrc", group: "Effect-overview", key: "BorderActivate" },
        {
          file: "kcminputrc",
          group: "Libinput",
          subgroups: ["1739", "52619", "SYNA8004:00 06CB:CD8B Touchpad"],
          key: "NaturalScroll",
        },
        { file: "kglobalshortcutsrc", group: "kwin", key: "Walk Through Windows (Reverse)" },
      ].map((e, i) => ({ subgroups: [], ...e, value: `v${i}` }));
      await syncValidKconfig(node, entries);
      const home = await Deno.makeTempDir();
      try {
        for (const e of entries) {
          const args = [
            "--file",
            e.file,
            ...[e.group, ...e.subgroups].flatMap((g) => ["--group", g]),
            "--key",
            e.key,
          ];
          assert.equal(await kreadconfig(node, home, args), e.value, `${e.group} ${e.key}`);
        }
      } finally {
        await Deno.remove(home, { recursive: true });
      }
    } finally {
      await node.cleanup();
    }
  },
});
