/**
 * The files svc writes for dconf: per database one keyfile and one lock list named `svc-policies` (dconf lets a
 * later keyfile in name order win, so svc's file comes after the usual `00-name` ones), and the profiles that
 * list svc's databases. Sections and keys are sorted, so the same winners always give the same bytes.
 *
 * @module
 */

import { formatGVariant, type GValue } from "../../../shared/gvariant.ts";
import type { EnforcerIO } from "../../sync/types.ts";

/** Directory of the system databases (node path). */
export const DCONF_DB_DIR = "/etc/dconf/db";
/** Directory of the dconf profiles (node path). */
export const DCONF_PROFILE_DIR = "/etc/dconf/profile";
/** Name of svc's keyfile and lock list inside `<db>.d/` and `<db>.d/locks/`. */
export const DCONF_FILE_NAME = "svc-policies";
const HEADER =
  "# Managed by svc (svc-agent). Local changes are overwritten; change the Dconf policy instead.";

/** Node path of svc's keyfile in database `db`. */
export function dconfKeyfilePath(db: string): string {
  return `${DCONF_DB_DIR}/${db}.d/${DCONF_FILE_NAME}`;
}

/** Node path of svc's lock list in database `db`. */
export function dconfLocksPath(db: string): string {
  return `${DCONF_DB_DIR}/${db}.d/locks/${DCONF_FILE_NAME}`;
}

/** One key as written: its dconf directory (leading and trailing `/`), name, typed value and lock. */
export interface DconfKey {
  dir: string;
  key: string;
  value: GValue;
  lock: boolean;
}

/** Renders the keyfile and lock list of one database; sections and keys sorted. */
export function renderDconfFiles(entries: readonly DconfKey[]): { keyfile: string; locks: string } {
  const byDir = new Map<string, DconfKey[]>();
  for (const e of entries) byDir.set(e.dir, [...(byDir.get(e.dir) ?? []), e]);
  const dirs = [...byDir.keys()].sort();
  const sections = dirs.map((dir) => {
    const lines = byDir.get(dir)!.sort((a, b) => (a.key < b.key ? -1 : 1)).map((e) =>
      `${e.key}=${formatGVariant(e.value)}`
    );
    return `[${dir.slice(1, -1)}]\n${lines.join("\n")}\n`;
  });
  const locks = entries.filter((e) => e.lock).map((e) => `${e.dir}${e.key}`).sort();
  return {
    keyfile: `${HEADER}\n\n${sections.join("\n")}`,
    locks: `${HEADER}\n${locks.map((l) => `${l}\n`).join("")}`,
  };
}

/** Whether text is a file svc wrote (keyfile, lock list). */
export function isSvcDconfFile(text: string): boolean {
  return text.startsWith(HEADER);
}

/** GDM's read-only greeter defaults, which a `gdm` profile svc creates keeps after its own database. */
export const GDM_GREETER_DEFAULTS = "/usr/share/gdm/greeter-dconf-defaults";

/**
 * The profile text with `system-db:<db>` right after the user database line (or first); undefined when it is
 * listed already. A new profile is `user-db:user` + the database, plus `fallback` lines (a new `gdm` profile
 * keeps GDM's greeter defaults).
 */
export function profileWith(
  current: string | undefined,
  db: string,
  fallback: readonly string[] = [],
): string | undefined {
  const lines = (current ?? "").split("\n").map((l) => l.trim()).filter((l) => l !== "");
  if (lines.includes(`system-db:${db}`)) return undefined;
  if (lines.length === 0) {
    return [`user-db:user`, `system-db:${db}`, ...fallback].map((l) => `${l}\n`).join("");
  }
  const userAt = lines.findIndex((l) => l.startsWith("user-db:"));
  lines.splice(userAt + 1, 0, `system-db:${db}`);
  return `${lines.join("\n")}\n`;
}

/**
 * Node path → text of every profile that must list svc's databases (profile → databases), rendered from the node's
 * own; a profile already listing them is left out unless svc manages it (it stays managed).
 */
export async function renderProfiles(
  io: EnforcerIO,
  profiles: Map<string, Set<string>>,
): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  const managed = io.managedPaths();
  for (const [profile, dbs] of profiles) {
    const path = `${DCONF_PROFILE_DIR}/${profile}`;
    const text = await io.fs.readTextFile(path);
    let next = text;
    const fallback = profile === "gdm" && await io.fs.exists(GDM_GREETER_DEFAULTS)
      ? [`file-db:${GDM_GREETER_DEFAULTS}`]
      : [];
    for (const db of [...dbs].sort()) next = profileWith(next, db, fallback) ?? next;
    if (next !== undefined && (next !== text || managed.includes(path))) files.set(path, next);
  }
  return files;
}
