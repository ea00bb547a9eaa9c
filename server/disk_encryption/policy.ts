/** The DiskEncryption policy in force on a node, as the server sees it. */
import type { Queryable } from "../db/db.ts";
import { diskEncryptionType } from "../../shared/policy_types/disk_encryption.ts";
import type { DiskEncryptionPolicy } from "../../shared/gen/svc/policy/v1/disk_encryption_pb.ts";

/**
 * The released DiskEncryption policy reaching `nodeId` through an enabled binding with the highest priority
 * (ties: lowest policy id, the agent's merge order); undefined when none reaches it.
 */
export async function effectivePolicy(
  q: Queryable,
  nodeId: string,
): Promise<{ id: string; name: string; policy: DiskEncryptionPolicy } | undefined> {
  const [row] = await q.query<{ id: string; name: string; content: string }>(
    `SELECT p.id, p.name, p.content FROM policies p
       JOIN policy_bindings b ON b.policy_id = p.id AND b.state = 'enabled'
       JOIN node_group_members m ON m.node_group_id = b.node_group_id AND m.node_id = $1
      WHERE p.type = 'DiskEncryption' AND p.state = 'released'
      GROUP BY p.id, p.name, p.content
      ORDER BY max(b.priority) DESC, p.id ASC LIMIT 1`,
    [nodeId],
  );
  if (!row) return undefined;
  return {
    id: row.id,
    name: row.name,
    policy: diskEncryptionType.parse(row.content, { ignoreUnknownFields: true }),
  };
}
