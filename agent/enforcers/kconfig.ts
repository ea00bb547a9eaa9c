/**
 * Kconfig enforcer: KDE Plasma (5 and 6) settings and Kiosk restrictions.
 *
 * Where: system-wide KDE config files in `/etc/xdg` (kdeglobals, kwinrc, plasmarc, kscreenlockerrc, the
 * applets file, …), which every KDE program reads before the user's own `~/.config` copy, and `/etc/kde5rc`
 * plus `/etc/kde6rc` for System Settings module restrictions. `/etc/xdg` is the default of
 * `XDG_CONFIG_DIRS` and needs no environment change, so it also reaches sessions and services that never
 * source a profile script (Wayland sessions started by systemd, the screen locker, SDDM); a profile script
 * would only take effect after the next login shell and could be overridden by anything that sets
 * `XDG_CONFIG_DIRS` later. Files svc replaces are backed up by the managed-file store and put back when no
 * policy needs them any more.
 *
 * What:
 * - every policy is parsed and validated again with the shared registry; names are checked and values
 *   escaped with the shared `kconfig_format.ts` rules (a policy that fails is ERROR, nothing of it written);
 * - entries and action/resource restrictions merge by priority per (file, group, key): the first policy in
 *   the engine's order wins, the others report that key INAPPLICABLE naming the winner's value;
 * - URL restrictions of all policies are numbered into one `[KDE URL Restrictions]` list, lower priority
 *   first so a higher-priority rule (later in the list) wins, with one `rule_count`;
 * - restrictions are immutable (`[$i]`), entries when the policy says so;
 * - files and groups are rendered in a fixed order, so the same policies always give the same bytes.
 *
 * Read-back: with KDE's own reader `kreadconfig5`/`kreadconfig6` where installed (XDG_CONFIG_DIRS pointing
 * at the written directory, a scratch HOME whose user file tries to override every immutable key), with the
 * shared parser otherwise. A node without KDE Plasma → INAPPLICABLE, nothing written. No Kconfig policy and
 * no earlier file → nothing touched.
 *
 * Settings take effect at the next login: users are notified (`notifiesUsers`).
 *
 * A desktop type over `desktop_enforcer.ts`, which re-validates, checks for Plasma (and watches for it), writes,
 * releases and rolls up; this module holds what is KDE's: the keys a policy becomes, their merge identity, the
 * rendering and KDE's reader.
 *
 * @module
 */

import { checkedContent } from "./revalidate.ts";
import { type KconfigPolicy, KconfigUrlAction } from "../../shared/gen/svc/policy/v1/kconfig_pb.ts";
import { kconfigType } from "../../shared/policy_types/kconfig.ts";
import { PolicyContentError } from "../../shared/policy_types/errors.ts";
import {
  kconfigFileProblem,
  type KconfigGroup,
  kconfigGroupProblem,
  kconfigKeyProblem,
  kconfigValueProblem,
  parseKconfigFile,
  renderKconfigFile,
} from "../../shared/kconfig_format.ts";
import type {
  CachedPolicy,
  ComplianceStatusName,
  EnforcerIO,
  ItemResult,
  PolicyResult,
} from "../sync/types.ts";
import { desktopEnforcer, overriddenBy, summarize, type SummaryWords, Winners } from "./desktop_enforcer.ts";

/** System configuration directory KDE reads before the user's (node path). */
export const KDE_SYSTEM_DIR = "/etc/xdg";
/** Files holding System Settings module restrictions (node paths): Plasma 5 and Plasma 6. */
export const KCM_FILES = ["/etc/kde5rc", "/etc/kde6rc"] as const;
/** Node paths whose presence means "KDE Plasma is installed". */
export const KDE_INSTALL_PATHS: readonly string[] = [
  "/usr/bin/plasmashell",
  "/usr/bin/startplasma-x11",
  "/usr/bin/startplasma-wayland",
  "/usr/bin/kwin_x11",
  "/usr/bin/kwin_wayland",
];
const HEADER =
  "Managed by svc (svc-agent). Local changes are overwritten; change the Kconfig policy instead.";
