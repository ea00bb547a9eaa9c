/**
 * What a sync of the Privilege policies wants: the merge (`shared/privilege_rules.ts`), the sudoers drop-in it
 * renders and, where polkit is on the node, the admin rule naming the administrators.
 *
 * @module
 */

import type { PrivilegePolicy } from "../../../shared/gen/svc/policy/v1/privilege_pb.ts";
import { POLKIT_ADMIN_RULES_PATH } from "../../../shared/polkit_js.ts";
import {
  localSudoGroupsOf,
  mergePrivilege,
  type PrivilegeMerge,
  renderSudoers,
  SUDOERS_PATH,
} from "../../../shared/privilege_rules.ts";
import type { EnforcerIO } from "../../sync/types.ts";
import type { Checked, DesktopPlan } from "../desktop_enforcer.ts";
import { polkitIdentities, renderAdminRule } from "./polkit_admins.ts";

/** What a sync of the Privilege policies wants. */
export interface PrivilegePlan extends DesktopPlan {
  merge: PrivilegeMerge;
  localGroups: string[];
  sudoers: string;
  /** The polkit file's text, when polkit is on the node. */
  polkit?: string;
  identities: string[];
}

/** The plan of `valid`, or why the polkit rule was refused. */
export async function planPrivilege(
  valid: Checked<PrivilegePolicy>[],
  io: EnforcerIO,
): Promise<PrivilegePlan | string> {
  const localGroups = localSudoGroupsOf((await io.fs.readTextFile("/etc/sudoers")) ?? "");
  const merge = mergePrivilege(valid.map(({ policy, message }) => ({
    id: policy.id,
    name: policy.name,
    priority: policy.priority,
    content: message,
  })));
  const sudoers = renderSudoers(merge, localGroups);
  const identities = polkitIdentities(merge, localGroups);
  // No valid policy: nothing of svc's stays.
  if (valid.length === 0) return { files: new Map(), merge, localGroups, sudoers, identities };
  const files = new Map([[SUDOERS_PATH, sudoers]]);
  let polkit: string | undefined;
  const hasPolkit = (await io.fs.stat("/etc/polkit-1"))?.isDirectory ||
    (await io.fs.stat("/usr/share/polkit-1"))?.isDirectory;
  if (hasPolkit) {
    const rule = renderAdminRule(identities);
    if ("refused" in rule) return rule.refused;
    polkit = rule.text;
    files.set(POLKIT_ADMIN_RULES_PATH, polkit);
  }
  return { files, modes: new Map([[SUDOERS_PATH, 0o440]]), merge, localGroups, sudoers, polkit, identities };
}
