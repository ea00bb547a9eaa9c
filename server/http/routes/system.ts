/** Routes about the server itself. */
import type { ServerContext } from "../../context.ts";
import { type RouteSpec } from "../route.ts";
import { systemRoute as route } from "./tags.ts";

/** `GET /api/v1/version`: answers without touching the database. */
export function systemRoutes(ctx: ServerContext): RouteSpec[] {
  return [route("GET /api/v1/version", "public", {
    summary: "Server version",
    responses: {
      "200": {
        description: "The server version",
        schema: { type: "object", properties: { version: { type: "string" } }, required: ["version"] },
      },
    },
    handler: (c) => c.json({ version: ctx.version }),
  })];
}
