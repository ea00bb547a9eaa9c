/**
 * Agent configuration managed on the server: desktop notification settings, stored as one JSON value under
 * the `settings` key `agent.notifications`:
 *
 *     {"enabled": true, "cooldown_seconds": 300, "message": "…", "messages_by_type": {"Firefox": "…"}}
 *
 * Every field is optional; an absent or unusable field falls back to its default (and an unusable one is
 * logged), so a bad setting never keeps agents from syncing. Per-type messages are merged over the defaults;
 * an empty string removes a type's message so it uses the general one.
 */
import type { Queryable } from "../db/db.ts";
import type { Logger } from "../log.ts";

/** The settings key. */
export const AGENT_NOTIFICATIONS_KEY = "agent.notifications";

/** Notification settings as the agent receives them. */
export interface NotificationSettings {
  enabled: boolean;
  cooldownSeconds: number;
  defaultMessage: string;
  messageByPolicyType: Record<string, string>;
}

/** Longest accepted cooldown (one day). */
const MAX_COOLDOWN_SECONDS = 86_400;

/** Defaults when nothing is configured. */
export const DEFAULT_NOTIFICATIONS: Readonly<NotificationSettings> = Object.freeze({
  enabled: true,
  cooldownSeconds: 300,
  defaultMessage:
    "Your administrator changed settings on this computer. Restart the affected applications, or log out and back in, to use them.",
  messageByPolicyType: Object.freeze({
    Firefox: "Your administrator changed the settings of Firefox. Restart Firefox to use them.",
    Thunderbird: "Your administrator changed the settings of Thunderbird. Restart Thunderbird to use them.",
    Chrome: "Your administrator changed the settings of Chrome. Restart Chrome to use them.",
    Edge: "Your administrator changed the settings of Microsoft Edge. Restart Edge to use them.",
    Dconf: "Your administrator changed desktop settings. Log out and back in to use all of them.",
    Kconfig: "Your administrator changed desktop settings. Log out and back in to use all of them.",
  }),
});

/** Reads the notification settings, falling back field by field to {@link DEFAULT_NOTIFICATIONS}. */
export async function loadNotificationSettings(q: Queryable, log: Logger): Promise<NotificationSettings> {
  const [row] = await q.query<{ value: unknown }>("SELECT value FROM settings WHERE key = $1", [
    AGENT_NOTIFICATIONS_KEY,
  ]);
  const out: NotificationSettings = {
    ...DEFAULT_NOTIFICATIONS,
    messageByPolicyType: { ...DEFAULT_NOTIFICATIONS.messageByPolicyType },
  };
  if (!row) return out;
  const value = row.value;
  const ignored = (field: string) =>
    log.warn(`settings ${AGENT_NOTIFICATIONS_KEY}: ignoring an unusable ${field}; using the default`);
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    ignored("value (expected a JSON object)");
    return out;
  }
  const v = value as Record<string, unknown>;
  if (v.enabled !== undefined) {
    if (typeof v.enabled === "boolean") out.enabled = v.enabled;
    else ignored("enabled");
  }
  if (v.cooldown_seconds !== undefined) {
    const n = v.cooldown_seconds;
    if (typeof n === "number" && Number.isInteger(n) && n >= 0 && n <= MAX_COOLDOWN_SECONDS) {
      out.cooldownSeconds = n;
    } else ignored("cooldown_seconds");
  }
  if (v.message !== undefined) {
    if (typeof v.message === "string" && v.message.trim() !== "") out.defaultMessage = v.message;
    else ignored("message");
  }
  if (v.messages_by_type !== undefined) {
    const byType = v.messages_by_type;
    if (typeof byType === "object" && byType !== null && !Array.isArray(byType)) {
      for (const [type, message] of Object.entries(byType)) {
        if (typeof message !== "string") ignored(`messages_by_type.${type}`);
        else if (message.trim() === "") delete out.messageByPolicyType[type];
        else out.messageByPolicyType[type] = message;
      }
    } else ignored("messages_by_type");
  }
  return out;
}
