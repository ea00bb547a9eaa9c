/** The DiskEncryption policies in force on a node, merged as the agent merges them. */
import type { Queryable } from "../db/db.ts";
import {
  diskEncryptionType,
  type MergedDiskEncryption,
  mergeDiskEncryption,
} from "../../shared/policy_types/disk_encryption.ts";

/** The merged DiskEncryption policies of one node, and the one of highest priority (named in the console). */
export interface EffectiveDiskEncryption {
  id: string;
  name: string;
  policy: MergedDiskEncryption;
}

/**
 * Every released DiskEncryption policy reaching each of `nodeIds` through an enabled binding, merged in the
 * agent's order (priority descending, ties: lowest policy id); nodes without one are absent.
 */
export async function effectiveByNode(
  q: Queryable,
  nodeIds: readonly string[],
): Promise<Map<string, EffectiveDiskEncryption>> {
  if (nodeIds.length === 0) return new Map();
  const rows = await q.query<{ node_id: string; id: string; name: string; content: string }>(
    `SELECT m.node_id, p.id, p.name, p.content
       FROM policies p
       JOIN policy_bindings b ON b.policy_id = p.id AND b.state = 'enabled'
       JOIN node_group_members m ON m.node_group_id = b.node_group_id
      WHERE p.type = 'DiskEncryption' AND p.state = 'released' AND m.node_id = ANY($1::uuid[])
      GROUP BY m.node_id, p.id, p.name, p.content
      ORDER BY m.node_id, max(b.priority) DESC, p.id ASC`,
    [nodeIds],
  );
  const byNode = new Map<string, typeof rows>();
  for (const row of rows) byNode.set(row.node_id, [...byNode.get(row.node_id) ?? [], row]);
  return new Map(
    [...byNode].map(([nodeId, ordered]) => [nodeId, {
      id: ordered[0].id,
      name: ordered[0].name,
      policy: mergeDiskEncryption(
        ordered.map((r) => diskEncryptionType.parse(r.content, { ignoreUnknownFields: true })),
      ),
    }]),
  );
}

/** The merged DiskEncryption policies of `nodeId`; undefined when none reaches it. */
export async function effectivePolicy(
  q: Queryable,
  nodeId: string,
): Promise<EffectiveDiskEncryption | undefined> {
  return (await effectiveByNode(q, [nodeId])).get(nodeId);
}
