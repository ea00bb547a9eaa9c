/**
 * Lockout guard for Privilege (the machinery is `lockout_guards.ts`): the Privilege policies that would reach a
 * node group (every released one with an enabled binding to it, plus the policy in question, each at its highest
 * binding priority for the group) are merged with the agent's own rules (`shared/privilege_rules.ts`), and the
 * change is refused when nobody but root would administer the group's nodes, unless the caller gives a reason.
 *
 * The server cannot see a node's accounts or its `/etc/sudoers`: a node's local sudo groups are taken to be the
 * usual ones (sudo, wheel, admin), and they count as administrators unless the set revokes them (by
 * `local_sudo_group_not_admin` or by name, any of them). A node in several groups receives the union of their
 * policies; the guard checks one group at a time.
 *
 * @module
 */

import { invalidError } from "../core/errors.ts";
import { privilegeType } from "../../shared/policy_types/privilege.ts";
import {
  administrators,
  localGroupsRevoked,
  mergePrivilege,
  type PrivilegeInput,
  USUAL_SUDO_GROUPS,
} from "../../shared/privilege_rules.ts";
import { LOCKOUT_HINT, type LockoutGuard } from "./lockout.ts";

interface Row {
  id: string;
  name: string;
  content: string;
  priority: number;
}

function parsed(row: Row): PrivilegeInput {
  const content = privilegeType.parse(row.content, { ignoreUnknownFields: true });
  const issues = privilegeType.validate(content);
  if (issues.length) {
    const text = issues.slice(0, 3).map((i) => (i.field ? `${i.field}: ${i.message}` : i.message)).join("; ");
    throw invalidError(`Privilege rules cannot be merged: policy "${row.name}": ${text}`);
  }
  return { id: row.id, name: row.name, priority: Number(row.priority), content };
}

/** The Privilege lockout guard; see the module documentation. */
export const privilegeGuard: LockoutGuard = {
  async check(q, options, where) {
    const rows = await q.query<Row>(
      `SELECT p.id, p.name, p.content, max(b.priority) AS priority
         FROM policies p JOIN policy_bindings b ON b.policy_id = p.id
        WHERE b.node_group_id = $1 AND p.type = 'Privilege'
          AND ((b.state = 'enabled' AND p.state = 'released') OR p.id = $2)
        GROUP BY p.id, p.name, p.content ORDER BY p.id`,
      [options.nodeGroupId, options.policyId],
    );
    const merge = mergePrivilege(rows.map(parsed));
    const revokedLocal = localGroupsRevoked(merge)
      ? [`the local sudo groups (by "${merge.winners.get("local-sudo-groups")!.policyName}")`]
      : USUAL_SUDO_GROUPS.map((g) => merge.winners.get(`group:${g}`)).filter((d) => d?.allow === false)
        .map((d) => `the group ${d!.name} (by "${d!.policyName}")`);
    if (revokedLocal.length === 0 || administrators(merge, []).length > 0) return undefined;
    return `${where}: the Privilege rules allow no user or group and revoke ${revokedLocal.join(", ")}, so ` +
      `nobody but root would administer its nodes; ${LOCKOUT_HINT}`;
  },
  outcome: (groupName) => `leave node group "${groupName}" without an administrator`,
};
