/**
 * The fleet's disk-encryption inventory as administrators read it: every reported volume with its escrow
 * state, protectors, compliance against the node's DiskEncryption policy, pending (overdue) rotation and
 * clone flag (the same LUKS UUID reported by two nodes, e.g. a cloned disk image sharing one master key).
 * Never key material.
 *
 * @module
 */
import type { Queryable } from "../db/db.ts";
import { found } from "../core/errors.ts";
import { mergedRequirementIssues } from "../../shared/policy_types/disk_encryption.ts";
import { effectiveByNode, type EffectiveDiskEncryption as Effective } from "./policy.ts";
import { type Page, type PageRequest, slicePage } from "../db/pagination.ts";

/** Escrow states of a volume. */
export const ESCROW_STATES = ["escrowed", "pending", "none", "not_applicable"] as const;
/** Compliance of a volume. */
export const VOLUME_COMPLIANCE = ["compliant", "non_compliant", "no_policy"] as const;

/** One volume of the inventory. */
export interface InventoryVolume {
  id: string;
  node_id: string | null;
  node_name: string;
  luks_uuid: string;
  device: string;
  mapper_name: string;
  mount_point: string;
  root: boolean;
  encrypted: boolean;
  luks_version: number;
  cipher: string;
  key_size_bits: number;
  pbkdf: string;
  key_slots: { slot: number; kind: string; managed: boolean }[];
  protectors: string[];
  tpm2_enrolled: boolean;
  tpm2_pcrs: number[];
  tang_enrolled: boolean;
  escrow_state: (typeof ESCROW_STATES)[number];
  active_key_id: string | null;
  active_key_confirmed_at: Date | null;
  rotation_requested_at: Date | null;
  rotation_reason: string;
  overdue: boolean;
  clone: boolean;
  compliance: (typeof VOLUME_COMPLIANCE)[number];
  issues: string[];
  policy: { id: string; name: string } | null;
  reported_at: Date;
  missing_since: Date | null;
}

/** Filters of the fleet list. */
export interface InventoryFilter {
  nodeId?: string;
  groupId?: string;
  compliance?: (typeof VOLUME_COMPLIANCE)[number];
  escrow?: (typeof ESCROW_STATES)[number];
  overdue?: boolean;
  clone?: boolean;
}

type Row =
  & Omit<
    InventoryVolume,
    "escrow_state" | "compliance" | "issues" | "policy" | "protectors" | "overdue" | "encrypted" | "root"
  >
  & {
    is_root: boolean;
    has_pending: boolean;
    tpm2_available: boolean | null;
    external_manager: string | null;
  };

const SELECT =
  `SELECT v.id, v.node_id, v.node_name, v.luks_uuid, v.device, v.mapper_name, v.mount_point, v.is_root,
    v.luks_version, v.cipher, v.key_size_bits, v.pbkdf, v.key_slots, v.tpm2_enrolled, v.tpm2_pcrs,
    v.tang_enrolled, k.id AS active_key_id, k.confirmed_at AS active_key_confirmed_at,
    v.rotation_requested_at, v.rotation_reason, v.reported_at, v.missing_since,
    EXISTS (SELECT 1 FROM luks_recovery_keys p WHERE p.volume_id = v.id AND p.state = 'pending') AS has_pending,
    (v.luks_uuid <> '' AND EXISTS (SELECT 1 FROM luks_volumes o WHERE o.luks_uuid = v.luks_uuid
       AND o.id <> v.id AND o.missing_since IS NULL AND o.node_id IS DISTINCT FROM v.node_id)) AS clone,
    s.tpm2_available, s.external_manager
  FROM luks_volumes v
  LEFT JOIN luks_recovery_keys k ON k.volume_id = v.id AND k.state = 'active'
  LEFT JOIN luks_node_state s ON s.node_id = v.node_id`;

function describe(row: Row, effective: Effective | undefined): InventoryVolume {
  const encrypted = row.luks_version > 0;
  const escrow_state = !encrypted
    ? "not_applicable"
    : row.active_key_id
    ? "escrowed"
    : row.has_pending
    ? "pending"
    : "none";
  const protectors = [...new Set(row.key_slots.map((s) => s.kind))];
  if (row.tpm2_enrolled && !protectors.includes("tpm2")) protectors.push("tpm2");
  if (row.tang_enrolled && !protectors.includes("tang")) protectors.push("tang");
  const issues: string[] = [];
  const policy = effective?.policy;
  if (policy) {
    issues.push(
      ...mergedRequirementIssues(policy, {
        luksVersion: row.luks_version,
        cipher: row.cipher,
        keySizeBits: row.key_size_bits,
      }),
    );
    if (encrypted && policy.escrowRecoveryKey && escrow_state !== "escrowed") {
      issues.push("no recovery key escrowed");
    }
    const managedElsewhere = (row.external_manager ?? "") !== "";
    if (encrypted && policy.tpm2?.enroll && !row.tpm2_enrolled && row.tpm2_available && !managedElsewhere) {
      issues.push("TPM2 protector missing");
    }
    if (
      encrypted && policy.tang && policy.tang.servers.length > 0 && !row.tang_enrolled && !managedElsewhere
    ) {
      issues.push("Tang protector missing");
    }
  }
  const { is_root, has_pending: _p, tpm2_available: _t, external_manager: _e, ...rest } = row;
  return {
    ...rest,
    root: is_root,
    encrypted,
    protectors,
    escrow_state,
    overdue: row.rotation_requested_at !== null,
    compliance: !policy ? "no_policy" : issues.length === 0 ? "compliant" : "non_compliant",
    issues,
    policy: effective ? { id: effective.id, name: effective.name } : null,
  };
}

