/**
 * The KDE files svc writes: every winning key rendered into its file, files and groups in a fixed order so the
 * same policies always give the same bytes, URL restrictions closed by their `rule_count`, svc's header first.
 *
 * @module
 */

import { type KconfigGroup, renderKconfigFile } from "../../../shared/kconfig_format.ts";

/** System configuration directory KDE reads before the user's (node path). */
export const KDE_SYSTEM_DIR = "/etc/xdg";
/** The group of URL restrictions, numbered `rule_1`… and closed by `rule_count`. */
export const URL_GROUP = "KDE URL Restrictions";
const HEADER =
  "Managed by svc (svc-agent). Local changes are overwritten; change the Kconfig policy instead.";

/** One key of one group of one file, as written. */
export interface KdeKey {
  /** Node path of the file. */
  path: string;
  group: string[];
  key: string;
  value: string;
  immutable: boolean;
}

/** Renders every file from the winning keys (plus `rule_count`). */
export function renderKdeFiles(winners: readonly KdeKey[]): Map<string, string> {
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
