/**
 * `GET /api/v1/events`: the console's live-event stream (server-sent events). Any logged-in user may open
 * one; each event is sent only to a caller holding the permission of its topic (nodes: node:view,
 * compliance: compliance:view, policies: policy:view), re-read at every heartbeat, and the stream ends when
 * the session that opened it ends. Events are hints ("nodes changed", with ids), never data: the console
 * reloads what it shows through the ordinary routes. Nothing is replayed on reconnect (`Last-Event-ID` is
 * ignored); a reconnecting console reloads instead. A GET that changes nothing: not audited.
 */
import type { ServerContext } from "../../context.ts";
import { liveBroker } from "../../events/broker.ts";
import { caller, type RouteSpec } from "../route.ts";
import { eventsRoute as route } from "./tags.ts";

/** The live-event route. */
export function eventRoutes(ctx: ServerContext): RouteSpec[] {
  return [
    route("GET /api/v1/events", "authenticated", {
      summary: "Live hints for the console (server-sent events): what changed, never the data itself",
      responses: {
        "200": {
          description:
            "An endless text/event-stream. Events `nodes`, `compliance` and `policies` carry JSON " +
            "{topic, ids?, revision?} (ids: node ids, or node group ids for policies; absent = any); " +
            "`resync` means hints were dropped because the client read too slowly (reload everything). " +
            "Comments every events.heartbeat_seconds; the stream ends when the session ends.",
          contentType: "text/event-stream",
          schema: { type: "string", description: "Server-sent events (text/event-stream), never JSON" },
        },
        "429": { description: "Too many open streams (events.max_streams, events.max_streams_per_user)" },
      },
      async handler(c) {
        const user = caller(c);
        const reauthenticate = c.get("reauthenticate");
        const body = await liveBroker(ctx).open({
          userId: user.id,
          permissions: user.permissions,
          async recheck() {
            try {
              const again = await reauthenticate();
              return again?.id === user.id ? again.permissions : null;
            } catch (err) {
              // A refusal (e.g. a second factor is now required) ends the stream; an outage does not.
              if ((err as { status?: number }).status === 403) return null;
              throw err;
            }
          },
        });
        return new Response(body, {
          headers: {
            "Content-Type": "text/event-stream; charset=utf-8",
            // Reverse proxies (nginx) must pass each event on at once rather than buffer the response.
            "X-Accel-Buffering": "no",
          },
        });
      },
    }),
  ];
}
