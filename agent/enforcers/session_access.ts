/**
 * SessionAccess: who may have a session, and when.
 *
 * Every policy is re-validated (server data is untrusted; its rules must also compile here, e.g. a time zone this
 * agent knows) and all of them compile into one rule set (`shared/session_access_rules.ts`: deny beats allow,
 * windows across midnight, each policy's time zone). Two layers enforce it:
 *
 * 1. logind, always (`session_access/session_timer.ts`): sessions outside their allowed time are locked or ended,
 *    users warned before; the timer stops when the last policy goes.
 * 2. pam_time, with `pam_enforcement` (`session_access/pam_time.ts`): svc's block in `/etc/security/time.conf`
 *    and `pam_time.so` in the account stack through a `pam-auth-update` profile.
 *
 * A desktop type over `desktop_enforcer.ts`: re-validation, the writing of time.conf and the profile (atomic,
 * original backed up, tamper-watched), their release, nothing-to-do and the rollup are the skeleton's. The PAM
 * stack and the timer are its {@linkcode Effects}. Order keeps a restart safe and fails open: enabling writes
 * time.conf first, then the profile, then runs pam-auth-update, then starts the timer (so a lock never happens
 * for a rule pam_time would not know); withdrawing runs pam-auth-update without the profile first (the profile
 * stays while that fails), takes svc's block out of time.conf even where its original cannot come back, and only
 * then are the files released.
 *
 * @module
 */

import { sessionAccessType } from "../../shared/policy_types/session_access.ts";
import type { SessionAccessPolicy } from "../../shared/gen/svc/policy/v1/session_access_pb.ts";
import { PolicyContentError } from "../../shared/policy_types/errors.ts";
import {
  compileSessionAccess,
  type SessionRuleSet,
  WEEK_MINUTES,
} from "../../shared/session_access_rules.ts";
import type { CachedPolicy, Enforcer, ItemResult } from "../sync/types.ts";
import { checkedContent } from "./revalidate.ts";
import { type Checked, desktopEnforcer, type DesktopPlan, summarize } from "./desktop_enforcer.ts";
import { accountGroups } from "./node_accounts.ts";
import {
  PAM_PROFILE,
  PAM_TIME_PROFILE,
  pamAuthUpdate,
  type PamPlan,
  type PamReading,
  pamTool,
  readPamTime,
  renderBlock,
  TIME_CONF,
  withBlock,
} from "./session_access/pam_time.ts";
import { SessionTimer } from "./session_access/session_timer.ts";

export { PAM_PROFILE, pamTimes, TIME_CONF } from "./session_access/pam_time.ts";

/** Options of {@linkcode createSessionAccessEnforcer}. */
export interface SessionAccessOptions {
  /** Milliseconds between two checks of the sessions; default 30 s. */
  tickMs?: number;
  /** Clock in milliseconds; default `Date.now`. */
  now?: () => number;
}

/** The SessionAccess enforcer, with its session check exposed for tests. */
export interface SessionAccessEnforcer extends Enforcer {
  /** Checks every session once now; resolves when done. */
  tick(): Promise<void>;
  /** Whether the session timer runs. */
  readonly active: boolean;
}

/** What the type lands and enforces. */
interface SessionPlan extends DesktopPlan {
  ruleSet: SessionRuleSet;
  /** Local account → its groups. */
  accounts: Map<string, Set<string>>;
  /** With pam_enforcement: the node's PAM tool, and svc's block (or why it cannot be rendered). */
  pam?: PamPlan;
  /** What enabling pam_time in the stack ran into, set when applied. */
  stackProblem?: string;
}

/** What the node shows after the sync: whether loginctl is there, and pam_time as read back. */
interface SessionState extends PamReading {
  logind: boolean;
}

/** A policy's content, checked and compiled on its own (a time zone this agent does not know is refused). */
function checked(policy: CachedPolicy): SessionAccessPolicy {
  const content = checkedContent(policy, sessionAccessType);
  try {
    compileSessionAccess([{ id: policy.id, name: policy.name, content }]);
  } catch (err) {
    throw new PolicyContentError((err as Error).message);
  }
  return content;
}