const PROBE = "svc-immutability-probe";
const URL_GROUP = "KDE URL Restrictions";
const ACTIONS = {
  [KconfigUrlAction.OPEN]: "open",
  [KconfigUrlAction.LIST]: "list",
  [KconfigUrlAction.REDIRECT]: "redirect",
} as Record<number, string>;

/** One key a policy wants (also what the Proxy type writes for KDE). */
export interface Want {
  policy: CachedPolicy;
  /** Node path of the file. */
  path: string;
  group: string[];
  key: string;
  value: string;
  immutable: boolean;
  /** Report item: schemaId and key. */
  itemFile: string;
  itemKey: string;
}

function mergeId(w: { path: string; group: string[]; key: string }): string {
  return [w.path, ...w.group, w.key].join("\u0000");
}

/**
 * Parses and validates a cached policy again and re-checks every name and value with the shared format rules.
 *
 * @throws {PolicyContentError} naming the problem.
 */
export function kconfigPolicyContent(policy: CachedPolicy): KconfigPolicy {
  const message = checkedContent(policy, kconfigType);
  message.entries.forEach((e, i) => {
    const problem = kconfigFileProblem(e.file) ?? [e.group, ...e.subgroups].map(kconfigGroupProblem)
      .find((p) => p) ??
      kconfigKeyProblem(e.key) ?? kconfigValueProblem(e.value);
    if (problem) throw new PolicyContentError(`entries[${i}]: ${problem}`);
  });
  for (
    const key of [...Object.keys(message.actionRestrictions), ...Object.keys(message.resourceRestrictions)]
  ) {
    const problem = kconfigKeyProblem(key);
    if (problem) throw new PolicyContentError(`restriction ${JSON.stringify(key)}: ${problem}`);
  }
  return message;
}

function wants(policy: CachedPolicy, message: KconfigPolicy): Want[] {
  const out: Want[] = [];
  for (const e of message.entries) {
    const group = [e.group, ...e.subgroups];
    out.push({
      policy,
      path: `${KDE_SYSTEM_DIR}/${e.file}`,
      group,
      key: e.key,
      value: e.value,
      immutable: e.immutable,
      itemFile: e.file,
      itemKey: `${group.map((g) => `[${g}]`).join("")} ${e.key}`,
    });
  }
  for (
    const [groupName, map] of [
      ["KDE Action Restrictions", message.actionRestrictions],
      ["KDE Resource Restrictions", message.resourceRestrictions],
    ] as const
  ) {
    for (const key of Object.keys(map).sort()) {
      out.push({
        policy,
        path: `${KDE_SYSTEM_DIR}/kdeglobals`,
        group: [groupName],
        key,
        value: map[key] ? "true" : "false",
        immutable: true,
        itemFile: "kdeglobals",
        itemKey: `[${groupName}] ${key}`,
      });
    }
  }
  for (const name of message.kcmRestrictions) {
    for (const path of KCM_FILES) {
      out.push({
        policy,
        path,
        group: ["KDE Control Module Restrictions"],
        key: name,
        value: "false",
        immutable: true,
        itemFile: path.slice(5),
        itemKey: `[KDE Control Module Restrictions] ${name}`,
      });
    }
  }
  return out;
}

/** URL restriction rules of all policies, lowest priority first (later rules win in KDE). */
function urlRules(valid: { policy: CachedPolicy; message: KconfigPolicy }[]): Want[] {
  const out: Want[] = [];
  for (const { policy, message } of [...valid].reverse()) {
    for (const r of message.urlRestrictions) {
      const value = [
        ACTIONS[r.action] ?? "open",
        r.referrerProtocol,
        r.referrerHost,
        r.referrerPath,
        r.protocol,
        r.host,
        r.path,
        r.allow ? "true" : "false",
      ].join(",");
      const n = out.length + 1;
      out.push({
        policy,
        path: `${KDE_SYSTEM_DIR}/kdeglobals`,
        group: [URL_GROUP],
        key: `rule_${n}`,
        value,
        immutable: true,
        itemFile: "kdeglobals",
        itemKey: `[${URL_GROUP}] rule_${n}`,
      });
    }
  }
  return out;
}

