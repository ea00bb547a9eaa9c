/**
 * Polkit: authorization rules rendered as one JavaScript rules file per policy. Action ids, prefixes, user
 * and group names, and action-detail keys and values all end up inside generated JavaScript, so each is
 * checked; the description is rendered only as a comment and must stay on one line.
 */
import { type PolkitPolicy, PolkitPolicySchema, PolkitResultSchema } from "../gen/svc/policy/v1/polkit_pb.ts";
import { defineType, enumNumbers } from "./define.ts";
import {
  identifier,
  maxLength,
  polkitActionId,
  required,
  singleLine,
  unixGroupName,
  unixUserName,
} from "./sanitizers.ts";

/** The Polkit policy type. */
export const polkitType = defineType<PolkitPolicy>({
  wireName: "Polkit",
  label: "Privileges",
  description: "Who may do what without a password (polkit rules).",
  schema: PolkitPolicySchema,
  typedContentCase: "polkitPolicy",
  merge: "file_per_policy",
  names: "proto",
  check(message, issues) {
    if (message.rules.length === 0) issues.add("rules", "policy content needs at least one rule");
    message.rules.forEach((rule, i) => {
      const at = `rules[${i}]`;
      issues.optional(`${at}.name`, rule.name, identifier(64));
      issues.check(`${at}.description`, rule.description, singleLine, maxLength(1024));
      if (rule.actionIds.length === 0 && rule.actionPrefixes.length === 0) {
        issues.add(`${at}.action_ids`, "at least one action id (or action prefix) is required");
      }
      issues.each(`${at}.action_ids`, rule.actionIds, polkitActionId);
      issues.each(`${at}.action_prefixes`, rule.actionPrefixes, polkitActionId);
      issues.enumValue(`${at}.result`, rule.result, enumNumbers(PolkitResultSchema), {
        hint: "choose a result such as POLKIT_RESULT_AUTH_ADMIN",
      });
      const match = rule.match;
      if (match) {
        issues.each(`${at}.match.unix_users`, match.unixUsers, unixUserName);
        issues.each(`${at}.match.unix_groups`, match.unixGroups, unixGroupName);
        issues.each(`${at}.match.exclude_unix_users`, match.excludeUnixUsers, unixUserName);
        issues.each(`${at}.match.exclude_unix_groups`, match.excludeUnixGroups, unixGroupName);
      }
      rule.actionConditions.forEach((condition, j) => {
        const c = `${at}.action_conditions[${j}]`;
        issues.check(`${c}.key`, condition.key, required, identifier(128));
        issues.check(`${c}.value`, condition.value, singleLine, maxLength(1024));
      });
    });
  },
});
