/**
 * SessionAccess rule compiler: every SessionAccess policy reaching a node (or bound to a node group)
 * compiled into one rule set, and the questions asked of it — may this account have a session at this
 * moment, how long until its allowed time ends, who may log in when during a week.
 *
 * Semantics (from the content message): a rule applies to its users and to members of its groups. A
 * DENY rule refuses sessions inside its windows (always, without windows) and beats every allow. An
 * account matched by ALLOW rules only may have a session inside the union of their windows (always,
 * when one of them has no windows). An account no rule matches, and root, are never restricted. A
 * window starts on each of its days (every day when none) at `start` and ends at `end`, on the next
 * day when `end` is at or before `start`. Each policy's windows are read in its time zone (the
 * node's when empty).
 *
 * Windows compile to a bitmap of the 10 080 minutes of a local week (Monday 00:00 = 0), so a decision
 * is one time-zone conversion and one lookup per rule.
 *
 * @module
 */

/** Minutes in a week. */
export const WEEK_MINUTES = 7 * 24 * 60;

/** Day names, Monday first, as the week's minute numbering. */
export const WEEKDAY_NAMES = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/** A window as in the content message: weekday numbers 1 (Monday) … 7 (Sunday), "HH:MM" times. */
export interface WindowInput {
  days: readonly number[];
  start: string;
  end: string;
}

/** A rule as in the content message; effect 1 = ALLOW, 2 = DENY. */
export interface RuleInput {
  name: string;
  users: readonly string[];
  groups: readonly string[];
  effect: number;
  windows: readonly WindowInput[];
}

/** The parts of one policy the compiler reads (the content message fits). */
export interface PolicyInput {
  rules: readonly RuleInput[];
  endAction: number;
  warningMinutes: readonly number[];
  pamEnforcement: boolean;
  includeSsh: boolean;
  timeZone: string;
}

/** One compiled rule. */
export interface CompiledRule {
  policyId: string;
  policyName: string;
  /** The rule's name, or `rule N` (1-based) when it has none. */
  name: string;
  users: string[];
  groups: string[];
  effect: "allow" | "deny";
  /** IANA zone, or "" for the node's local time. */
  timeZone: string;
  /** 1 where the local minute of the week is inside one of the windows. */
  minutes: Uint8Array;
}

/** All SessionAccess policies of a node, as one rule set. */
export interface SessionRuleSet {
  rules: CompiledRule[];
  /** "logout" when any policy asks for it, else "lock". */
  endAction: "lock" | "logout";
  /** Union of every policy's warning minutes (30, 15 and 5 for a policy without), descending. */
  warningMinutes: number[];
  pamEnforcement: boolean;
  includeSsh: boolean;
}

/** An account asking for a session. */
export interface Subject {
  user: string;
  groups: readonly string[];
}

/** A decision and the rule that made it. */
export interface Decision {
  allowed: boolean;
  /** Whether any rule applies to the account. */
  restricted: boolean;
  /** The deciding rule: the deny rule in force, or the first allow rule (when allowed). */
  rule?: CompiledRule;
}

/** Default warning minutes of a policy that lists none. */
export const DEFAULT_WARNING_MINUTES = [30, 15, 5];

function clockMinutes(value: string, what: string): number {
  const match = /^([01]\d|2[0-3]):([0-5]\d)$/.exec(value);
  if (!match) throw new Error(`${what} "${value}" is not an HH:MM time`);
  return Number(match[1]) * 60 + Number(match[2]);
}

/** The local-week minute bitmap of a list of windows; no windows → every minute. */
export function windowMinutes(windows: readonly WindowInput[]): Uint8Array {
  const minutes = new Uint8Array(WEEK_MINUTES);
  if (windows.length === 0) return minutes.fill(1);
  for (const window of windows) {
    const start = clockMinutes(window.start, "window start");
    const end = clockMinutes(window.end, "window end");
    const length = end > start ? end - start : end + 1440 - start;
    const days = window.days.length ? window.days : [1, 2, 3, 4, 5, 6, 7];
    for (const day of days) {
      if (!Number.isInteger(day) || day < 1 || day > 7) throw new Error(`weekday ${day} is not 1…7`);
      const from = (day - 1) * 1440 + start;
      for (let m = 0; m < length; m++) minutes[(from + m) % WEEK_MINUTES] = 1;
    }
  }
  return minutes;
}