/** Renders every file from the winning keys (plus `rule_count`). */
export function renderKdeFiles(winners: readonly Want[]): Map<string, string> {
  const byFile = new Map<string, Map<string, KconfigGroup>>();
  for (const w of winners) {
    const groups = byFile.get(w.path) ?? new Map<string, KconfigGroup>();
    byFile.set(w.path, groups);
    const id = w.group.join("\u0000");
    const group = groups.get(id) ?? { path: w.group, keys: [] };
    groups.set(id, group);
    group.keys.push({ key: w.key, value: w.value, immutable: w.immutable });
  }
  const files = new Map<string, string>();
  for (const [path, groups] of [...byFile].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const url = groups.get(URL_GROUP);
    if (url) url.keys.push({ key: "rule_count", value: String(url.keys.length), immutable: true });
    files.set(path, renderKconfigFile(HEADER, [...groups.values()]));
  }
  return files;
}

/** Whether a file's text is svc's own. */
export function isSvcKdeFile(text: string): boolean {
  return text.startsWith(`# ${HEADER}`);
}

function stripNewline(text: string): string {
  return text.endsWith("\n") ? text.slice(0, -1) : text;
}

/** Reads every written key back; see the module documentation. */
export async function readBack(
  io: EnforcerIO,
  winners: readonly Want[],
): Promise<Map<Want, string | { value: string; immutable: boolean }>> {
  const out = new Map<Want, string | { value: string; immutable: boolean }>();
  const reader = await io.runner.which("kreadconfig5") ?? await io.runner.which("kreadconfig6");
  const parsed = new Map<string, ReturnType<typeof parseKconfigFile> | string>();
  for (const w of winners) {
    if (parsed.has(w.path)) continue;
    const text = await io.fs.readTextFile(w.path).catch((err) => `cannot read: ${(err as Error).message}`);
    parsed.set(w.path, text === undefined ? "the file is missing after the write" : parseKconfigFile(text));
  }
  const own = (w: Want) => {
    const file = parsed.get(w.path)!;
    if (typeof file === "string") return file;
    const found = file.get(w.group.join("\u0000"))?.get(w.key);
    return found ?? "the key is missing from the written file";
  };
  if (!reader) {
    for (const w of winners) out.set(w, own(w));
    return out;
  }
  const scratch = await Deno.makeTempDir({ prefix: "svc-kconfig-read-" });
  try {
    // A user configuration that tries to override every immutable key of the /etc/xdg files.
    const probes = new Map<string, KconfigGroup[]>();
    for (const w of winners) {
      if (!w.immutable || !w.path.startsWith(`${KDE_SYSTEM_DIR}/`)) continue;
      const name = w.path.slice(KDE_SYSTEM_DIR.length + 1);
      probes.set(name, [...(probes.get(name) ?? []), {
        path: w.group,
        keys: [{ key: w.key, value: PROBE, immutable: false }],
      }]);
    }
    await Deno.mkdir(`${scratch}/config`, { recursive: true });
    for (const [name, groups] of probes) {
      await Deno.writeTextFile(`${scratch}/config/${name}`, renderKconfigFile("probe", groups));
    }
    const env = {
      XDG_CONFIG_DIRS: await io.fs.resolve(KDE_SYSTEM_DIR),
      XDG_CONFIG_HOME: `${scratch}/config`,
      HOME: scratch,
      QT_QPA_PLATFORM: "offscreen",
    };
    for (const w of winners) {
      const system = w.path.startsWith(`${KDE_SYSTEM_DIR}/`);
      const file = system ? w.path.slice(KDE_SYSTEM_DIR.length + 1) : await io.fs.resolve(w.path);
      const args = ["--file", file, ...w.group.flatMap((g) => ["--group", g]), "--key", w.key];
      const result = await io.runner.run(reader, args, { env, clearEnv: true, timeoutMs: 30_000 });
      if (!result.success) {
        out.set(w, `${reader} failed: ${(result.stderr || result.stdout).trim().slice(0, 500)}`);
        continue;
      }
      const value = stripNewline(result.stdout);
      const ownView = own(w);
      // kreadconfig reads absolute files without cascading, so [$i] there is checked in the file itself.
      const immutable = system
        ? w.immutable && value !== PROBE
        : typeof ownView !== "string" && ownView.immutable;
      out.set(w, { value, immutable: w.immutable ? immutable : false });
    }
  } finally {
    await Deno.remove(scratch, { recursive: true }).catch(() => {});
  }
  return out;
}

