/**
 * `GET /api/v1/certificates/expiring`: the CA certificates distributed by Certificates policies that expire
 * within a number of days (30 unless asked), for the dashboard's "Needs attention" list.
 */
import type { ServerContext } from "../../context.ts";
import { expiringTrustAnchors } from "../../domain/trust_anchors.ts";
import type { JsonSchema } from "../json_schema.ts";
import { type RouteSpec } from "../route.ts";
import { policiesRoute as route } from "./tags.ts";

/** Days ahead the dashboard looks. */
export const EXPIRING_WITHIN_DAYS = 30;

const ITEM: JsonSchema = {
  type: "object",
  required: ["policy_id", "policy_name", "name", "subject", "not_after", "expired"],
  properties: {
    policy_id: { type: "string", format: "uuid" },
    policy_name: { type: "string" },
    name: { type: "string", description: "The certificate's name in the policy" },
    subject: { type: "string", description: "Subject, RFC 4514" },
    not_after: { type: "string", description: "Expiry date, YYYY-MM-DD" },
    expired: { type: "boolean" },
  },
};

/** The expiring-certificates route. */
export function trustAnchorRoutes({ db }: ServerContext): RouteSpec[] {
  return [
    route("GET /api/v1/certificates/expiring", "policy:view", {
      summary: "CA certificates distributed by released Certificates policies that reach nodes and expire " +
        "within the given days (expired ones included), soonest first",
      query: {
        within_days: {
          type: "string",
          pattern: "^[0-9]{1,4}$",
          description: `Days ahead; default ${EXPIRING_WITHIN_DAYS}`,
        },
      },
      responses: {
        "200": {
          description: "The certificates",
          schema: {
            type: "object",
            required: ["within_days", "items"],
            properties: { within_days: { type: "integer" }, items: { type: "array", items: ITEM } },
          },
        },
      },
      async handler(c) {
        const raw = c.req.query("within_days");
        const withinDays = raw === undefined ? EXPIRING_WITHIN_DAYS : Number(raw);
        return c.json({ within_days: withinDays, items: await expiringTrustAnchors(db, { withinDays }) });
      },
    }),
  ];
}
