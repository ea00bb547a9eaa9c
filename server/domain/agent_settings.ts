/**
 * Agent settings managed on the server: desktop notifications shown to logged-in users after a sync changed
 * something that needs their action. Agents fetch them with GetAgentConfig on every connect, so a change
 * publishes no resync.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { getPolicyType } from "../../shared/policy_types/mod.ts";
import { type DomainFieldError, fieldsError } from "../core/errors.ts";

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

/**
 * Reads the notification settings: the stored value, field by field, with the default for a field that is
 * absent or unusable (logged when `log` is given), so a bad row never keeps agents from syncing. The stored
 * per-type messages are used exactly as stored (a type without one uses `message`); only a server that
 * never saved settings uses the default per-type messages. `GET /api/v1/settings/agent` and
 * `GetAgentConfig` both read through here, so they always agree.
 */
export async function getAgentSettings(
  q: Queryable,
  log?: { warn(msg: string): void },
): Promise<AgentNotificationSettings> {
  const row = await queryOne<{ value: unknown }>(q, "SELECT value FROM settings WHERE key = $1", [
    AGENT_NOTIFICATIONS_KEY,
  ]);
  const out = structuredClone(DEFAULT_AGENT_NOTIFICATIONS);
  if (!row) return out;
  const ignored = (field: string) =>
    log?.warn(`settings ${AGENT_NOTIFICATIONS_KEY}: ignoring an unusable ${field}; using the default`);
  const value = row.value;
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
      out.cooldown_seconds = n;
    } else ignored("cooldown_seconds");
  }
  if (v.message !== undefined) {
    if (typeof v.message === "string" && v.message.trim() !== "") out.message = v.message;
    else ignored("message");
  }
  if (v.messages_by_type !== undefined) {
    const byType = v.messages_by_type;
    if (typeof byType === "object" && byType !== null && !Array.isArray(byType)) {
      out.messages_by_type = {};
      for (const [type, message] of Object.entries(byType).sort(([a], [b]) => a.localeCompare(b))) {
        if (typeof message !== "string") ignored(`messages_by_type.${type}`);
        else if (message.trim() !== "") out.messages_by_type[type] = message;
      }
    } else ignored("messages_by_type");
  }
  return out;
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
