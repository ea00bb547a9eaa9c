/**
 * The Privilege report's checks of one decision against the node: does sudo let the account run commands as the
 * merge says, and does polkitd offer it as an administrator (a revoked member of an administrator group it still
 * offers is NON_COMPLIANT, naming the group: polkit cannot take a member out of a group).
 *
 * @module
 */

import { POLKIT_ADMIN_RULES_PATH } from "../../../shared/polkit_js.ts";
import { localGroupsRevoked, type PrivilegeDecision } from "../../../shared/privilege_rules.ts";
import type { ItemResult } from "../../sync/types.ts";
import type { PrivilegePlan } from "./plan.ts";
import { type PrivilegeState, subjectsOf } from "./read_back.ts";

/**
 * What the merge means for one account: `refused` when a revocation covers it (by name, through a group, or as
 * a member of a revoked local sudo group), `allowed` when a grant covers it, undefined when svc says nothing.
 */
function expectedFor(
  user: string,
  groups: ReadonlySet<string>,
  p: PrivilegePlan,
): "allowed" | "refused" | undefined {
  const { winners } = p.merge;
  const named = [winners.get(`user:${user}`), ...[...groups].map((g) => winners.get(`group:${g}`))]
    .filter((d) => d !== undefined);
  const localRevoked = localGroupsRevoked(p.merge) && p.localGroups.some((g) => groups.has(g));
  if (localRevoked || named.some((d) => !d.allow)) return "refused";
  return named.some((d) => d.allow) ? "allowed" : undefined;
}

/** Why `user` is refused although `decision` allows it: the revocation that covers it. */
function revokedBy(user: string, groups: ReadonlySet<string>, p: PrivilegePlan): string {
  const { winners } = p.merge;
  if (winners.get(`user:${user}`)?.allow === false) return `the user ${user} is revoked`;
  const group = [...groups].find((g) => winners.get(`group:${g}`)?.allow === false);
  if (group) return `the group ${group} is revoked (deny beats allow)`;
  return "the local sudo groups are revoked (deny beats allow)";
}

export function sudoItem(
  schemaId: string,
  key: string,
  user: string,
  d: PrivilegeDecision,
  p: PrivilegePlan,
  state: PrivilegeState,
): ItemResult {
  const answer = state.sudo.get(user);
  const groups = state.accounts.get(user) ?? new Set<string>();
  const expected = expectedFor(user, groups, p);
  if (answer === undefined) {
    return { schemaId, key, status: "UNKNOWN", message: `sudo was not asked about ${user}` };
  }
  if (typeof answer === "object") return { schemaId, key, status: "UNKNOWN", message: answer.error };
  if (answer === "unknown-user") {
    return { schemaId, key, status: "INAPPLICABLE", message: `no account ${user} on this node` };
  }
  if (d.allow && expected === "refused") {
    return {
      schemaId,
      key,
      status: answer === "refused" ? "INAPPLICABLE" : "NON_COMPLIANT",
      message: answer === "refused"
        ? `${user} is not an administrator: ${revokedBy(user, groups, p)}`
        : `sudo lets ${user} run commands although ${revokedBy(user, groups, p)}`,
    };
  }
  const want = d.allow ? "allowed" : "refused";
  return {
    schemaId,
    key,
    status: answer === want ? "COMPLIANT" : "NON_COMPLIANT",
    message: answer === want
      ? `sudo -l: ${user} ${want === "allowed" ? "may" : "may not"} run commands as root`
      : `sudo -l: ${user} ${
        answer === "allowed" ? "may" : "may not"
      } run commands as root, the policy says ` +
        `${want === "allowed" ? "may" : "may not"}: another sudoers file decides`,
  };
}

export function polkitItems(
  schemaId: string,
  key: string,
  d: PrivilegeDecision,
  p: PrivilegePlan,
  state: PrivilegeState,
): ItemResult[] {
  const file = state.files.get(POLKIT_ADMIN_RULES_PATH)!;
  const intact = "text" in file && file.text === p.polkit;
  const items: ItemResult[] = [{
    schemaId,
    key: `${key}.polkit`,
    status: intact ? "COMPLIANT" : "NON_COMPLIANT",
    message: intact
      ? `polkit administrators in ${POLKIT_ADMIN_RULES_PATH}: ${p.identities.join(", ")}`
      : "error" in file
      ? file.error
      : `${POLKIT_ADMIN_RULES_PATH} does not hold the rule as generated (missing or edited)`,
  }];
  if (!intact || !state.polkit) return items;
  if ("error" in state.polkit) {
    items.push({ schemaId, key: `${key}.pkcheck`, status: "UNKNOWN", message: state.polkit.error });
    return items;
  }
  const offered = new Set(state.polkit.names);
  for (const user of subjectsOf(d, p, state.accounts)) {
    if (state.sudo.get(user) === "unknown-user" || !state.accounts.has(user)) continue;
    const groups = state.accounts.get(user) ?? new Set<string>();
    const want = expectedFor(user, groups, p) === "allowed";
    const is = offered.has(user);
    const through = is && !want
      ? [...groups].find((g) => p.identities.includes(`unix-group:${g}`))
      : undefined;
    items.push({
      schemaId,
      key: `${key}.pkcheck:${user}`,
      status: is === want ? "COMPLIANT" : "NON_COMPLIANT",
      message: is === want
        ? `polkit ${is ? "offers" : "does not offer"} ${user} as an administrator`
        : is
        ? `polkit still offers ${user} as an administrator${
          through ? ` as a member of ${through}: remove ${user} from ${through} or revoke the group` : ""
        }`
        : `polkit does not offer ${user} as an administrator: an earlier admin rule decides`,
    });
  }
  return items;
}
