/**
 * The node's local accounts as the desktop types need them, read from `/etc/passwd` and `/etc/group` under the
 * agent's root: Polkit asks pkcheck as an account (uid, gid), SessionAccess resolves group members for pam_time,
 * Flatpak deletes an app's data in every home. One reader, so the three agree on what an account is.
 *
 * @module
 */

import type { EnforcerIO } from "../sync/types.ts";

/** One `/etc/passwd` entry (fields as written). */
export interface PasswdEntry {
  name: string;
  uid: string;
  gid: string;
  home: string;
}

/** The entries of `/etc/passwd` that have a name and a group field. */
export async function passwdEntries(io: Pick<EnforcerIO, "fs">): Promise<PasswdEntry[]> {
  const out: PasswdEntry[] = [];
  for (const line of ((await io.fs.readTextFile("/etc/passwd")) ?? "").split("\n")) {
    const [name, , uid, gid, , home] = line.split(":");
    if (name && gid !== undefined) out.push({ name, uid: uid ?? "", gid, home: home ?? "" });
  }
  return out;
}

/** Local account → the groups it is in (primary and supplementary), from `/etc/passwd` and `/etc/group`. */
export async function accountGroups(io: Pick<EnforcerIO, "fs">): Promise<Map<string, Set<string>>> {
  const group = await io.fs.readTextFile("/etc/group") ?? "";
  const groupByGid = new Map<string, string>();
  const accounts = new Map<string, Set<string>>();
  const of = (name: string) => accounts.get(name) ?? accounts.set(name, new Set()).get(name)!;
  for (const line of group.split("\n")) {
    const [name, , gid, members] = line.split(":");
    if (!name || gid === undefined) continue;
    groupByGid.set(gid, name);
    for (const member of (members ?? "").split(",").map((m) => m.trim()).filter(Boolean)) {
      of(member).add(name);
    }
  }
  for (const { name, gid } of await passwdEntries(io)) {
    const primary = groupByGid.get(gid);
    of(name);
    if (primary) of(name).add(primary);
  }
  return accounts;
}
