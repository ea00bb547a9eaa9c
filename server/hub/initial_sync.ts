/**
 * The initial sync decision (spec, "Initial sync decision"), taken when an agent subscribes with the last
 * revision it saw:
 *
 * | last_known_revision                                   | action              |
 * |-------------------------------------------------------|---------------------|
 * | 0, or higher than the server's                        | full snapshot       |
 * | lower, events all still logged, none a resync signal  | replay the events   |
 * | lower, events compacted or one is a resync signal     | full snapshot       |
 * | equal                                                 | nothing             |
 */
import { create } from "@bufbuild/protobuf";
import type { Queryable } from "../db/db.ts";
import type { Logger } from "../core/log.ts";
import { EventType, PolicyUpdateSchema } from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { currentRevision, loadDeliveredPolicies, toPolicyMessages } from "./snapshot.ts";
import { encodePolicyUpdate } from "./stream_message.ts";

/** A row of `hub_events`. */
export interface HubEvent {
  revision: number;
  kind: "resync" | "created" | "updated" | "deleted";
  node_group_ids: string[];
  policy_id: string | null;
}

/** What the server sends first. */
export type InitialSync =
  | { action: "snapshot"; reason: "initial" | "ahead" | "compacted" | "resync" }
  | { action: "replay"; events: HubEvent[]; revision: number }
  | { action: "nothing"; revision: number };

/** Applies the decision table to the agent's `lastKnownRevision`. */
export async function decideInitialSync(q: Queryable, lastKnownRevision: number): Promise<InitialSync> {
  const current = await currentRevision(q);
  if (lastKnownRevision === 0) return { action: "snapshot", reason: "initial" };
  if (lastKnownRevision > current) return { action: "snapshot", reason: "ahead" };
  if (lastKnownRevision === current) return { action: "nothing", revision: current };
  const events = await q.query<HubEvent>(
    `SELECT revision, kind, node_group_ids, policy_id FROM hub_events
     WHERE revision > $1 AND revision <= $2 ORDER BY revision`,
    [lastKnownRevision, current],
  );
  // Revisions are consecutive (one UPDATE per publication), so a gap means compaction removed events.
  if (events.length !== current - lastKnownRevision) return { action: "snapshot", reason: "compacted" };
  if (events.some((e) => e.kind === "resync")) return { action: "snapshot", reason: "resync" };
  return { action: "replay", events, revision: current };
}

/**
 * Encodes the replay of delta events for a node in `groupIds`. Events for other groups are skipped. A
 * created or updated policy is sent as it is now (the agent ends at the current state whatever happened in
 * between); one that no longer reaches the node is sent as DELETED with its id and type.
 */
export async function encodeReplay(
  q: Queryable,
  events: readonly HubEvent[],
  options: { groupIds: readonly string[]; log: Logger },
): Promise<Uint8Array[]> {
  const groups = new Set(options.groupIds);
  const relevant = events.filter((e) =>
    e.policy_id !== null && (e.node_group_ids.length === 0 || e.node_group_ids.some((g) => groups.has(g)))
  );
  if (relevant.length === 0) return [];
  const delivered = new Map((await loadDeliveredPolicies(q, options.groupIds)).map((p) => [p.id, p]));
  const ids = [...new Set(relevant.map((e) => e.policy_id!))];
  const types = new Map(
    (await q.query<{ id: string; type: string }>("SELECT id, type FROM policies WHERE id = ANY($1::uuid[])", [
      ids,
    ]))
      .map((r) => [r.id, r.type]),
  );
  // Policies delivered now, as stream messages (one per policy however many events name it).
  const reaching = ids.flatMap((id) => delivered.get(id) ?? []);
  const messages = new Map((await toPolicyMessages(q, reaching, options.log)).map((m) => [m.id, m]));
  return relevant.map((e) => {
    // Not delivered now, or deleted while its message was built (no message): a deletion for this node.
    const policy = delivered.get(e.policy_id!);
    const type = e.kind === "deleted" || !policy || !messages.has(policy.id)
      ? EventType.DELETED
      : e.kind === "created"
      ? EventType.CREATED
      : EventType.UPDATED;
    return encodePolicyUpdate(
      create(PolicyUpdateSchema, {
        type,
        policy: type === EventType.DELETED
          ? { id: e.policy_id!, type: types.get(e.policy_id!) ?? "" }
          : messages.get(policy!.id),
        revision: BigInt(e.revision),
      }),
    );
  });
}
