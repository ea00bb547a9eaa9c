/**
 * Privilege enforcer: who administers the node. Two files, both from the merge of every Privilege policy
 * (`shared/privilege_rules.ts`: per principal the higher priority decides, deny beats allow):
 *
 * - `/etc/sudoers.d/zz-svc-privilege` (mode 0440): grants, then revocations (`!ALL`), so a revocation is the last
 *   line sudo finds. Before it lands `visudo -c -f -` checks it; after it lands (on the node itself) `visudo -c`
 *   checks the whole configuration, and a refusal puts the previous file back. sudo is never left broken: on
 *   failure nothing lands and every policy is ERROR with visudo's words.
 * - `/etc/polkit-1/rules.d/05-svc-privilege.rules`: one `polkit.addAdminRule` returning the administrator
 *   identities (allowed users and groups, and the node's local sudo groups unless revoked), rendered as string
 *   literals and refused unless a JavaScript parser proves it is exactly that call (`polkit_script.ts`). Its marker
 *   differs from the Polkit type's, which never takes it for one of its own files. Written only where polkit is.
 *
 * A desktop type over `desktop_enforcer.ts`: re-validation, sudo missing → INAPPLICABLE and watched, landing, and
 * the rollback of a refused configuration.
 *
 * Compliance reads the node back: both files against the rendering; on the node itself (root `/`) `visudo -c`,
 * `sudo -l -U <user> /usr/bin/true` for every named user and for the local members of every named group (does sudo
 * let them run a command, as the merge says?), and the administrator identities polkitd really offers, asked of it
 * with pkcheck's own text agent (a process of `nobody` asks for an action that needs an administrator; the agent
 * lists whom it would accept, and no password is ever given). A revoked user whom polkit still offers through a
 * group is NON_COMPLIANT: polkit cannot take a member out of a group.
 *
 * Parts: `privilege/plan.ts` (merge and rendering), `privilege/sudoers.ts` (visudo, `sudo -l`),
 * `privilege/polkit_admins.ts` (the admin rule, pkcheck's agent), `privilege/read_back.ts`, `privilege/items.ts`.
 *
 * @module
 */

import type { PrivilegePolicy } from "../../shared/gen/svc/policy/v1/privilege_pb.ts";
import { privilegeType } from "../../shared/policy_types/privilege.ts";
import { POLKIT_ADMIN_MARKER, POLKIT_ADMIN_RULES_PATH } from "../../shared/polkit_js.ts";
import { type PrivilegeDecision, SUDOERS_MARKER, SUDOERS_PATH } from "../../shared/privilege_rules.ts";
import type { ItemResult } from "../sync/types.ts";
import { type Checked, desktopEnforcer, summarize } from "./desktop_enforcer.ts";
import { checkedContent } from "./revalidate.ts";
import { polkitItems, sudoItem } from "./privilege/items.ts";
import { planPrivilege, type PrivilegePlan } from "./privilege/plan.ts";
import { type PrivilegeState, readBackPrivilege, subjectsOf } from "./privilege/read_back.ts";
import { checkSudoConfig, vetSudoers } from "./privilege/sudoers.ts";

function label(d: PrivilegeDecision): string {
  return d.kind === "local-sudo-groups" ? "the local sudo groups" : `${d.kind} ${d.name}`;
}

function report(
  { policy }: Checked<PrivilegePolicy>,
  { plan: p, state }: { plan: PrivilegePlan; state: PrivilegeState },
) {
  const items: ItemResult[] = [];
  const sudoFile = state.files.get(SUDOERS_PATH)!;
  if ("error" in sudoFile) return { status: "ERROR" as const, message: sudoFile.error, items };
  const sudoIntact = sudoFile.text === p.sudoers;
  if (state.visudo && !state.visudo.ok) {
    return {
      status: "ERROR" as const,
      message: `visudo -c refuses the node's sudo configuration: ${state.visudo.words}`,
      items,
    };
  }
  const polkitFile = p.polkit === undefined ? undefined : state.files.get(POLKIT_ADMIN_RULES_PATH);
  for (const d of p.merge.byPolicy.get(policy.id) ?? []) {
    const schemaId = `privilege:${
      d.kind === "local-sudo-groups" ? "local-sudo-groups" : `${d.kind}:${d.name}`
    }`;
    const key = d.entry >= 0 ? `entries[${d.entry}]` : "local_sudo_group_not_admin";
    const winner = p.merge.winners.get(d.key)!;
    if (winner.policyId !== policy.id) {
      items.push({
        schemaId,
        key,
        status: "INAPPLICABLE",
        message: `overridden by policy "${winner.policyName}" (priority ${winner.priority}), which ` +
          `${winner.allow ? "allows" : "revokes"} ${label(d)}`,
      });
      continue;
    }
    items.push({
      schemaId,
      key: `${key}.sudoers`,
      status: sudoIntact ? "COMPLIANT" : "NON_COMPLIANT",
      message: sudoIntact
        ? `${d.allow ? "granted" : "revoked"} in ${SUDOERS_PATH}`
        : `${SUDOERS_PATH} does not hold the lines as generated (missing or edited)`,
    });
    for (const user of state.sudo.size ? subjectsOf(d, p, state.accounts) : []) {
      items.push(sudoItem(schemaId, `${key}.sudo:${user}`, user, d, p, state));
    }
    if (polkitFile) items.push(...polkitItems(schemaId, key, d, p, state));
  }
  const summary = summarize(items, {
    inEffect: (ok, skipped) =>
      `${ok} check(s) in effect` + (skipped ? `; ${skipped} overridden or not on this node` : ""),
    none: "entry",
  });
  return { ...summary, items };
}

/** Whether a file under svc's Privilege paths is svc's own. */
export function isOwnPrivilegeFile(text: string): boolean {
  return text.startsWith(SUDOERS_MARKER) || text.startsWith(POLKIT_ADMIN_MARKER);
}

/** The Privilege enforcer; see the module documentation. */
export const privilegeEnforcer = desktopEnforcer<PrivilegePolicy, PrivilegePlan, PrivilegeState>({
  type: privilegeType.wireName,
  notifiesUsers: false,
  check: (policy) => checkedContent(policy, privilegeType),
  needs: [
    { anyOf: ["/etc/sudoers"], missing: "sudo is not installed on this node (no /etc/sudoers)" },
    { command: "visudo", missing: "visudo is not installed on this node (Debian package sudo)" },
  ],
  // Group members change what sudo and polkit answer; polkit or pkcheck may arrive later.
  reads: ["/etc/group", "/etc/passwd", "/etc/polkit-1", "/usr/bin/pkcheck"],
  isOwnContent: isOwnPrivilegeFile,
  plan: planPrivilege,
  vet: (io, p) => vetSudoers(io, p.sudoers),
  transaction: {
    what: "the sudoers file",
    // On the node itself the whole configuration is checked with the new file in place; anything else than a
    // clean check puts the previous file back, so sudo keeps working.
    activate: async (io) => {
      if (io.fs.root !== "/") return undefined;
      const check = await checkSudoConfig(io);
      return check.ok ? undefined : `visudo -c refused the configuration with svc's file: ${check.words}`;
    },
    reactivate: () => Promise.resolve(),
    note: " (the previous sudoers file is back; sudo is as it was)",
  },
  readBack: readBackPrivilege,
  report: (checked, context) => report(checked, context),
});
