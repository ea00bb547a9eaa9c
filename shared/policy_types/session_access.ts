/**
 * SessionAccess: who may have a session, and when; all policies reaching a node compile into one union.
 * User and group names end up in pam_time configuration and logind calls, times and the time zone in
 * generated timers, so each is checked. root is never restricted, so naming it is refused as a mistake.
 */
import {
  SessionAccessEffectSchema,
  SessionAccessEndActionSchema,
  type SessionAccessPolicy,
  SessionAccessPolicySchema,
  WeekdaySchema,
} from "../gen/svc/policy/v1/session_access_pb.ts";
import { defineType, enumNumbers } from "./define.ts";
import { clockTime, identifier, required, timeZoneName, unixGroupName, unixUserName } from "./sanitizers.ts";

/** The SessionAccess policy type. */
export const sessionAccessType = defineType<SessionAccessPolicy>({
  wireName: "SessionAccess",
  label: "Login hours",
  description: "Which users may log in, and when.",
  schema: SessionAccessPolicySchema,
  typedContentCase: "sessionAccessPolicy",
  merge: "union",
  names: "proto",
  check(message, issues) {
    if (message.rules.length === 0) issues.add("rules", "policy content needs at least one rule");
    issues.enumValue("end_action", message.endAction, enumNumbers(SessionAccessEndActionSchema), {
      allowZero: true,
    });
    issues.optional("time_zone", message.timeZone, timeZoneName);
    message.warningMinutes.forEach((m, i) => {
      if (m < 1 || m > 1440) issues.add(`warning_minutes[${i}]`, "must be between 1 and 1440 minutes");
    });
    if (message.includeSsh && !message.pamEnforcement) {
      issues.add("include_ssh", "only applies with pam_enforcement; enable it or clear include_ssh");
    }
    message.rules.forEach((rule, i) => {
      const at = `rules[${i}]`;
      issues.optional(`${at}.name`, rule.name, identifier(64));
      if (rule.users.length === 0 && rule.groups.length === 0) {
        issues.add(`${at}.users`, "at least one user or group is required");
      }
      issues.each(
        `${at}.users`,
        rule.users,
        unixUserName,
        (v) => v === "root" ? "root is never restricted; remove it" : undefined,
      );
      issues.each(`${at}.groups`, rule.groups, unixGroupName);
      issues.enumValue(`${at}.effect`, rule.effect, enumNumbers(SessionAccessEffectSchema), {
        hint: "choose an effect: SESSION_ACCESS_EFFECT_ALLOW or SESSION_ACCESS_EFFECT_DENY",
      });
      rule.windows.forEach((window, j) => {
        const w = `${at}.windows[${j}]`;
        issues.check(`${w}.start`, window.start, required, clockTime);
        issues.check(`${w}.end`, window.end, required, clockTime);
        window.days.forEach((day, k) => issues.enumValue(`${w}.days[${k}]`, day, enumNumbers(WeekdaySchema)));
      });
    });
  },
});