/** One policy: each of its rules as logind (and pam_time) enforce it, then the pam_time items. */
function report(
  { policy, message: content }: Checked<SessionAccessPolicy>,
  plan: SessionPlan,
  state: SessionState,
) {
  const { ruleSet, accounts } = plan;
  const { logind, pamAccounts } = state;
  const items = ruleSet.rules.filter((r) => r.policyId === policy.id).map((rule): ItemResult => {
    const item: ItemResult = {
      schemaId: "rules",
      key: rule.name,
      status: logind ? "COMPLIANT" : "NON_COMPLIANT",
      message: `${rule.effect} for ${[...rule.users, ...rule.groups.map((g) => `%${g}`)].join(", ")}: ` +
        `${rule.minutes.reduce((a, b) => a + b, 0) === WEEK_MINUTES ? "at all times" : "in its windows"}` +
        (rule.timeZone ? ` (${rule.timeZone})` : " (node time)") +
        (logind
          ? `; sessions ${ruleSet.endAction === "logout" ? "ended" : "locked"} outside allowed time`
          : "; loginctl is missing, sessions are not locked") +
        (content.pamEnforcement ? "; logins refused by pam_time" : ""),
    };
    if (!content.pamEnforcement || !pamAccounts) return item;
    const members = [...accounts].filter(([, groups]) => rule.groups.some((g) => groups.has(g)))
      .map(([name]) => name);
    const users = [...new Set([...rule.users, ...members])].filter((u) => u !== "root").sort();
    const missing = users.filter((u) => pamAccounts.get(u) !== true);
    const unresolved = rule.groups.filter((g) => ![...accounts.values()].some((groups) => groups.has(g)));
    return {
      ...item,
      status: missing.length ? "NON_COMPLIANT" : item.status,
      message: item.message +
        (missing.length ? `; no pam_time line read back for ${missing.join(", ")}` : "") +
        (unresolved.length
          ? `; group(s) ${unresolved.join(", ")} have no local members, so pam_time cannot name them ` +
            "(directory members are still locked through logind)"
          : ""),
    };
  });
  if (content.pamEnforcement) items.push(...state.pamItems);
  const notInEffect = () =>
    items.filter((i) => i.status !== "COMPLIANT").map((i) => `${i.key}: ${i.message}`).slice(0, 3).join("; ");
  const words = { inEffect: () => `${items.filter((i) => i.schemaId === "rules").length} rule(s) enforced` };
  return {
    ...summarize(items, { ...words, noun: "rule(s)", noneApplies: notInEffect, otherwise: notInEffect }),
    items,
  };
}

/** Builds the enforcer; see the module documentation. */
export function createSessionAccessEnforcer(options: SessionAccessOptions = {}): SessionAccessEnforcer {
  const now = options.now ?? Date.now;
  const timer = new SessionTimer({ tickMs: options.tickMs ?? 30_000, now });
  const enforcer = desktopEnforcer<SessionAccessPolicy, SessionPlan, SessionState>({
    type: sessionAccessType.wireName,
    notifiesUsers: false,
    check: checked,
    needs: [],
    // Accounts and group memberships decide whose pam_time lines are written.
    reads: ["/etc/passwd", "/etc/group"],
    async plan(valid, io) {
      let ruleSet: SessionRuleSet;
      try {
        ruleSet = compileSessionAccess(
          valid.map(({ policy: { id, name }, message }) => ({ id, name, content: message })),
        );
      } catch (err) {
        return (err as Error).message;
      }
      const accounts = await accountGroups(io);
      const files = new Map<string, string>();
      if (!ruleSet.pamEnforcement) return { files, ruleSet, accounts };
      let block: PamPlan["block"];
      try {
        block = renderBlock(ruleSet, accounts, now());
      } catch (err) {
        block = (err as Error).message;
      }
      const current = await io.fs.readTextFile(TIME_CONF) ?? "";
      // A block that cannot be rendered leaves the one in force as it is.
      if (typeof block !== "string") files.set(TIME_CONF, withBlock(current, block.lines));
      else if (io.managedPaths().includes(TIME_CONF)) files.set(TIME_CONF, current);
      const tool = await pamTool(io);
      if (tool === "debian") files.set(PAM_PROFILE, PAM_TIME_PROFILE);
      return { files, ruleSet, accounts, pam: { tool, block } };
    },
    effects: {
      async withdraw(io, wanted, { unwanted, changed }) {
        if (!wanted) timer.stop();
        const keep: string[] = [];
        if (unwanted.includes(PAM_PROFILE)) {
          const problem = await pamAuthUpdate(io, ["--remove", "svc-time"]);
          if (problem) {
            io.logger.error("pam_time could not be removed from the PAM stack", { error: problem });
            keep.push(PAM_PROFILE);
          }
        }
        if (unwanted.includes(TIME_CONF)) {
          // Fail open: the block goes even when the stack could not be changed (pam_time then has no line).
          const text = await io.fs.readTextFile(TIME_CONF) ?? "";
          if (await io.writeManaged(TIME_CONF, withBlock(text, []))) changed.push(TIME_CONF);
        }
        return keep;
      },
      async apply(io, plan, landed) {
        if (plan.pam?.tool === "debian") {
          const unwritten = landed.failed.get(PAM_PROFILE);
          const refused = unwritten ? undefined : await pamAuthUpdate(io, ["--enable", "svc-time"]);
          plan.stackProblem = unwritten ?? (refused && `pam-auth-update failed: ${refused}`);
        }
        timer.start(io, plan.ruleSet);
        await timer.tick();
      },
    },
    async readBack(io, { pam, stackProblem }, { failed }) {
      const logind = (await io.runner.which("loginctl")) !== undefined;
      return { logind, ...(pam ? await readPamTime(io, pam, { stackProblem, failed }) : { pamItems: [] }) };
    },
    report: (checked, { plan, state }) => report(checked, plan, state),
  });
  return {
    ...enforcer,
    get active() {
      return timer.active;
    },
    tick: () => timer.tick(),
    // The residue is the running lock timer.
    residue: "when loaded",
    hasResidue: () => Promise.resolve(timer.active),
  };
}

/** The SessionAccess enforcer of the agent. */
export const sessionAccessEnforcer: SessionAccessEnforcer = createSessionAccessEnforcer();