/** The fleet list, filtered; compliance is computed here, so filtering happens before the page is cut. */
export async function listInventory(
  q: Queryable,
  filter: InventoryFilter,
  page: PageRequest,
): Promise<Page<InventoryVolume> & { summary: Record<string, number> }> {
  const where: string[] = ["v.missing_since IS NULL"];
  const params: unknown[] = [];
  if (filter.nodeId) {
    params.push(filter.nodeId);
    where.push(`v.node_id = $${params.length}`);
  }
  if (filter.groupId) {
    params.push(filter.groupId);
    where.push(
      `EXISTS (SELECT 1 FROM node_group_members m WHERE m.node_id = v.node_id AND m.node_group_id = $${params.length})`,
    );
  }
  const rows = await q.query<Row>(
    `${SELECT} WHERE ${where.join(" AND ")} ORDER BY v.node_name, v.device, v.id`,
    params,
  );
  const effective = await effectiveByNode(q, [...new Set(rows.flatMap((r) => r.node_id ? [r.node_id] : []))]);
  const all = rows.map((r) => describe(r, r.node_id ? effective.get(r.node_id) : undefined));
  const summary = {
    volumes: all.filter((v) => v.encrypted).length,
    unencrypted: all.filter((v) => !v.encrypted).length,
    escrowed: all.filter((v) => v.escrow_state === "escrowed").length,
    non_compliant: all.filter((v) => v.compliance === "non_compliant").length,
    overdue: all.filter((v) => v.overdue).length,
    clones: all.filter((v) => v.clone).length,
  };
  const kept = all.filter((v) =>
    (!filter.compliance || v.compliance === filter.compliance) &&
    (!filter.escrow || v.escrow_state === filter.escrow) &&
    (filter.overdue === undefined || v.overdue === filter.overdue) &&
    (filter.clone === undefined || v.clone === filter.clone)
  );
  return { ...slicePage(kept, page), summary };
}

/** One node's disk-encryption view: facts, policy, every volume (missing ones too), keys and tasks. */
export async function nodeView(q: Queryable, nodeId: string) {
  const [node] = await q.query<{ id: string; name: string }>("SELECT id, name FROM nodes WHERE id = $1", [
    nodeId,
  ]);
  found(node, `node ${nodeId}`);
  const [state] = await q.query<{ tpm2_available: boolean; external_manager: string; reported_at: Date }>(
    "SELECT tpm2_available, external_manager, reported_at FROM luks_node_state WHERE node_id = $1",
    [nodeId],
  );
  const rows = await q.query<Row>(`${SELECT} WHERE v.node_id = $1 ORDER BY v.device, v.id`, [nodeId]);
  const effective = (await effectiveByNode(q, [nodeId])).get(nodeId);
  const keys = await q.query<{
    id: string;
    volume_id: string;
    state: string;
    key_slot: number | null;
    reveal_count: number;
    last_revealed_at: Date | null;
    created_at: Date;
    confirmed_at: Date | null;
    retired_at: Date | null;
  }>(
    `SELECT k.id, k.volume_id, k.state, k.key_slot, k.reveal_count, k.last_revealed_at, k.created_at,
            k.confirmed_at, k.retired_at
       FROM luks_recovery_keys k JOIN luks_volumes v ON v.id = k.volume_id
      WHERE v.node_id = $1 ORDER BY k.created_at DESC, k.id`,
    [nodeId],
  );
  const tasks = await q.query(
    `SELECT t.id, t.kind, t.volume_id, t.reason, t.created_at FROM luks_tasks t
      WHERE t.node_id = $1 AND t.state = 'pending' ORDER BY t.created_at, t.id`,
    [nodeId],
  );
  return {
    node: { id: node!.id, name: node!.name },
    reported_at: state?.reported_at ?? null,
    tpm2_available: state?.tpm2_available ?? false,
    external_manager: state?.external_manager ?? "",
    policy: effective ? { id: effective.id, name: effective.name } : null,
    volumes: rows.map((r) => ({
      ...describe(r, effective),
      keys: keys.filter((k) => k.volume_id === r.id).map(({ volume_id: _v, ...k }) => k),
    })),
    tasks,
  };
}
