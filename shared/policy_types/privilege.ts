/**
 * Privilege: who administers the node (sudo rights and polkit administrator identities). User and group names
 * end up in a sudoers file and in polkit's JavaScript, so each is checked as sudoers(5) reads names: no
 * characters sudoers gives meaning, nothing that reads as an alias (`ALL`). root is always an administrator,
 * so naming it (as a user or as the group root) is refused as a mistake. Several policies merge per principal
 * (`shared/privilege_rules.ts`).
 */
import {
  PrivilegeEffect,
  PrivilegeEffectSchema,
  type PrivilegePolicy,
  PrivilegePolicySchema,
} from "../gen/svc/policy/v1/privilege_pb.ts";
import { defineType, enumNumbers } from "./define.ts";
import { identifier, sudoersGroupName, sudoersUserName } from "./sanitizers.ts";

const NOT_ROOT = (value: string) =>
  value === "root" ? "root is always an administrator; remove this entry" : undefined;

/** The Privilege policy type. */
export const privilegeType = defineType<PrivilegePolicy>({
  wireName: "Privilege",
  label: "Administrators",
  description: "Who administers the node: sudo rights and the administrators polkit accepts.",
  schema: PrivilegePolicySchema,
  typedContentCase: "privilegePolicy",
  merge: "priority_merge",
  names: "proto",
  check(message, issues) {
    if (message.entries.length === 0 && !message.localSudoGroupNotAdmin) {
      issues.add(
        "entries",
        "policy content needs at least one rule (an entry, or local_sudo_group_not_admin)",
      );
    }
    const seen = new Set<string>();
    message.entries.forEach((entry, i) => {
      const at = `entries[${i}]`;
      issues.optional(`${at}.name`, entry.name, identifier(64));
      if ((entry.user === "") === (entry.group === "")) {
        issues.add(`${at}.user`, "set exactly one of user and group");
      } else if (entry.user !== "") {
        if (
          issues.check(`${at}.user`, entry.user, sudoersUserName, NOT_ROOT) && seen.has(`u:${entry.user}`)
        ) {
          issues.add(`${at}.user`, `user "${entry.user}" is listed twice; keep one entry per user`);
        }
        seen.add(`u:${entry.user}`);
      } else {
        if (
          issues.check(`${at}.group`, entry.group, sudoersGroupName, NOT_ROOT) && seen.has(`g:${entry.group}`)
        ) {
          issues.add(`${at}.group`, `group "${entry.group}" is listed twice; keep one entry per group`);
        }
        seen.add(`g:${entry.group}`);
      }
      issues.enumValue(`${at}.effect`, entry.effect, enumNumbers(PrivilegeEffectSchema), {
        hint: "choose an effect: PRIVILEGE_EFFECT_ALLOW or PRIVILEGE_EFFECT_DENY",
      });
      if (entry.sudoNopasswd && entry.effect === PrivilegeEffect.DENY) {
        issues.add(
          `${at}.sudo_nopasswd`,
          "only applies to an allowed principal; clear it or allow the entry",
        );
      }
    });
  },
});
