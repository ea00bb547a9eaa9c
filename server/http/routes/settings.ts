/** REST routes for agent settings (desktop notifications), fetched by agents with GetAgentConfig. */
import type { ServerContext } from "../../context.ts";
import {
  type AgentNotificationSettings,
  getAgentSettings,
  MAX_COOLDOWN_SECONDS,
  MAX_MESSAGE_LENGTH,
  MIN_COOLDOWN_SECONDS,
  updateAgentSettings,
} from "../../domain/agent_settings.ts";
import { type JsonSchema, objectSchema } from "../json_schema.ts";
import { auditResource, body, caller, type RouteSpec } from "../route.ts";
import { settingsRoute as route } from "./tags.ts";

const MESSAGE: JsonSchema = { type: "string", maxLength: MAX_MESSAGE_LENGTH };

const SETTINGS_PROPERTIES: Record<string, JsonSchema> = {
  enabled: {
    type: "boolean",
    description: "Show desktop notifications after a sync that needs user action",
  },
  cooldown_seconds: {
    type: "integer",
    minimum: MIN_COOLDOWN_SECONDS,
    maximum: MAX_COOLDOWN_SECONDS,
    description: "Minimum time between two notifications to the same user",
  },
  message: { ...MESSAGE, minLength: 1, description: "Message for policy types without their own" },
  messages_by_type: {
    type: "object",
    additionalProperties: MESSAGE,
    description: "Messages keyed by policy type wire name (e.g. Firefox); empty means the default message",
  },
};

const SETTINGS_SCHEMA: JsonSchema = {
  type: "object",
  additionalProperties: false,
  required: ["enabled", "cooldown_seconds", "message"],
  properties: SETTINGS_PROPERTIES,
};

/** The stored settings: what a request may leave out (`messages_by_type`) is always answered. */
const STORED_SETTINGS_SCHEMA: JsonSchema = objectSchema(SETTINGS_PROPERTIES);

/** Routes of the settings area owned by the policy domain. */
export function settingsRoutes({ db }: ServerContext): RouteSpec[] {
  return [
    route("GET /api/v1/settings/agent", "settings:view", {
      summary: "Agent notification settings (what GetAgentConfig returns to agents)",
      responses: { "200": { description: "Settings", schema: STORED_SETTINGS_SCHEMA } },
      handler: async (c) => c.json(await getAgentSettings(db)),
    }),
    route("PUT /api/v1/settings/agent", "settings:edit", {
      summary:
        "Replace the agent notification settings; agents pick them up at their next connect (no resync)",
      audit: { resourceType: "settings" },
      body: SETTINGS_SCHEMA,
      responses: { "200": { description: "The stored settings", schema: STORED_SETTINGS_SCHEMA } },
      handler: async (c) => {
        auditResource(c, { id: "agent.notifications", name: "agent notifications" });
        const input = body<AgentNotificationSettings>(c);
        const saved = await db.transaction((tx) =>
          updateAgentSettings(tx, { ...input, messages_by_type: input.messages_by_type ?? {} }, {
            updatedBy: caller(c).username,
          })
        );
        return c.json(saved);
      },
    }),
  ];
}
