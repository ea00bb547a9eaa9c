/**
 * SessionAccess: who may have a session, and when.
 *
 * Every policy is re-validated (server data is untrusted) and all of them compile into one rule set
 * (`shared/session_access_rules.ts`: deny beats allow, windows across midnight, each policy's time
 * zone). Two layers enforce it:
 *
 * 1. logind, always: a timer (every {@linkcode SessionAccessOptions.tickMs}) lists the logind
 *    sessions; a restricted user whose allowed time ends within one of the warning minutes gets one
 *    desktop notification per warning (the notification path of `agent/notify.ts`); once outside the
 *    allowed time the session is locked (`loginctl lock-session`) or ended
 *    (`loginctl terminate-session`), again on every tick while it stays outside. root (uid 0) is never
 *    touched. The timer stops when the last policy goes.
 * 2. pam_time, with `pam_enforcement`: one marked block in `/etc/security/time.conf` (one line per
 *    restricted account, its allowed times in the node's local time for the coming week; members of
 *    named groups resolved from `/etc/group` and `/etc/passwd`), and `pam_time.so` in the account
 *    stack. On Debian this is a `pam-auth-update` profile (`/usr/share/pam-configs/svc-time`) enabled
 *    with `pam-auth-update --package` (with `--root` under a test root). authselect systems
 *    (Fedora/RHEL) need a one-time manual step (a custom profile carrying `pam_time.so`), which the
 *    compliance item names; svc never edits authselect's generated files.
 *
 * Order keeps a restart safe and fails open: enabling writes time.conf first, then the profile, then
 * runs pam-auth-update (which writes each file atomically); removing runs pam-auth-update without the
 * profile first, and only then drops the profile and the time.conf block. Every file goes through
 * `writeManaged` (atomic, original backed up, tamper-watched). A rendered block is checked line by
 * line before it is written.
 *
 * @module
 */

import { sessionAccessType } from "../../shared/policy_types/session_access.ts";
import {
  compileSessionAccess,
  decide,
  minutesUntilEnd,
  ranges,
  type SessionRuleSet,
  type Subject,
  WEEK_MINUTES,
  weeklyTimeline,
} from "../../shared/session_access_rules.ts";
import { isActiveGraphical, notifySession, parseProperties, parseSessionList } from "../notify.ts";
import {
  type CachedPolicy,
  type ComplianceStatusName,
  type Enforcer,
  type EnforcerIO,
  type ItemResult,
  type PolicyResult,
  rollupStatus,
  type SyncResult,
} from "../sync/types.ts";
import { checkedContent, revalidate } from "./revalidate.ts";
import { localAccounts } from "./local_accounts.ts";

/** Node paths svc manages for pam_time. */
export const TIME_CONF = "/etc/security/time.conf";
export const PAM_PROFILE = "/usr/share/pam-configs/svc-time";
const COMMON_ACCOUNT = "/etc/pam.d/common-account";
const BEGIN = "# BEGIN svc session access (managed by svc-agent; edits are overwritten)";
const END = "# END svc session access";

/** PAM services of local logins (text consoles and display managers). */
export const LOGIN_SERVICES = [
  "login",
  "gdm-password",
  "gdm-autologin",
  "lightdm",
  "lightdm-autologin",
  "sddm",
  "sddm-autologin",
  "xdm",
];

const PROFILE = `Name: svc session access hours (pam_time)
Default: yes
Priority: 0
Account-Type: Additional
Account:
\trequired\t\t\tpam_time.so
`;

const DAY_CODES = ["Mo", "Tu", "We", "Th", "Fr", "Sa", "Su"];
/** pam_time reads lines into a fixed buffer; longer lines are cut. */
const MAX_LINE = 900;

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

