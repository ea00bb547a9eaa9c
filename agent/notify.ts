/**
 * Desktop notifications after a sync that changed something users must act on (restart the
 * browser, log in again). The wording and the on/off switch and cooldown come from the server
 * (`GetAgentConfig`); `notifications.enabled` in the agent configuration can switch them off
 * locally. Each active local graphical logind session gets one `notify-send`, run as the
 * session's user on that user's session bus. No session, no `loginctl` or no `notify-send`:
 * nothing happens and nothing fails.
 *
 * @module
 */

import type { Logger } from "./log.ts";
import type { Runner } from "./runner.ts";

/** Notification settings from the server. */
export interface NotificationSettings {
  enabled: boolean;
  /** Minimum seconds between two notifications to one user. */
  cooldownSeconds: number;
  /** Message for types without their own. */
  defaultMessage: string;
  /** Message per policy type wire name. */
  messageByType: Record<string, string>;
}

/** Used until the first GetAgentConfig answer arrives. */
export const DEFAULT_NOTIFICATION_SETTINGS: NotificationSettings = {
  enabled: true,
  cooldownSeconds: 300,
  defaultMessage:
    "Your administrator updated the settings of this computer. Some changes apply after you log in again.",
  messageByType: {
    Firefox: "Your administrator updated Firefox settings. Restart Firefox to apply them.",
    Thunderbird: "Your administrator updated Thunderbird settings. Restart Thunderbird to apply them.",
    Chrome: "Your administrator updated browser settings. Restart Chrome or Chromium to apply them.",
    Edge: "Your administrator updated Microsoft Edge settings. Restart Edge to apply them.",
  },
};

/** An active local graphical session. */
export interface GraphicalSession {
  id: string;
  uid: number;
  user: string;
}

/** Options of {@linkcode Notifier}. */
export interface NotifierOptions {
  runner: Runner;
  logger: Logger;
  /** Local switch (`notifications.enabled`). */
  enabled: boolean;
  /** Clock in milliseconds; default `Date.now`. */
  now?: () => number;
}

/**
 * Parses `loginctl list-sessions --no-legend -o json` output (session id, uid, user of each session).
 * A loginctl too old for JSON tables ignores `-o json` and prints the legend-less text table, whose first
 * three columns are the same; that is parsed too. Entries of the wrong shape are skipped.
 */
export function parseSessionList(text: string): { id: string; uid: number; user: string }[] {
  const trimmed = text.trim();
  if (trimmed.startsWith("[")) {
    let rows: unknown;
    try {
      rows = JSON.parse(trimmed);
    } catch {
      return [];
    }
    if (!Array.isArray(rows)) return [];
    return rows.flatMap((row) => {
      const { session, uid, user } = (row ?? {}) as Record<string, unknown>;
      return typeof session === "string" && session !== "" && Number.isSafeInteger(uid) &&
          (uid as number) >= 0 && typeof user === "string" && user !== ""
        ? [{ id: session, uid: uid as number, user }]
        : [];
    });
  }
  const sessions: { id: string; uid: number; user: string }[] = [];
  for (const line of trimmed.split("\n")) {
    const [id, uid, user] = line.trim().split(/\s+/);
    if (!id || !/^\d+$/.test(uid ?? "") || !user) continue;
    sessions.push({ id, uid: Number(uid), user });
  }
  return sessions;
}

/** Parses `loginctl show-session` output (`Key=Value` lines). */
export function parseProperties(text: string): Record<string, string> {
  const props: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) props[line.slice(0, eq)] = line.slice(eq + 1).trim();
  }
  return props;
}

/** Whether session properties describe an active local graphical user session. */
export function isActiveGraphical(props: Record<string, string>): boolean {
  return ["x11", "wayland", "mir"].includes(props.Type) && props.Active === "yes" &&
    props.Remote !== "yes" && (props.Class ?? "user") === "user";
}

/** Sends the notifications; see the module documentation. */
export class Notifier {
  readonly #options: NotifierOptions;
  #settings: NotificationSettings = DEFAULT_NOTIFICATION_SETTINGS;
  readonly #lastSent = new Map<number, number>();