/** Compiles policies (highest priority first) into one rule set; throws naming a bad value. */
export function compileSessionAccess(
  policies: readonly { id: string; name: string; content: PolicyInput }[],
): SessionRuleSet {
  const rules: CompiledRule[] = [];
  const warnings = new Set<number>();
  let logout = false;
  let pam = false;
  let ssh = false;
  for (const { id, name, content } of policies) {
    if (content.timeZone) checkTimeZone(content.timeZone);
    content.rules.forEach((rule, i) => {
      if (rule.effect !== 1 && rule.effect !== 2) throw new Error(`rule ${i + 1} of "${name}" has no effect`);
      rules.push({
        policyId: id,
        policyName: name,
        name: rule.name || `rule ${i + 1}`,
        users: rule.users.filter((u) => u !== "root"),
        groups: [...rule.groups],
        effect: rule.effect === 2 ? "deny" : "allow",
        timeZone: content.timeZone,
        minutes: windowMinutes(rule.windows),
      });
    });
    for (const m of content.warningMinutes.length ? content.warningMinutes : DEFAULT_WARNING_MINUTES) {
      warnings.add(m);
    }
    if (content.endAction === 2) logout = true;
    if (content.pamEnforcement) {
      pam = true;
      if (content.includeSsh) ssh = true;
    }
  }
  return {
    rules,
    endAction: logout ? "logout" : "lock",
    warningMinutes: [...warnings].sort((a, b) => b - a),
    pamEnforcement: pam,
    includeSsh: ssh,
  };
}

/** Throws when `zone` is not a time zone this runtime knows. */
export function checkTimeZone(zone: string): void {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: zone });
  } catch {
    throw new Error(`time zone "${zone}" is unknown; use an IANA name such as Europe/Berlin`);
  }
}

const formatters = new Map<string, Intl.DateTimeFormat>();
const DAY_INDEX: Record<string, number> = { Mon: 0, Tue: 1, Wed: 2, Thu: 3, Fri: 4, Sat: 5, Sun: 6 };

/** The minute of the local week (Monday 00:00 = 0) of `instant` in `timeZone` ("" = local). */
export function localMinuteOfWeek(instant: Date | number, timeZone: string): number {
  let format = formatters.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat("en-US", {
      timeZone: timeZone || undefined,
      weekday: "short",
      hour: "2-digit",
      minute: "2-digit",
      hourCycle: "h23",
    });
    formatters.set(timeZone, format);
  }
  let day = 0, hour = 0, minute = 0;
  for (const part of format.formatToParts(instant)) {
    if (part.type === "weekday") day = DAY_INDEX[part.value];
    else if (part.type === "hour") hour = Number(part.value);
    else if (part.type === "minute") minute = Number(part.value);
  }
  return day * 1440 + hour * 60 + minute;
}

function applies(rule: CompiledRule, subject: Subject): boolean {
  return rule.users.includes(subject.user) || rule.groups.some((g) => subject.groups.includes(g));
}

/** Whether `subject` may have a session at `instant`; see the module documentation. */
export function decide(set: SessionRuleSet, subject: Subject, instant: Date | number): Decision {
  if (subject.user === "root") return { allowed: true, restricted: false };
  const matching = set.rules.filter((r) => applies(r, subject));
  if (matching.length === 0) return { allowed: true, restricted: false };
  const inside = (r: CompiledRule) => r.minutes[localMinuteOfWeek(instant, r.timeZone)] === 1;
  const deny = matching.find((r) => r.effect === "deny" && inside(r));
  if (deny) return { allowed: false, restricted: true, rule: deny };
  const allows = matching.filter((r) => r.effect === "allow");
  if (allows.length === 0) return { allowed: true, restricted: true };
  const allow = allows.find(inside);
  return allow
    ? { allowed: true, restricted: true, rule: allow }
    : { allowed: false, restricted: true, rule: allows[0] };
}

/**
 * Whole minutes from `instant` until `subject` loses its session (the first minute boundary at which
 * it is not allowed), looking at most `horizon` minutes ahead; undefined when not restricted or
 * allowed throughout the horizon, 0 when not allowed now.
 */
export function minutesUntilEnd(
  set: SessionRuleSet,
  subject: Subject,
  instant: number,
  horizon: number,
): number | undefined {
  const now = decide(set, subject, instant);
  if (!now.restricted) return undefined;
  if (!now.allowed) return 0;
  const base = Math.floor(instant / 60_000) * 60_000;
  for (let k = 1; k <= horizon; k++) {
    if (!decide(set, subject, base + k * 60_000).allowed) return k;
  }
  return undefined;
}

/** A half-open range of minutes of a week, [from, to). */
export interface MinuteRange {
  from: number;
  to: number;
}

/** Ranges of consecutive set minutes of a week bitmap (not joined across Sunday → Monday). */
export function ranges(bits: Uint8Array): MinuteRange[] {
  const out: MinuteRange[] = [];
  let start = -1;
  for (let m = 0; m <= bits.length; m++) {
    const on = m < bits.length && bits[m] === 1;
    if (on && start < 0) start = m;
    if (!on && start >= 0) {
      out.push({ from: start, to: m });
      start = -1;
    }
  }
  return out;
}