/** `Mo0800-1700|Tu0800-1700` for a week bitmap of allowed minutes; "" when always allowed. */
export function pamTimes(bits: Uint8Array): string {
  if (bits.every((b) => b === 1)) return "";
  const parts: string[] = [];
  const clock = (m: number) =>
    `${String(Math.floor(m / 60)).padStart(2, "0")}${String(m % 60).padStart(2, "0")}`;
  for (const { from, to } of ranges(bits)) {
    for (let day = Math.floor(from / 1440); day * 1440 < to && day < 7; day++) {
      const start = Math.max(from, day * 1440) - day * 1440;
      const end = Math.min(to, (day + 1) * 1440) - day * 1440;
      parts.push(`${DAY_CODES[day]}${clock(start)}-${clock(end)}`);
    }
  }
  return parts.length ? parts.join("|") : "!Al0000-2400";
}

const LINE_RE = /^[A-Za-z0-9_|.-]+;\*;[A-Za-z0-9_.@-]+\$?;!?(?:(?:Mo|Tu|We|Th|Fr|Sa|Su|Al)\d{4}-\d{4}\|?)+$/;

/** The time.conf text with svc's block replaced by `block` (or removed when empty). */
export function withBlock(text: string, block: string[]): string {
  const lines = text.split("\n");
  const begin = lines.indexOf(BEGIN);
  const end = lines.indexOf(END);
  let kept = lines;
  if (begin >= 0 && end > begin) kept = [...lines.slice(0, begin), ...lines.slice(end + 1)];
  let body = kept.join("\n");
  if (body !== "" && !body.endsWith("\n")) body += "\n";
  return block.length ? `${body}${BEGIN}\n${block.join("\n")}\n${END}\n` : body;
}

/** The lines of svc's block in a time.conf text, or undefined when there is none. */
export function readBlock(text: string): string[] | undefined {
  const lines = text.split("\n");
  const begin = lines.indexOf(BEGIN);
  const end = lines.indexOf(END);
  return begin >= 0 && end > begin ? lines.slice(begin + 1, end) : undefined;
}

