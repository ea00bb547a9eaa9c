/**
 * The agent configuration `GetAgentConfig` sends: the notification settings exactly as
 * `GET /api/v1/settings/agent` shows them (both read {@link getAgentSettings}), in the wire's field names.
 * Agents use a type's own message when it has one and the default message otherwise.
 */
import type { Queryable } from "../db/db.ts";
import type { Logger } from "../core/log.ts";
import { getAgentSettings } from "../domain/agent_settings.ts";

/** Notification settings as the agent receives them. */
export interface NotificationSettings {
  enabled: boolean;
  cooldownSeconds: number;
  defaultMessage: string;
  messageByPolicyType: Record<string, string>;
}

/** Reads the notification settings for `GetAgentConfig`. */
export async function loadNotificationSettings(q: Queryable, log: Logger): Promise<NotificationSettings> {
  const settings = await getAgentSettings(q, log);
  return {
    enabled: settings.enabled,
    cooldownSeconds: settings.cooldown_seconds,
    defaultMessage: settings.message,
    messageByPolicyType: settings.messages_by_type,
  };
}
