/**
 * Live hints for the console: small notices that something the fleet pages show has changed (a node's
 * status, a compliance report), so open consoles re-fetch instead of polling. They travel like the hub's
 * resync notices, by NOTIFY inside the caller's transaction (delivered on commit, dropped on rollback) to
 * every replica, where the live-event broker (`broker.ts`) hands them to the console streams it serves.
 * Policy changes need no hint of their own: the broker turns the hub's resync notices into `policies` hints.
 *
 * A hint names what changed (topic and ids), never the data: the page reads what it shows through the
 * REST API, with the reader's permissions.
 */
import { notifyIn, type Queryable } from "../db/db.ts";

/** NOTIFY channel carrying live hints (payload: JSON {@link LiveHint}). */
export const LIVE_CHANNEL = "svc_live";

/** What a hint is about; each topic has the permission a reader needs to receive it. */
export type LiveTopic = "nodes" | "compliance" | "policies";

/** The permission a console user needs to receive hints of each topic. */
export const TOPIC_PERMISSIONS: Readonly<Record<LiveTopic, string>> = {
  nodes: "node:view",
  compliance: "compliance:view",
  policies: "policy:view",
};

/** Every topic, in a stable order. */
export const LIVE_TOPICS = Object.keys(TOPIC_PERMISSIONS) as LiveTopic[];

/**
 * One hint. `ids` are node ids for `nodes` and `compliance`, node group ids for `policies`; absent means
 * "any" (too many to list, or unknown). `revision` is the hub revision of a policy resync.
 */
export interface LiveHint {
  topic: LiveTopic;
  ids?: string[];
  revision?: number;
}

/**
 * Most ids a hint lists; a larger change becomes "any". Keeps the payload far below PostgreSQL's
 * 8000-byte NOTIFY limit and a console's coalesced hint small.
 */
export const MAX_HINT_IDS = 100;

/** Publishes `hint` through `q` (inside a transaction: delivered only when it commits). */
export async function publishLiveHint(q: Queryable, hint: LiveHint): Promise<void> {
  const payload: LiveHint = { topic: hint.topic };
  if (hint.ids && hint.ids.length > 0 && hint.ids.length <= MAX_HINT_IDS) {
    payload.ids = [...new Set(hint.ids)];
  }
  if (hint.revision !== undefined) payload.revision = hint.revision;
  await notifyIn(q, LIVE_CHANNEL, JSON.stringify(payload));
}

/** Parses a NOTIFY payload into a hint; undefined when it is not one. */
export function parseLiveHint(payload: string): LiveHint | undefined {
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    return undefined;
  }
  const v = value as Partial<LiveHint>;
  if (typeof v !== "object" || v === null || !LIVE_TOPICS.includes(v.topic as LiveTopic)) return undefined;
  const hint: LiveHint = { topic: v.topic as LiveTopic };
  if (Array.isArray(v.ids) && v.ids.every((id) => typeof id === "string")) hint.ids = v.ids;
  if (typeof v.revision === "number") hint.revision = v.revision;
  return hint;
}
