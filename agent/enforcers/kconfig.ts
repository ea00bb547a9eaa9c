/**
 * Kconfig enforcer: KDE Plasma (5 and 6) settings and Kiosk restrictions.
 *
 * Where: system-wide KDE config files in `/etc/xdg` (kdeglobals, kwinrc, plasmarc, kscreenlockerrc, the
 * applets file, …), which every KDE program reads before the user's own `~/.config` copy, and `/etc/kde5rc`
 * plus `/etc/kde6rc` for System Settings module restrictions. `/etc/xdg` is the default of
 * `XDG_CONFIG_DIRS` and needs no environment change, so it also reaches sessions and services that never
 * source a profile script (Wayland sessions started by systemd, the screen locker, SDDM); a profile script
 * would only take effect after the next login shell and could be overridden by anything that sets
 * `XDG_CONFIG_DIRS` later. Files svc replaces are backed up and put back when no policy needs them any more.
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
 * Read-back: with KDE's own reader where installed, the shared parser otherwise (`kconfig/read_back.ts`). A node
 * without KDE Plasma → INAPPLICABLE, nothing written. No Kconfig policy and no earlier file → nothing touched.
 * Settings take effect at the next login: users are notified (`notifiesUsers`).
 *
 * A desktop type over `desktop_enforcer.ts`, which re-validates, checks for Plasma (and watches for it), writes,
 * releases and rolls up; this module holds what is KDE's: the keys a policy becomes, their merge identity and
 * the report; the rendering is `kconfig/render.ts`.
 *
 * @module
 */

import { checkedContent } from "./revalidate.ts";
import { type KconfigPolicy, KconfigUrlAction } from "../../shared/gen/svc/policy/v1/kconfig_pb.ts";
import { kconfigType } from "../../shared/policy_types/kconfig.ts";
import { PolicyContentError } from "../../shared/policy_types/errors.ts";
import {
  kconfigFileProblem,
  kconfigGroupProblem,
  kconfigKeyProblem,
  kconfigValueProblem,
} from "../../shared/kconfig_format.ts";
import type { CachedPolicy, PolicyResult } from "../sync/types.ts";
import { desktopEnforcer, summarize, type SummaryWords, Winners } from "./desktop_enforcer.ts";
import { isSvcKdeFile, KDE_SYSTEM_DIR, type KdeKey, renderKdeFiles, URL_GROUP } from "./kconfig/render.ts";
import { type KdeReading, readKdeKeys } from "./kconfig/read_back.ts";

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
const ACTIONS = {
  [KconfigUrlAction.OPEN]: "open",
  [KconfigUrlAction.LIST]: "list",
  [KconfigUrlAction.REDIRECT]: "redirect",
} as Record<number, string>;

/** One key a policy wants. */
interface Want extends KdeKey {
  policy: CachedPolicy;
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
  state: Map<Want, KdeReading>,
  failed: Map<string, string>,
): Omit<PolicyResult, "policyId"> {
  const items = winners.itemsOf(policy.id, {
    id: mergeId,
    same: (winner, w) => winner.value === w.value && winner.immutable === w.immutable,
    applied: (winner) => `${winner.value}${winner.immutable ? " (immutable)" : ""}`,
    item: (w) => ({ schemaId: w.itemFile, key: w.itemKey }),
    judge(winner, w) {
      const error = failed.get(winner.path);
      const seen = state.get(winner);
      if (error || seen === undefined || typeof seen === "string") {
        return ["ERROR", error ?? (seen as string | undefined) ?? "not read back"];
      }
      if (seen.value !== w.value) {
        return [
          "NON_COMPLIANT",
          `expected ${JSON.stringify(w.value)}, KDE reads ${JSON.stringify(seen.value)}`,
        ];
      }
      if (w.immutable && !seen.immutable) {
        return [
          "NON_COMPLIANT",
          `${JSON.stringify(w.value)} is set but not immutable: users can override it`,
        ];
      }
      return ["COMPLIANT", `${JSON.stringify(w.value)}${w.immutable ? " (immutable)" : ""} is in effect`];
    },
  });
  return { ...summarize(items, WORDS), items };
}

/** The Kconfig enforcer; see the module documentation. */
export const kconfigEnforcer = desktopEnforcer({
  type: kconfigType.wireName,
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
    readKdeKeys(io, winners.values().filter((w) => !failed.has(w.path))),
  report: ({ policy }, { plan, state, landed }) => report(policy, plan.winners, state, landed.failed),
});
