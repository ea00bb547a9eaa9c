/**
 * Agent settings managed on the server: desktop notifications shown to logged-in users after a sync changed
 * something that needs their action. Agents fetch them with GetAgentConfig on every connect, so a change
 * publishes no resync.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { getPolicyType } from "../../shared/policy_types/mod.ts";
import { type DomainFieldError, fieldsError } from "./errors.ts";

/** Settings key in the `settings` table. */
export const AGENT_NOTIFICATIONS_KEY = "agent.notifications";
/** Shortest allowed time between two notifications to the same user. */
export const MIN_COOLDOWN_SECONDS = 60;
/** Longest allowed cooldown (one week). */
export const MAX_COOLDOWN_SECONDS = 7 * 24 * 3600;
/** Longest notification message. */
export const MAX_MESSAGE_LENGTH = 500;

/** Notification settings as stored and returned by the REST API. */
export interface AgentNotificationSettings {
  enabled: boolean;
  cooldown_seconds: number;
  /** Message for policy types without their own. */
  message: string;
  /** Messages keyed by policy type wire name, e.g. `Firefox`. */
  messages_by_type: Record<string, string>;
}

/** What a fresh server uses until an administrator changes it. */
export const DEFAULT_AGENT_NOTIFICATIONS: AgentNotificationSettings = {
  enabled: true,
  cooldown_seconds: 300,
  message: "Your administrator changed settings on this computer. Log out and back in to apply them.",
  messages_by_type: {
    Firefox: "Your administrator changed Firefox settings. Restart Firefox to apply them.",
    Thunderbird: "Your administrator changed Thunderbird settings. Restart Thunderbird to apply them.",
    Chrome: "Your administrator changed Chrome settings. Restart Chrome to apply them.",
    Edge: "Your administrator changed Microsoft Edge settings. Restart Edge to apply them.",
    Kconfig: "Your administrator changed desktop settings. Log out and back in to apply them.",
  },
};

/** Reads the notification settings (defaults when never set). */
export async function getAgentSettings(q: Queryable): Promise<AgentNotificationSettings> {
  const row = await queryOne<{ value: AgentNotificationSettings }>(
    q,
    "SELECT value FROM settings WHERE key = $1",
    [AGENT_NOTIFICATIONS_KEY],
  );
  return row
    ? { ...DEFAULT_AGENT_NOTIFICATIONS, ...row.value }
    : structuredClone(DEFAULT_AGENT_NOTIFICATIONS);
}

/**
 * Validates and stores the notification settings. Messages must be single-line-safe text (no control
 * characters other than newline), at most {@link MAX_MESSAGE_LENGTH} characters; per-type messages must name
 * a known policy type; empty per-type messages are dropped (the default message applies).
 */
export async function updateAgentSettings(
  q: Queryable,
  input: AgentNotificationSettings,
  options: { updatedBy: string },
): Promise<AgentNotificationSettings> {
  const problems: DomainFieldError[] = [];
  if (!Number.isInteger(input.cooldown_seconds) || input.cooldown_seconds < MIN_COOLDOWN_SECONDS) {
    problems.push({ field: "cooldown_seconds", message: `must be at least ${MIN_COOLDOWN_SECONDS} seconds` });
  } else if (input.cooldown_seconds > MAX_COOLDOWN_SECONDS) {
    problems.push({ field: "cooldown_seconds", message: `must be at most ${MAX_COOLDOWN_SECONDS} seconds` });
  }
  const checkText = (field: string, text: string) => {
    // deno-lint-ignore no-control-regex
    if (/[\u0000-\u0009\u000b-\u001f\u007f]/.test(text)) {
      problems.push({ field, message: "must not contain control characters (newlines are allowed)" });
    } else if ([...text].length > MAX_MESSAGE_LENGTH) {
      problems.push({ field, message: `must be at most ${MAX_MESSAGE_LENGTH} characters` });
    }
  };
  if (input.message.trim() === "") problems.push({ field: "message", message: "must not be empty" });
  checkText("message", input.message);
  const byType: Record<string, string> = {};
  for (
    const [type, text] of Object.entries(input.messages_by_type ?? {}).sort(([a], [b]) => a.localeCompare(b))
  ) {
    const field = `messages_by_type.${type}`;
    if (!getPolicyType(type)) {
      problems.push({ field, message: `"${type}" is not a known policy type` });
      continue;
    }
    checkText(field, text);
    if (text.trim() !== "") byType[type] = text;
  }
  if (problems.length > 0) throw fieldsError(problems);
  const value: AgentNotificationSettings = {
    enabled: input.enabled,
    cooldown_seconds: input.cooldown_seconds,
    message: input.message,
    messages_by_type: byType,
  };
  await q.query(
    `INSERT INTO settings (key, value, updated_by) VALUES ($1, $2::text::jsonb, $3)
     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_by = EXCLUDED.updated_by, updated_at = now()`,
    [AGENT_NOTIFICATIONS_KEY, JSON.stringify(value), options.updatedBy],
  );
  return value;
}