  constructor(options: NotifierOptions) {
    this.#options = options;
  }

  /** Applies settings from GetAgentConfig. */
  setSettings(settings: NotificationSettings): void {
    this.#settings = settings;
  }

  /** The message users see for a set of changed types (one line per distinct message). */
  messageFor(types: readonly string[]): string {
    const lines = [
      ...new Set(types.map((t) => this.#settings.messageByType[t] || this.#settings.defaultMessage)),
    ];
    // deno-lint-ignore no-control-regex
    return lines.join("\n").replace(/[\x00-\x09\x0b-\x1f\x7f]/g, " ");
  }

  /** Active local graphical sessions, one per user; empty when logind cannot be asked. */
  async sessions(): Promise<GraphicalSession[]> {
    const { runner, logger } = this.#options;
    const list = await runner.run("loginctl", ["list-sessions", "--no-legend", "-o", "json"], {
      timeoutMs: 5000,
    });
    if (!list.success) {
      logger.debug("no logind sessions to notify", { reason: list.stderr.trim() });
      return [];
    }
    const found = new Map<number, GraphicalSession>();
    for (const session of parseSessionList(list.stdout)) {
      if (found.has(session.uid)) continue;
      const show = await runner.run("loginctl", ["show-session", session.id], { timeoutMs: 5000 });
      if (show.success && isActiveGraphical(parseProperties(show.stdout))) found.set(session.uid, session);
    }
    return [...found.values()];
  }

  /** Notifies every active graphical session about changes of `types`, within the cooldown. */
  async notify(types: readonly string[]): Promise<void> {
    const { runner, logger } = this.#options;
    if (types.length === 0 || !this.#options.enabled || !this.#settings.enabled) return;
    const sessions = await this.sessions();
    if (sessions.length === 0) return;
    const message = this.messageFor(types);
    const now = (this.#options.now ?? Date.now)();
    for (const session of sessions) {
      const last = this.#lastSent.get(session.uid);
      if (last !== undefined && now - last < this.#settings.cooldownSeconds * 1000) continue;
      const sent = await notifySession(runner, logger, session, {
        title: "Settings updated by your administrator",
        message,
      });
      if (sent === "missing tool") return;
      if (sent === "sent") this.#lastSent.set(session.uid, now);
    }
  }
}

/**
 * Shows one desktop notification in `session`, run as the session's user on that user's session bus
 * (`runuser` or `sudo`, then `notify-send`). Resolves "missing tool" when the node lacks them.
 */
export async function notifySession(
  runner: Runner,
  logger: Logger,
  session: GraphicalSession,
  note: { title: string; message: string; urgency?: "normal" | "critical" },
): Promise<"sent" | "failed" | "missing tool"> {
  if (!(await runner.which("notify-send"))) {
    logger.debug("notify-send is not installed; users are not notified");
    return "missing tool";
  }
  const asUser = await runner.which("runuser") ? "runuser" : await runner.which("sudo") ? "sudo" : undefined;
  if (!asUser) {
    logger.debug("neither runuser nor sudo is installed; users are not notified");
    return "missing tool";
  }
  const runtimeDir = `/run/user/${session.uid}`;
  const args = [
    // runuser and sudo share this syntax.
    "-u",
    session.user,
    "--",
    "env",
    `DBUS_SESSION_BUS_ADDRESS=unix:path=${runtimeDir}/bus`,
    `XDG_RUNTIME_DIR=${runtimeDir}`,
    "notify-send",
    "--app-name=svc",
    "--icon=dialog-information",
    ...(note.urgency ? [`--urgency=${note.urgency}`] : []),
    // Server text is never taken for an option.
    "--",
    note.title,
    // deno-lint-ignore no-control-regex
    note.message.replace(/[\x00-\x09\x0b-\x1f\x7f]/g, " "),
  ];
  const result = await runner.run(asUser, args, { timeoutMs: 10_000 });
  if (result.success) return "sent";
  logger.debug("notification failed", { user: session.user, error: result.stderr.trim() });
  return "failed";
}
