/**
 * What a node receives: the released policies that an enabled binding links to one of its node groups, each
 * with the highest priority among those bindings, encoded as the stream's `PolicyUpdate` messages.
 *
 * A snapshot depends only on the set of node groups, so the hub builds it once per distinct group set and
 * writes the same encoded bytes to every stream that shares the set.
 */
import { create, toBinary } from "@bufbuild/protobuf";
import type { Queryable } from "../db/db.ts";
import type { Logger } from "../core/log.ts";
import {
  EventType,
  type Policy,
  PolicySchema,
  PolicyState,
  PolicyUpdateSchema,
} from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { encodedMembersOf } from "./typed_content_cache.ts";
import { withEncodedMembers } from "./typed_content.ts";
import { yieldAfterLongWork } from "../core/loop_turn.ts";
import { encodePolicyUpdate } from "./stream_message.ts";
import { INLINE_CONTENT_LENGTH } from "../domain/content_offloop.ts";

/** A policy row as the stream needs it. */
export interface DeliveredPolicy {
  id: string;
  name: string;
  description: string;
  type: string;
  /**
   * The content when it is short; null when it is longer than {@link INLINE_CONTENT_LENGTH}: the encoded
   * members are then found by `content_sha256` in the cache, and the content is read only on a miss.
   */
  content: string | null;
  /** Hex SHA-256 of the content's UTF-8 (kept by a trigger, migration 0016). */
  content_sha256: string;
  version: number;
  deprecated: boolean;
  deprecation_message: string;
  replacement_policy_id: string | null;
  /** Highest priority among the enabled bindings that reach the node. */
  priority: number;
}

/** An encoded snapshot: one message per policy, the last with `snapshot_complete`. */
export interface Snapshot {
  /** Hub revision read before the policies, so the content is at least this new. */
  revision: number;
  messages: Uint8Array[];
  /** Policy ids in the snapshot (replay and compliance checks use them). */
  policyIds: string[];
}

/** Reads the hub's revision high-water mark. */
export async function currentRevision(q: Queryable): Promise<number> {
  const [row] = await q.query<{ revision: number }>("SELECT revision FROM hub_state WHERE id");
  return row.revision;
}

/**
 * Released policies with an enabled binding to one of `groupIds`, priority = max over those bindings.
 * Ordered by type, name and id so the bytes of two builds of the same state are identical. Read from the
 * binding tables, never from the reach model (which may lag a large change: server/domain/reach.ts), so an
 * agent has a change as soon as it commits.
 */
export async function loadDeliveredPolicies(
  q: Queryable,
  groupIds: readonly string[],
): Promise<DeliveredPolicy[]> {
  if (groupIds.length === 0) return [];
  return await q.query<DeliveredPolicy>(
    `SELECT p.id, p.name, p.description, p.type,
       CASE WHEN length(p.content) <= ${INLINE_CONTENT_LENGTH} THEN p.content END AS content,
       encode(p.content_sha256, 'hex') AS content_sha256, p.version, p.deprecated, p.deprecation_message,
       p.replacement_policy_id, max(b.priority)::int AS priority
     FROM policies p JOIN policy_bindings b ON b.policy_id = p.id
     WHERE p.state = 'released' AND b.state = 'enabled' AND b.node_group_id = ANY($1::uuid[])
     GROUP BY p.id ORDER BY p.type, p.name, p.id`,
    [groupIds],
  );
}

/**
 * Builds the snapshot for a group set. The revision is read BEFORE the policies: a change committed in
 * between is then included in the content and announced again by its own notice, whereas the other order
 * could label a snapshot with a revision whose change it does not contain, and the hub would skip it.
 */
export async function buildSnapshot(
  q: Queryable,
  groupIds: readonly string[],
  log: Logger,
): Promise<Snapshot> {
  const revision = await currentRevision(q);
  const policies = await loadDeliveredPolicies(q, groupIds);
  return await encodeSnapshot(await toPolicyMessages(q, policies, log), revision);
}

/**
 * Encodes policy messages as a snapshot (an empty list gives the single empty-snapshot marker). Encoding a
 * large policy takes milliseconds; other work gets a turn of the loop after each one that took long.
 */
export async function encodeSnapshot(policies: readonly Policy[], revision: number): Promise<Snapshot> {
  if (policies.length === 0) {
    const marker = toBinary(
      PolicyUpdateSchema,
      create(PolicyUpdateSchema, {
        type: EventType.SNAPSHOT,
        snapshotComplete: true,
        revision: BigInt(revision),
      }),
    );
    return { revision, messages: [marker], policyIds: [] };
  }
  const messages: Uint8Array[] = [];
  for (const [i, policy] of policies.entries()) {
    const started = performance.now();
    messages.push(encodePolicyUpdate(
      create(PolicyUpdateSchema, {
        type: EventType.SNAPSHOT,
        policy,
        snapshotComplete: i === policies.length - 1,
        revision: BigInt(revision),
      }),
    ));
    await yieldAfterLongWork(started);
  }
  return { revision, messages, policyIds: policies.map((p) => p.id) };
}

/**
 * The stream `Policy` messages of delivered policies: content and typed content (when the type is known and
 * the content parses) as ready bytes (typed_content_cache.ts: encoded once per content, large content off the
 * loop; content that fails to parse is sent without its typed member and logged).
 */
export async function toPolicyMessages(
  q: Queryable,
  policies: readonly DeliveredPolicy[],
  log: Logger,
): Promise<Policy[]> {
  const members = await Promise.all(policies.map((p) => encodedMembersOf(q, p, log)));
  // A policy deleted since its row was read is left out; its deletion is announced by its own notice.
  return policies.flatMap((p, i) =>
    members[i] === undefined ? [] : withEncodedMembers(
      create(PolicySchema, {
        id: p.id,
        name: p.name,
        description: p.description,
        type: p.type,
        version: p.version,
        state: PolicyState.RELEASED,
        priority: p.priority,
        deprecated: p.deprecated,
        deprecationMessage: p.deprecation_message,
        replacementPolicyId: p.replacement_policy_id ?? "",
      }),
      members[i],
    )
  );
}
