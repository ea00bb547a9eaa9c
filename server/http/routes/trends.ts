/**
 * Trends over time and releases in flight:
 *
 * - `GET /api/v1/trends`: the fleet's hourly or daily points (compliance and node status) over a range. Any
 *   logged-in user may call it; each point's compliance part needs compliance:view and its node-status part
 *   node:view, as the dashboard summary's sections do.
 * - `GET /api/v1/policies/all/{id}/trends`: a policy's rollout over time, hourly since its current version
 *   started to be delivered, with where it stands now (compliance:view, as the rollout panel).
 * - `GET /api/v1/policies/in-flight`: versions released in the last hours whose reached nodes have not all
 *   applied them, with their rollout counts (compliance:view).
 *
 * Reads only: nothing here is audited.
 */
import type { ServerContext } from "../../context.ts";
import { ROLLOUT_STATES } from "../../domain/rollout.ts";
import {
  BUCKET_MS,
  fleetTrend,
  GRANULARITIES,
  type Granularity,
  MAX_RELEASES_IN_FLIGHT,
  policyTrend,
  releasesInFlight,
} from "../../trends/points.ts";
import { badRequest } from "../errors.ts";
import { type JsonSchema, UUID_SCHEMA } from "../json_schema.ts";
import { caller, queryInt, queryTime, type RouteContext, type RouteSpec, uuidParam } from "../route.ts";
import { complianceRoute as route, dashboardRoute } from "./tags.ts";

/** Most points one request returns. */
export const MAX_POINTS = 1000;

/** The range asked for when `from` is left out: two days of hours, or 90 days. */
const DEFAULT_SPAN: Record<Granularity, number> = { hour: 48, day: 90 };

/** Longest "released within" window, in hours (30 days). */
const MAX_IN_FLIGHT_HOURS = 720;

const COUNT: JsonSchema = { type: "integer", minimum: 0 };
const TIME: JsonSchema = { type: "string", format: "date-time" };

function counts(keys: readonly string[]): JsonSchema {
  return { type: "object", required: [...keys], properties: Object.fromEntries(keys.map((k) => [k, COUNT])) };
}

const ROLLOUT_COUNTS = counts([...ROLLOUT_STATES, "total"]);

const FLEET_POINT: JsonSchema = {
  type: "object",
  required: ["bucket", "sampled_at"],
  properties: {
    bucket: { ...TIME, description: "Start of the hour or day (UTC)" },
    sampled_at: { ...TIME, description: "When the sample was read (for a day: its latest hourly sample)" },
    compliance: {
      type: "object",
      description: "Nodes by their worst result (compliance:view): error, else non_compliant, else unknown " +
        "(a policy not reported on yet), else compliant; reached = nodes that receive a policy",
      required: [
        "reached",
        "compliant",
        "non_compliant",
        "error",
        "unknown",
        "without_policies",
        "percent_compliant",
      ],
      properties: {
        ...counts(["reached", "compliant", "non_compliant", "error", "unknown", "without_policies"])
          .properties,
        percent_compliant: {
          type: ["number", "null"],
          description: "compliant / reached × 100, one decimal; null when no node receives a policy",
        },
      },
    },
    nodes: {
      ...counts(["total", "online", "degraded", "offline", "never_seen"]),
      description: "Nodes by connection (node:view); never_seen: no agent ever connected",
    },
  },
};

const ROLLOUT_POINT: JsonSchema = {
  type: "object",
  required: [
    "bucket",
    "sampled_at",
    "reached",
    "compliant",
    "pending",
    "error",
    "non_compliant",
    "inapplicable",
  ],
  properties: {
    bucket: { ...TIME, description: "Start of the hour (UTC)" },
    sampled_at: TIME,
    ...counts(["reached", "compliant", "pending", "error", "non_compliant", "inapplicable"]).properties,
  },
};

