/**
 * Kconfig: KDE settings and Kiosk restrictions written as KConfig files into a system overlay, merged by
 * priority. File names become paths in the overlay; groups, keys and values become lines of INI-like files;
 * URL restriction fields are joined with commas; module names become keys. Each is checked accordingly, with
 * the shared rules of `../kconfig_format.ts` (names refused, values escaped), which the agent applies again.
 */
import {
  type KconfigPolicy,
  KconfigPolicySchema,
  KconfigUrlActionSchema,
} from "../gen/svc/policy/v1/kconfig_pb.ts";
import { defineType, enumNumbers } from "./define.ts";
import {
  kconfigFileProblem,
  kconfigGroupProblem,
  kconfigKeyProblem,
  kconfigValueProblem,
} from "../kconfig_format.ts";
import { type Checker, matches, maxLength, singleLine } from "./sanitizers.ts";

const RESTRICTION_KEY = matches(
  /^[A-Za-z0-9_][A-Za-z0-9_./-]{0,127}$/,
  "a name such as action/logout or shell_access",
);
const KCM_NAME = matches(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/, "a module name such as kcm_kscreen");
const NO_COMMA: Checker = (v) =>
  v.includes(",") ? "must not contain ',' (it separates the rule's fields)" : undefined;

/** The Kconfig policy type. */
export const kconfigType = defineType<KconfigPolicy>({
  wireName: "Kconfig",
  label: "KDE settings",
  description: "Plasma and KDE application settings, optionally locked.",
  schema: KconfigPolicySchema,
  typedContentCase: "kconfigPolicy",
  merge: "priority_merge",
  names: "proto",
  check(message, issues) {
    const empty = message.entries.length === 0 && Object.keys(message.actionRestrictions).length === 0 &&
      Object.keys(message.resourceRestrictions).length === 0 && message.urlRestrictions.length === 0 &&
      message.kcmRestrictions.length === 0;
    if (empty) issues.add("", "policy content needs at least one setting: add an entry or a restriction");
    message.entries.forEach((entry, i) => {
      const at = `entries[${i}]`;
      issues.check(`${at}.file`, entry.file, kconfigFileProblem);
      issues.check(`${at}.group`, entry.group, kconfigGroupProblem);
      entry.subgroups.forEach((g, j) => issues.check(`${at}.subgroups[${j}]`, g, kconfigGroupProblem));
      issues.check(`${at}.key`, entry.key, kconfigKeyProblem);
      // One line; backslashes and edge spaces are escaped when written.
      issues.check(`${at}.value`, entry.value, kconfigValueProblem);
    });
    for (const key of Object.keys(message.actionRestrictions)) {
      issues.check(`action_restrictions[${JSON.stringify(key)}]`, key, RESTRICTION_KEY, kconfigKeyProblem);
    }
    for (const key of Object.keys(message.resourceRestrictions)) {
      issues.check(`resource_restrictions[${JSON.stringify(key)}]`, key, RESTRICTION_KEY, kconfigKeyProblem);
    }
    message.urlRestrictions.forEach((rule, i) => {
      const at = `url_restrictions[${i}]`;
      issues.enumValue(`${at}.action`, rule.action, enumNumbers(KconfigUrlActionSchema), {
        hint: "choose an action: KCONFIG_URL_ACTION_OPEN, _LIST or _REDIRECT",
      });
      const fields = {
        referrer_protocol: rule.referrerProtocol,
        referrer_host: rule.referrerHost,
        referrer_path: rule.referrerPath,
        protocol: rule.protocol,
        host: rule.host,
        path: rule.path,
      };
      for (const [name, value] of Object.entries(fields)) {
        issues.check(`${at}.${name}`, value, singleLine, NO_COMMA, maxLength(1024));
      }
    });
    issues.each("kcm_restrictions", message.kcmRestrictions, KCM_NAME);
  },
});
