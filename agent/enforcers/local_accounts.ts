/**
 * The node's local accounts and their groups, read from `/etc/passwd` and `/etc/group` under the agent's root:
 * what SessionAccess resolves groups with and what Privilege checks a group's members with.
 *
 * @module
 */

import type { EnforcerIO } from "../sync/types.ts";

/** Local accounts → the names of their groups (the primary group and every group listing them). */
export async function localAccounts(io: Pick<EnforcerIO, "fs">): Promise<Map<string, Set<string>>> {
  const passwd = await io.fs.readTextFile("/etc/passwd") ?? "";
  const group = await io.fs.readTextFile("/etc/group") ?? "";
  const groupByGid = new Map<string, string>();
  const accounts = new Map<string, Set<string>>();
  for (const line of group.split("\n")) {
    const [name, , gid, members] = line.split(":");
    if (!name || gid === undefined) continue;
    groupByGid.set(gid, name);
    for (const member of (members ?? "").split(",").map((m) => m.trim()).filter(Boolean)) {
      if (!accounts.has(member)) accounts.set(member, new Set());
      accounts.get(member)!.add(name);
    }
  }
  for (const line of passwd.split("\n")) {
    const [name, , , gid] = line.split(":");
    if (!name || gid === undefined) continue;
    if (!accounts.has(name)) accounts.set(name, new Set());
    const primary = groupByGid.get(gid);
    if (primary) accounts.get(name)!.add(primary);
  }
  return accounts;
}

/** The local members of `group`, from {@link localAccounts}. */
export function membersOf(accounts: ReadonlyMap<string, ReadonlySet<string>>, group: string): string[] {
  return [...accounts].filter(([, groups]) => groups.has(group)).map(([name]) => name).sort();
}