/** "Mon 08:00" for a minute of the week; 10080 reads "Mon 00:00" of the next week as "Sun 24:00". */
export function formatWeekMinute(minute: number): string {
  if (minute === WEEK_MINUTES) return "Sun 24:00";
  const day = WEEKDAY_NAMES[Math.floor(minute / 1440)].slice(0, 3);
  const m = minute % 1440;
  return `${day} ${String(Math.floor(m / 60)).padStart(2, "0")}:${String(m % 60).padStart(2, "0")}`;
}

/**
 * Who may log in when during one week read in `viewZone` ("" = local): for each subject, a bitmap of
 * the view zone's local minutes of the week. The week evaluated is the one starting at the Monday
 * 00:00 (view zone) on or before `at`, walked in real minutes, so policies in other zones and their
 * daylight-saving shifts land where they really fall.
 */
export function weeklyTimeline(
  set: SessionRuleSet,
  subjects: readonly Subject[],
  options: { viewZone?: string; at?: number } = {},
): Map<string, Uint8Array> {
  const zone = options.viewZone ?? "";
  const at = Math.floor((options.at ?? Date.now()) / 60_000) * 60_000;
  const weekStart = at - localMinuteOfWeek(at, zone) * 60_000;
  const out = new Map<string, Uint8Array>();
  for (const subject of subjects) out.set(subjectKey(subject), new Uint8Array(WEEK_MINUTES));
  const seen = new Uint8Array(WEEK_MINUTES);
  // One extra hour covers a week that is 60 minutes longer across a daylight-saving change.
  for (let k = 0; k < WEEK_MINUTES + 60; k++) {
    const instant = weekStart + k * 60_000;
    const local = localMinuteOfWeek(instant, zone);
    if (k >= WEEK_MINUTES && local >= 60) break;
    seen[local] = 1;
    for (const subject of subjects) {
      if (decide(set, subject, instant).allowed) out.get(subjectKey(subject))![local] = 1;
    }
  }
  // Local minutes a daylight-saving jump skips take the state of the minute before them.
  for (let m = 1; m < WEEK_MINUTES; m++) {
    if (!seen[m]) { for (const bits of out.values()) bits[m] = bits[m - 1]; }
  }
  return out;
}

/** "alice" for a user, "%staff" for a group. */
export function subjectKey(subject: Subject): string {
  return subject.user ? subject.user : `%${subject.groups[0] ?? ""}`;
}

/**
 * The subjects a rule set names: each user on its own (no groups) and each group as a member that is
 * in no other named group (no user name).
 */
export function namedSubjects(set: SessionRuleSet): Subject[] {
  const users = new Set<string>();
  const groups = new Set<string>();
  for (const rule of set.rules) {
    rule.users.forEach((u) => users.add(u));
    rule.groups.forEach((g) => groups.add(g));
  }
  return [
    ...[...users].sort().map((user) => ({ user, groups: [] as string[] })),
    ...[...groups].sort().map((group) => ({ user: "", groups: [group] })),
  ];
}

/** Result of {@linkcode lockoutCheck}. */
export interface LockoutReport {
  /** Every subject the rules name, with the ranges of the week it may log in. */
  timeline: { subject: string; allowed: MinuteRange[] }[];
  /** Ranges of the week in which no named subject may log in; empty when none. */
  lockouts: MinuteRange[];
  viewZone: string;
}

/**
 * Finds the times of the week at which none of the accounts and groups the rules name may log in
 * (root aside, which is never restricted). The server cannot see a node's other accounts, so those
 * named are the ones that count.
 */
export function lockoutCheck(
  set: SessionRuleSet,
  options: { viewZone?: string; at?: number } = {},
): LockoutReport {
  const subjects = namedSubjects(set);
  const viewZone = options.viewZone ?? (set.rules.find((r) => r.timeZone)?.timeZone ?? "UTC");
  const timeline = weeklyTimeline(set, subjects, { viewZone, at: options.at });
  const anyone = new Uint8Array(WEEK_MINUTES);
  for (const bits of timeline.values()) for (let m = 0; m < WEEK_MINUTES; m++) anyone[m] |= bits[m];
  const nobody = anyone.map((b) => (b ? 0 : 1));
  return {
    timeline: subjects.map((s) => ({
      subject: subjectKey(s),
      allowed: ranges(timeline.get(subjectKey(s))!),
    })),
    lockouts: subjects.length ? ranges(nobody) : [],
    viewZone,
  };
}
