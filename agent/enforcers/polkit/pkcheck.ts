/**
 * Asking the node's polkit authority what it answers, with `pkcheck` run as an account: which rules can be
 * checked that way and what answer a rule's result stands for. The Polkit enforcer's tool driver.
 *
 * @module
 */

import type { PolkitPolicy } from "../../../shared/gen/svc/policy/v1/polkit_pb.ts";
import { POLKIT_RESULT_NAMES } from "../../../shared/polkit_js.ts";
import type { EnforcerIO } from "../../sync/types.ts";
import { passwdEntries } from "../node_accounts.ts";

/** What polkit answers, as pkcheck tells it: yes, no, or an authentication challenge (kept or not). */
export type PolkitAnswer = "yes" | "no" | "challenge" | "challenge_keep";

const EXPECTED_ANSWER: Record<string, PolkitAnswer> = {
  YES: "yes",
  NO: "no",
  AUTH_SELF: "challenge",
  AUTH_ADMIN: "challenge",
  AUTH_SELF_KEEP: "challenge_keep",
  AUTH_ADMIN_KEEP: "challenge_keep",
};

/** What pkcheck answers when `rule` decides; undefined for a rule that does not answer (NOT_HANDLED). */
export function expectedAnswer(rule: PolkitPolicy["rules"][number]): PolkitAnswer | undefined {
  return EXPECTED_ANSWER[POLKIT_RESULT_NAMES[rule.result]];
}

/** Runs a command (the agent's runner, or a test's with a private bus). */
export type RunCommand = (
  cmd: string,
  args: string[],
) => Promise<{ code: number; stdout: string; stderr: string }>;

/**
 * Asks the node's polkit authority what it answers `account` (uid, gid) for `actionId`: `pkcheck` checks its
 * own process started under the account's identity (`setpriv`), so no process of the user needs to exist. The
 * action id is passed as an argument, never as shell text. Resolves the answer, or what went wrong.
 */
export async function pkcheckAs(
  run: RunCommand,
  account: { uid: number; gid: number },
  actionId: string,
): Promise<PolkitAnswer | { error: string }> {
  const r = await run("setpriv", [
    `--reuid=${account.uid}`,
    `--regid=${account.gid}`,
    "--init-groups",
    "sh",
    "-c",
    'exec pkcheck --action-id "$0" --process $$',
    actionId,
  ]);
  if (r.code === 0) return "yes";
  if (r.code === 1 && /not authorized/i.test(r.stderr + r.stdout)) return "no";
  if (r.code === 2) {
    return /retains_authorization_after_challenge=1/.test(r.stdout) ? "challenge_keep" : "challenge";
  }
  return { error: `pkcheck failed (exit ${r.code}): ${(r.stderr || r.stdout).trim().slice(0, 300)}` };
}

/** uid and gid of the accounts in `/etc/passwd` under the agent's root. */
export async function pkcheckAccounts(io: EnforcerIO): Promise<Map<string, { uid: number; gid: number }>> {
  const out = new Map<string, { uid: number; gid: number }>();
  for (const { name, uid, gid } of await passwdEntries(io)) {
    if (/^\d+$/.test(uid) && /^\d+$/.test(gid)) out.set(name, { uid: Number(uid), gid: Number(gid) });
  }
  return out;
}

/**
 * The account a rule can be checked with by pkcheck, or undefined when its decision cannot be evaluated that
 * way: the rule must answer (not NOT_HANDLED), ask nothing of the session (a pkcheck process is neither local
 * nor active) or of action details, exclude no group, and name a user (or nobody, when it applies to all).
 */
export function pkcheckSubject(rule: PolkitPolicy["rules"][number]): string | undefined {
  const m = rule.match;
  if (!expectedAnswer(rule) || rule.actionConditions.length > 0) return undefined;
  if (m?.requireLocal || m?.requireActive || (m?.excludeUnixGroups.length ?? 0) > 0) return undefined;
  const excluded = new Set(m?.excludeUnixUsers ?? []);
  if (m?.unixUsers.length) return m.unixUsers.find((u) => !excluded.has(u));
  if (m?.unixGroups.length) return undefined;
  return excluded.has("nobody") ? undefined : "nobody";
}