const WORDS: SummaryWords = {
  inEffect: (ok, skipped) =>
    `${ok} KDE setting(s) in effect from the next login` +
    (skipped ? `; ${skipped} overridden by higher-priority policies` : ""),
  noun: "KDE setting(s)",
  label: (i) => `${i.schemaId} ${i.key}`,
};

/** What one policy achieved: each of its keys against the winner and what KDE reads. */
function report(
  policy: CachedPolicy,
  winners: Winners<Want>,
  state: Map<Want, string | { value: string; immutable: boolean }>,
  failed: Map<string, string>,
): Omit<PolicyResult, "policyId"> {
  const items: ItemResult[] = [];
  for (const w of winners.of(policy.id)) {
    const winner = winners.winner(mergeId(w))!;
    const item = (status: ComplianceStatusName, message: string) =>
      items.push({ schemaId: w.itemFile, key: w.itemKey, status, message });
    if (winner !== w && (winner.value !== w.value || winner.immutable !== w.immutable)) {
      item(
        "INAPPLICABLE",
        overriddenBy(winner.policy, `${winner.value}${winner.immutable ? " (immutable)" : ""}`),
      );
      continue;
    }
    const error = failed.get(winner.path);
    const seen = state.get(winner);
    if (error || seen === undefined || typeof seen === "string") {
      item("ERROR", error ?? (seen as string | undefined) ?? "not read back");
    } else if (seen.value !== w.value) {
      item("NON_COMPLIANT", `expected ${JSON.stringify(w.value)}, KDE reads ${JSON.stringify(seen.value)}`);
    } else if (w.immutable && !seen.immutable) {
      item("NON_COMPLIANT", `${JSON.stringify(w.value)} is set but not immutable: users can override it`);
    } else {
      item("COMPLIANT", `${JSON.stringify(w.value)}${w.immutable ? " (immutable)" : ""} is in effect`);
    }
  }
  return { ...summarize(items, WORDS), items };
}

/** The Kconfig enforcer; see the module documentation. */
export const kconfigEnforcer = desktopEnforcer({
  type: "Kconfig",
  notifiesUsers: true,
  check: kconfigPolicyContent,
  needs: [{
    anyOf: KDE_INSTALL_PATHS,
    missing: `KDE Plasma is not installed (looked for ${KDE_INSTALL_PATHS.join(", ")})`,
  }],
  // KDE's config reader installed after the policy arrived reads back what the fallback parser cannot.
  reads: ["/usr/bin/kreadconfig5", "/usr/bin/kreadconfig6"],
  isOwnContent: isSvcKdeFile,
  plan(valid) {
    const winners = new Winners<Want>();
    for (const w of [...valid.flatMap(({ policy, message }) => wants(policy, message)), ...urlRules(valid)]) {
      winners.add(mergeId(w), w);
    }
    try {
      return Promise.resolve({ winners, files: renderKdeFiles(winners.values()) });
    } catch (err) {
      return Promise.resolve((err as Error).message);
    }
  },
  readBack: (io, { winners }, { failed }) =>
    readBack(io, winners.values().filter((w) => !failed.has(w.path))),
  report: ({ policy }, { plan, state, landed }) => report(policy, plan.winners, state, landed.failed),
});