/** Builds the enforcer; see the module documentation. */
export function createSessionAccessEnforcer(options: SessionAccessOptions = {}): SessionAccessEnforcer {
  const tickMs = options.tickMs ?? 30_000;
  const now = options.now ?? Date.now;
  let set: SessionRuleSet | undefined;
  let io: EnforcerIO | undefined;
  let timer: ReturnType<typeof setInterval> | undefined;
  let ticking: Promise<void> | undefined;
  /** `session:warning minute:end minute` of warnings already shown. */
  const warned = new Set<string>();

  async function groupsOf(user: string): Promise<string[]> {
    const groups = new Set((await localAccounts(io!)).get(user) ?? []);
    const out = await io!.runner.run("id", ["-nG", "--", user], { timeoutMs: 5000 });
    if (out.success) out.stdout.trim().split(/\s+/).filter(Boolean).forEach((g) => groups.add(g));
    return [...groups];
  }

  async function checkSessions(): Promise<void> {
    if (!set || !io) return;
    const { runner, logger } = io;
    const list = await runner.run("loginctl", ["list-sessions", "--no-legend", "-o", "json"], {
      timeoutMs: 5000,
    });
    if (!list.success) return logger.debug("logind sessions unavailable", { reason: list.stderr.trim() });
    const at = now();
    const horizon = Math.max(0, ...set.warningMinutes);
    for (const session of parseSessionList(list.stdout)) {
      if (session.uid === 0 || session.user === "root") continue;
      const show = await runner.run("loginctl", ["show-session", session.id], { timeoutMs: 5000 });
      const props = show.success ? parseProperties(show.stdout) : {};
      if ((props.Class ?? "user") !== "user") continue;
      const subject: Subject = { user: session.user, groups: await groupsOf(session.user) };
      const decision = decide(set, subject, at);
      if (!decision.restricted) continue;
      if (!decision.allowed) {
        const verb = set.endAction === "logout" ? "terminate-session" : "lock-session";
        const out = await runner.run("loginctl", [verb, session.id], { timeoutMs: 10_000 });
        logger.info("session outside its allowed time", {
          user: session.user,
          session: session.id,
          action: verb,
          rule: decision.rule?.name,
          ok: out.success,
        });
        continue;
      }
      const left = minutesUntilEnd(set, subject, at, horizon);
      if (left === undefined || left === 0) continue;
      const endMinute = Math.floor(at / 60_000) + left;
      const due = set.warningMinutes.filter((w) =>
        left <= w && !warned.has(`${session.id}:${w}:${endMinute}`)
      );
      if (due.length === 0) continue;
      for (const w of due) warned.add(`${session.id}:${w}:${endMinute}`);
      if (!isActiveGraphical(props)) continue;
      const ending = set.endAction === "logout" ? "you will be logged out" : "your screen will be locked";
      await notifySession(runner, logger, session, {
        title: "Your computer time ends soon",
        message: `Your allowed time ends in ${left} minute${left === 1 ? "" : "s"}; then ${ending}.`,
        urgency: "critical",
      });
    }
  }

  function tick(): Promise<void> {
    ticking ??= checkSessions().catch((err) => {
      io?.logger.warn("session check failed", { error: (err as Error).message });
    }).finally(() => (ticking = undefined));
    return ticking;
  }

  function stop(): void {
    if (timer !== undefined) clearInterval(timer);
    timer = undefined;
    set = undefined;
    warned.clear();
  }

  /** The pam_time block lines for the coming week, or a problem. */
  async function renderBlock(ruleSet: SessionRuleSet): Promise<{ lines: string[]; covered: Set<string> }> {
    const accounts = await localAccounts(io!);
    const users = new Set<string>();
    for (const rule of ruleSet.rules) {
      rule.users.forEach((u) => users.add(u));
      for (const [name, groups] of accounts) if (rule.groups.some((g) => groups.has(g))) users.add(name);
    }
    users.delete("root");
    const subjects = [...users].sort().map((user) => ({ user, groups: [...(accounts.get(user) ?? [])] }));
    const timeline = weeklyTimeline(ruleSet, subjects, { viewZone: "", at: now() });
    const services = [...LOGIN_SERVICES, ...(ruleSet.includeSsh ? ["sshd"] : [])].join("|");
    const lines: string[] = [];
    const covered = new Set<string>();
    for (const { user } of subjects) {
      const bits = timeline.get(user) ?? new Uint8Array(WEEK_MINUTES).fill(1);
      const times = pamTimes(bits);
      covered.add(user);
      if (!times) continue;
      const line = `${services};*;${user};${times}`;
      if (line.length > MAX_LINE || !LINE_RE.test(line)) {
        throw new Error(
          `the pam_time line for ${user} cannot be written (too many windows or an unusual name)`,
        );
      }
      lines.push(line);
    }
    return { lines, covered };
  }

  /** Which PAM configuration tool the node has. */
  async function pamTool(): Promise<"debian" | "authselect" | "none"> {
    if (await io!.fs.exists("/usr/sbin/pam-auth-update") || await io!.fs.exists("/usr/share/pam-configs")) {
      return "debian";
    }
    if (await io!.fs.exists("/etc/authselect") || await io!.fs.exists("/usr/bin/authselect")) {
      return "authselect";
    }
    return "none";
  }

  async function pamAuthUpdate(args: string[]): Promise<string | undefined> {
    const root = io!.fs.root;
    const out = await io!.runner.run(
      "pam-auth-update",
      [...(root === "/" ? [] : ["--root", root]), "--package", ...args],
      { timeoutMs: 60_000, env: { DEBIAN_FRONTEND: "noninteractive" } },
    );
    return out.success ? undefined : (out.stderr.trim() || out.stdout.trim() || `exit code ${out.code}`);
  }

  async function pamTimeInStack(): Promise<boolean> {
    const text = await io!.fs.readTextFile(COMMON_ACCOUNT) ?? "";
    return text.split("\n").some((l) => /^\s*account\s+\S+\s+pam_time\.so\b/.test(l));
  }

  /** Removes every pam_time restriction svc made, PAM stack first. */
  async function disablePam(changed: string[]): Promise<string | undefined> {
    let problem: string | undefined;
    if (io!.managedPaths().includes(PAM_PROFILE)) {
      problem = await pamAuthUpdate(["--remove", "svc-time"]);
      if (!problem && await io!.releaseManaged(PAM_PROFILE)) changed.push(PAM_PROFILE);
    }
    if (io!.managedPaths().includes(TIME_CONF)) {
      // Fail open: the block goes even when the stack could not be changed (pam_time then has no line).
      const text = await io!.fs.readTextFile(TIME_CONF) ?? "";
      const rest = withBlock(text, []);
      if (await io!.writeManaged(TIME_CONF, rest)) changed.push(TIME_CONF);
      if (await io!.releaseManaged(TIME_CONF)) changed.push(TIME_CONF);
    }
    return problem;
  }

  return {
    type: sessionAccessType.wireName,
    notifiesUsers: false,

    get active() {
      return timer !== undefined;
    },

    tick,

    hasResidue() {
      return Promise.resolve(timer !== undefined);
    },

    // Accounts and group memberships decide whose pam_time lines are written.
    watches: () => ["/etc/passwd", "/etc/group"],

    async sync(policies: CachedPolicy[], syncIo: EnforcerIO): Promise<SyncResult> {
      io = syncIo;
      const changed: string[] = [];
      const checked = revalidate(sessionAccessType.wireName, policies, {
        check: (policy) => checkedContent(policy, sessionAccessType),
        logger: syncIo.logger,
      });
      const results: PolicyResult[] = checked.rejected;
      const valid = checked.valid.map(({ policy, message }) => ({ policy, content: message }));
      let ruleSet: SessionRuleSet | undefined;
      if (valid.length) {
        try {
          ruleSet = compileSessionAccess(
            valid.map(({ policy, content }) => ({ id: policy.id, name: policy.name, content })),
          );
        } catch (err) {
          for (const { policy } of valid) {
            results.push({
              policyId: policy.id,
              status: "ERROR",
              message: (err as Error).message,
              items: [],
            });
          }
          valid.length = 0;
        }
      }
      if (!ruleSet || valid.length === 0) {
        stop();
        const problem = await disablePam(changed);
        if (problem) {
          syncIo.logger.error("pam_time could not be removed from the PAM stack", { error: problem });
        }
        return { policies: results, changed };
      }

      // Layer 2 first, so a lock never happens for a rule pam_time would not know.
      const pamItems: ItemResult[] = [];
      /** Per account: whether the time.conf read back carries its line (accounts always allowed need none). */
      let pamAccounts: Map<string, boolean> | undefined;
      const accounts = await localAccounts(syncIo);
      const item = (key: string, status: ComplianceStatusName, message: string): ItemResult => ({
        schemaId: "pam",
        key,
        status,
        message,
      });
      if (ruleSet.pamEnforcement) {
        const tool = await pamTool();
        try {
          const { lines, covered } = await renderBlock(ruleSet);
          const current = await syncIo.fs.readTextFile(TIME_CONF) ?? "";
          if (await syncIo.writeManaged(TIME_CONF, withBlock(current, lines))) changed.push(TIME_CONF);
          const back = readBlock(await syncIo.fs.readTextFile(TIME_CONF) ?? "");
          pamAccounts = new Map([...covered].map((user) => {
            const own = lines.filter((l) => l.split(";")[2] === user);
            return [user, own.every((l) => back?.includes(l) === true)];
          }));
          const readBack = (back ?? []).join("\n") === lines.join("\n");
          pamItems.push(
            !readBack
              ? item(TIME_CONF, "NON_COMPLIANT", "the svc block reads back differently")
              : lines.length === 0
              // Nothing to write is not a failure: no local account is restricted, so pam_time has nothing to refuse.
              ? item(
                TIME_CONF,
                "INAPPLICABLE",
                "no local account is restricted by these rules, so pam_time has no line to refuse " +
                  "(accounts added later are picked up; directory accounts are locked through logind)",
              )
              : item(TIME_CONF, "COMPLIANT", `${lines.length} line(s) for ${covered.size} account(s)`),
          );
        } catch (err) {
          pamItems.push(item(TIME_CONF, "ERROR", (err as Error).message));
        }
        if (tool === "debian") {
          if (await syncIo.writeManaged(PAM_PROFILE, PROFILE)) changed.push(PAM_PROFILE);
          const problem = await pamAuthUpdate(["--enable", "svc-time"]);
          pamItems.push(
            problem
              ? item("pam stack", "ERROR", `pam-auth-update failed: ${problem}`)
              : await pamTimeInStack()
              ? item(
                "pam stack",
                "COMPLIANT",
                `pam_time.so in ${COMMON_ACCOUNT} (pam-auth-update profile svc-time)`,
              )
              : item("pam stack", "NON_COMPLIANT", `pam_time.so is not in ${COMMON_ACCOUNT}`),
          );
        } else if (tool === "authselect") {
          pamItems.push(item(
            "pam stack",
            "NON_COMPLIANT",
            "authselect system: one manual step is needed — create a custom profile (authselect create-profile " +
              "svc --base-on <current>), add 'account required pam_time.so' to its system-auth and password-auth, " +
              "and select it (authselect select custom/svc); logind enforcement works meanwhile",
          ));
        } else {
          pamItems.push(
            item("pam stack", "NON_COMPLIANT", "no pam-auth-update or authselect: pam_time not enabled"),
          );
        }
      } else {
        const problem = await disablePam(changed);
        if (problem) {
          syncIo.logger.error("pam_time could not be removed from the PAM stack", { error: problem });
        }
      }

      // Layer 1: the session timer.
      set = ruleSet;
      if (timer === undefined) {
        timer = setInterval(() => void tick(), tickMs);
        // The timer never keeps the agent process alive on its own.
        Deno.unrefTimer(timer as unknown as number);
      }
      const logind = await syncIo.runner.which("loginctl");
      await tick();

      const ruleSetNow = ruleSet;
      for (const { policy, content } of valid) {
        const items: ItemResult[] = ruleSetNow.rules.filter((r) => r.policyId === policy.id).map((
          rule,
        ): ItemResult => ({
          schemaId: "rules",
          key: rule.name,
          status: logind ? "COMPLIANT" : "NON_COMPLIANT",
          message: `${rule.effect} for ${[...rule.users, ...rule.groups.map((g) => `%${g}`)].join(", ")}: ` +
            `${
              rule.minutes.reduce((a, b) => a + b, 0) === WEEK_MINUTES ? "at all times" : "in its windows"
            }` +
            (rule.timeZone ? ` (${rule.timeZone})` : " (node time)") +
            (logind
              ? `; sessions ${ruleSetNow.endAction === "logout" ? "ended" : "locked"} outside allowed time`
              : "; loginctl is missing, sessions are not locked") +
            (content.pamEnforcement ? "; logins refused by pam_time" : ""),
        })).map((ruleItem): ItemResult => {
          if (!content.pamEnforcement || !pamAccounts) return ruleItem;
          const rule = ruleSetNow.rules.find((r) => r.policyId === policy.id && r.name === ruleItem.key)!;
          const members = [...accounts].filter(([, groups]) => rule.groups.some((g) => groups.has(g)))
            .map(([name]) => name);
          const users = [...new Set([...rule.users, ...members])].filter((u) => u !== "root").sort();
          const missing = users.filter((u) => pamAccounts!.get(u) !== true);
          const unresolved = rule.groups.filter((g) =>
            ![...accounts.values()].some((groups) => groups.has(g))
          );
          return {
            ...ruleItem,
            status: missing.length ? "NON_COMPLIANT" : ruleItem.status,
            message: ruleItem.message +
              (missing.length ? `; no pam_time line read back for ${missing.join(", ")}` : "") +
              (unresolved.length
                ? `; group(s) ${unresolved.join(", ")} have no local members, so pam_time cannot name them ` +
                  "(directory members are still locked through logind)"
                : ""),
          };
        });
        if (content.pamEnforcement) items.push(...pamItems);
        const status = rollupStatus(items);
        results.push({
          policyId: policy.id,
          status,
          message: status === "COMPLIANT"
            ? `${items.filter((i) => i.schemaId === "rules").length} rule(s) enforced`
            : items.filter((i) => i.status !== "COMPLIANT").map((i) => `${i.key}: ${i.message}`).slice(0, 3)
              .join("; "),
          items,
        });
      }
      return { policies: results, changed };
    },
  };
}

/** The SessionAccess enforcer of the agent. */
export const sessionAccessEnforcer: SessionAccessEnforcer = createSessionAccessEnforcer();
