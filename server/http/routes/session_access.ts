/**
 * REST route of the SessionAccess lockout guard: who may log in when, for a policy (stored, or content
 * being edited) alone or together with the SessionAccess policies already reaching a node group. The
 * editor draws its weekly timeline from it; release and binding enablement run the same check.
 */
import type { ServerContext } from "../../context.ts";
import { sessionAccessReport } from "../../domain/session_access_guard.ts";
import { type JsonSchema, objectSchema } from "../json_schema.ts";
import { UUID_SCHEMA } from "../json_schema.ts";
import { type RouteSpec } from "../route.ts";
import { badRequest } from "../errors.ts";
import { policiesRoute as route } from "./tags.ts";

const RANGE: JsonSchema = objectSchema({
  from: { type: "integer", description: "Minute of the week, Monday 00:00 = 0" },
  to: { type: "integer", description: "End minute (exclusive); 10080 = end of Sunday" },
});

const REPORT_SCHEMA: JsonSchema = objectSchema({
  view_zone: { type: "string", description: "Time zone the minutes are read in" },
  timeline: {
    type: "array",
    items: objectSchema({
      subject: { type: "string", description: "A user name, or %group" },
      allowed: { type: "array", items: RANGE },
    }),
  },
  lockouts: { type: "array", items: RANGE, description: "When no named account may log in" },
});

/** Routes of the SessionAccess guard. */
export function sessionAccessRoutes({ db }: ServerContext): RouteSpec[] {
  return [
    route("GET /api/v1/session-access/timeline", "policy:view", {
      summary:
        "Who may log in when during a week: a SessionAccess policy (stored, or the content being edited) alone or with the SessionAccess policies already reaching a node group, and the times nobody named may log in",
      query: {
        policy_id: UUID_SCHEMA,
        node_group_id: UUID_SCHEMA,
        content: {
          type: "string",
          maxLength: 16384,
          description: "SessionAccess content (protojson) being edited",
        },
      },
      responses: { "200": { description: "The weekly timeline", schema: REPORT_SCHEMA } },
      handler: async (c) => {
        const input = {
          policy_id: c.req.query("policy_id"),
          node_group_id: c.req.query("node_group_id"),
          content: c.req.query("content"),
        };
        if (!input.policy_id && input.content === undefined) {
          throw badRequest("give policy_id or content (the SessionAccess content to check)");
        }
        const report = await sessionAccessReport(db, {
          policyId: input.policy_id?.toLowerCase(),
          nodeGroupId: input.node_group_id?.toLowerCase(),
          content: input.content,
        });
        return c.json({ view_zone: report.viewZone, timeline: report.timeline, lockouts: report.lockouts });
      },
    }),
  ];
}