/** The trend routes. */
export function trendRoutes({ db }: ServerContext): RouteSpec[] {
  return [
    dashboardRoute("GET /api/v1/trends", "authenticated", {
      summary: "The fleet's compliance and node status over time, as hourly or daily points kept by the " +
        "server; each part only with its permission (compliance:view, node:view)",
      query: {
        granularity: { type: "string", enum: GRANULARITIES, description: "hour (default) or day" },
        from: {
          type: "string",
          maxLength: 40,
          description: "Earliest bucket (inclusive), RFC 3339; default 48 hours or 90 days before `to`",
        },
        to: {
          type: "string",
          maxLength: 40,
          description: "Latest bucket (exclusive), RFC 3339; default now",
        },
      },
      responses: {
        "200": {
          description:
            `Points oldest first (at most ${MAX_POINTS}); hours or days without a sample are absent`,
          schema: {
            type: "object",
            required: ["granularity", "from", "to", "points"],
            properties: {
              granularity: { type: "string", enum: GRANULARITIES },
              from: TIME,
              to: TIME,
              points: { type: "array", items: FLEET_POINT },
            },
          },
        },
      },
      async handler(c) {
        const granularity = (c.req.query("granularity") ?? "hour") as Granularity;
        const { from, to } = range(c, granularity);
        const may = caller(c).permissions;
        const points = await fleetTrend(db, {
          granularity,
          from,
          to,
          parts: { compliance: may.has("compliance:view"), nodes: may.has("node:view") },
        });
        return c.json({ granularity, from, to, points });
      },
    }),
    route("GET /api/v1/policies/all/:id/trends", "compliance:view", {
      summary:
        "The policy's rollout over time: hourly points of its current version since it started to be " +
        "delivered (within the hourly retention), and where it stands now",
      query: {},
      responses: {
        "200": {
          description: "The rollout over time",
          schema: {
            type: "object",
            required: ["policy_id", "version", "started_at", "points", "current"],
            properties: {
              policy_id: UUID_SCHEMA,
              version: { type: "integer" },
              started_at: {
                type: ["string", "null"],
                format: "date-time",
                description: "When the current version started to be delivered; null unless released",
              },
              points: { type: "array", items: ROLLOUT_POINT },
              current: { ...ROLLOUT_COUNTS, description: "Counts per rollout state now" },
            },
          },
        },
      },
      handler: async (c) => c.json(await policyTrend(db, uuidParam(c, "id"))),
    }),
    route("GET /api/v1/policies/in-flight", "compliance:view", {
      summary:
        "Releases in flight: versions released in the last `hours` hours whose reached nodes have not " +
        "all applied them (compliant or inapplicable), newest first, with their rollout counts",
      query: {
        hours: {
          type: "integer",
          minimum: 1,
          maximum: MAX_IN_FLIGHT_HOURS,
          description: "How far back a release counts (default 72)",
        },
      },
      responses: {
        "200": {
          description: `At most ${MAX_RELEASES_IN_FLIGHT} releases`,
          schema: {
            type: "array",
            items: {
              type: "object",
              required: ["policy_id", "policy_name", "policy_type", "version", "started_at", "counts"],
              properties: {
                policy_id: UUID_SCHEMA,
                policy_name: { type: "string" },
                policy_type: { type: "string" },
                version: { type: "integer" },
                started_at: TIME,
                counts: ROLLOUT_COUNTS,
              },
            },
          },
        },
      },
      handler: async (c) => c.json(await releasesInFlight(db, queryInt(c, "hours", 72))),
    }),
  ];
}

/** The validated range of a trend request: `from` before `to`, at most {@link MAX_POINTS} buckets. */
function range(c: RouteContext, granularity: Granularity): { from: Date; to: Date } {
  const to = queryTime(c, "to") ?? new Date();
  const from = queryTime(c, "from") ??
    new Date(to.getTime() - DEFAULT_SPAN[granularity] * BUCKET_MS[granularity]);
  if (from >= to) {
    throw badRequest(`from (${from.toISOString()}) must be before to (${to.toISOString()})`, [
      { field: "from", message: "must be before to" },
    ]);
  }
  const buckets = Math.ceil((to.getTime() - from.getTime()) / BUCKET_MS[granularity]);
  if (buckets > MAX_POINTS) {
    throw badRequest(
      `from–to spans ${buckets} ${granularity === "hour" ? "hours" : "days"}, more than the ${MAX_POINTS} ` +
        `points one request returns: narrow the range${
          granularity === "hour" ? " or ask for granularity=day" : ""
        }`,
      [{ field: "from", message: `the range holds more than ${MAX_POINTS} points` }],
    );
  }
  return { from, to };
}
