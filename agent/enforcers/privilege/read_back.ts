/**
 * What the node shows after a Privilege write: both files, and on the node itself (root `/`) `visudo -c`, what
 * `sudo -l` answers for every named user and the first local members of every named group, and the
 * administrators polkitd offers.
 *
 * @module
 */

import type { PrivilegeDecision } from "../../../shared/privilege_rules.ts";
import type { EnforcerIO } from "../../sync/types.ts";
import type { Landed } from "../desktop_enforcer.ts";
import { accountGroups } from "../node_accounts.ts";
import type { PrivilegePlan } from "./plan.ts";
import { offeredAdmins } from "./polkit_admins.ts";
import { askSudo, checkSudoConfig, type SudoAnswer } from "./sudoers.ts";

/** What the node shows after the write. */
export interface PrivilegeState {
  files: Map<string, { text?: string } | { error: string }>;
  /** `visudo -c` of the whole configuration (root `/` only): undefined when not asked. */
  visudo?: { ok: boolean; words: string };
  /** Account → what `sudo -l -U` answered (root `/` only). */
  sudo: Map<string, SudoAnswer>;
  accounts: Map<string, Set<string>>;
  /** The names polkitd offers as administrators, or why they could not be asked; undefined when not asked. */
  polkit?: { names: string[] } | { error: string };
}

export async function readBackPrivilege(
  io: EnforcerIO,
  p: PrivilegePlan,
  landed: Landed,
): Promise<PrivilegeState> {
  const state: PrivilegeState = { files: new Map(), sudo: new Map(), accounts: await accountGroups(io) };
  for (const path of p.files.keys()) {
    const error = landed.failed.get(path);
    state.files.set(
      path,
      error ? { error } : await io.fs.readTextFile(path).then((text) => ({ text }), (err) => ({
        error: `cannot read ${path}: ${(err as Error).message}`,
      })),
    );
  }
  if (io.fs.root !== "/") return state;
  state.visudo = await checkSudoConfig(io);
  if (await io.runner.which("sudo")) {
    for (const user of accountsToAsk(p, state.accounts)) state.sudo.set(user, await askSudo(io, user));
  }
  if (p.polkit) state.polkit = await offeredAdmins(io);
  return state;
}

/** The local members of `group` (primary or listed), in name order. */
function membersOf(accounts: ReadonlyMap<string, ReadonlySet<string>>, group: string): string[] {
  return [...accounts].filter(([, groups]) => groups.has(group)).map(([name]) => name).sort();
}

/** How many members of a group are asked about (the first in name order). */
const MEMBERS_ASKED = 5;

/** The accounts sudo is asked about: every named user, and the first local members of every named group. */
function accountsToAsk(p: PrivilegePlan, accounts: Map<string, Set<string>>): string[] {
  const out = new Set<string>();
  for (const decisions of p.merge.byPolicy.values()) {
    for (const d of decisions) for (const user of subjectsOf(d, p, accounts)) out.add(user);
  }
  return [...out];
}

/** The accounts a decision is checked with: the user, or the group's first local members. */
export function subjectsOf(
  d: PrivilegeDecision,
  p: PrivilegePlan,
  accounts: Map<string, Set<string>>,
): string[] {
  if (d.kind === "user") return [d.name];
  const groups = d.kind === "group" ? [d.name] : p.localGroups;
  return [...new Set(groups.flatMap((g) => membersOf(accounts, g)))].slice(0, MEMBERS_ASKED);
}
