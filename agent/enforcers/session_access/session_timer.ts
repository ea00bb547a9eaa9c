/**
 * The logind layer of SessionAccess, always on while a policy is: a timer lists the logind sessions every tick; a
 * restricted user whose allowed time ends within one of the warning minutes gets one desktop notification per
 * warning (the notification path of `agent/notify.ts`); once outside the allowed time the session is locked
 * (`loginctl lock-session`) or ended (`loginctl terminate-session`), again on every tick while it stays outside.
 * root (uid 0) is never touched.
 *
 * @module
 */

import {
  decide,
  minutesUntilEnd,
  type SessionRuleSet,
  type Subject,
} from "../../../shared/session_access_rules.ts";
import { isActiveGraphical, notifySession, parseProperties, parseSessionList } from "../../notify.ts";
import type { EnforcerIO } from "../../sync/types.ts";
import { accountGroups } from "../node_accounts.ts";

/** See the module documentation. */
export class SessionTimer {
  readonly #tickMs: number;
  readonly #now: () => number;
  #set: SessionRuleSet | undefined;
  #io: EnforcerIO | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;
  #ticking: Promise<void> | undefined;
  /** `session:warning minute:end minute` of warnings already shown. */
  readonly #warned = new Set<string>();

  constructor(options: { tickMs: number; now: () => number }) {
    this.#tickMs = options.tickMs;
    this.#now = options.now;
  }

  /** Whether the timer runs. */
  get active(): boolean {
    return this.#timer !== undefined;
  }

  /** Enforces `ruleSet` with `io` from now on (the timer starts if it does not run). */
  start(io: EnforcerIO, ruleSet: SessionRuleSet): void {
    this.#io = io;
    this.#set = ruleSet;
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => void this.tick(), this.#tickMs);
    // The timer never keeps the agent process alive on its own.
    Deno.unrefTimer(this.#timer as unknown as number);
  }

  /** Stops the timer and forgets the rules and the warnings shown. */
  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#set = undefined;
    this.#warned.clear();
  }

  /** Checks every session once now; resolves when done. */
  tick(): Promise<void> {
    this.#ticking ??= this.#check().catch((err) => {
      this.#io?.logger.warn("session check failed", { error: (err as Error).message });
    }).finally(() => (this.#ticking = undefined));
    return this.#ticking;
  }

  async #groupsOf(io: EnforcerIO, user: string): Promise<string[]> {
    const groups = new Set((await accountGroups(io)).get(user) ?? []);
    const out = await io.runner.run("id", ["-nG", "--", user], { timeoutMs: 5000 });
    if (out.success) out.stdout.trim().split(/\s+/).filter(Boolean).forEach((g) => groups.add(g));
    return [...groups];
  }

  async #check(): Promise<void> {
    const set = this.#set;
    const io = this.#io;
    if (!set || !io) return;
    const { runner, logger } = io;
    const list = await runner.run("loginctl", ["list-sessions", "--no-legend", "-o", "json"], {
      timeoutMs: 5000,
    });
    if (!list.success) return logger.debug("logind sessions unavailable", { reason: list.stderr.trim() });
    const at = this.#now();
    const horizon = Math.max(0, ...set.warningMinutes);
    for (const session of parseSessionList(list.stdout)) {
      if (session.uid === 0 || session.user === "root") continue;
      const show = await runner.run("loginctl", ["show-session", session.id], { timeoutMs: 5000 });
      const props = show.success ? parseProperties(show.stdout) : {};
      if ((props.Class ?? "user") !== "user") continue;
      const subject: Subject = { user: session.user, groups: await this.#groupsOf(io, session.user) };
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
        left <= w && !this.#warned.has(`${session.id}:${w}:${endMinute}`)
      );
      if (due.length === 0) continue;
      for (const w of due) this.#warned.add(`${session.id}:${w}:${endMinute}`);
      if (!isActiveGraphical(props)) continue;
      const ending = set.endAction === "logout" ? "you will be logged out" : "your screen will be locked";
      await notifySession(runner, logger, session, {
        title: "Your computer time ends soon",
        message: `Your allowed time ends in ${left} minute${left === 1 ? "" : "s"}; then ${ending}.`,
        urgency: "critical",
      });
    }
  }
}
