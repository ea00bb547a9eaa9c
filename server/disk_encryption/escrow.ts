/**
 * Recovery-key escrow: the inventory agents report, the keys they escrow and confirm, rotations (by age,
 * after a reveal, on drift), the tasks agents fetch, reveals and KEK re-wraps. Transport-free: gRPC and REST
 * call these with validated values; refusals are {@link DomainError}s.
 *
 * Key life: `pending` (escrowed, not yet in the header) → `active` (confirmed in a keyslot) → `destroyed`
 * (replaced by a rotation whose agent removed the old keyslot) or `retired`; a pending key that another key
 * overtook becomes `abandoned`. A volume has at most one active key.
 *
 * @module
 */
import type { VolumeFacts } from "../../shared/disk_encryption_volume.ts";
import type { Db, Queryable } from "../db/db.ts";
import { conflictError, DomainError, notFoundError } from "../core/errors.ts";
import { sendNodeCommand } from "../events/hub_notice.ts";
import { luksEscrowOperations, luksRecoveryKeyReveals } from "../metrics/counters.ts";
import {
  type Keyring,
  openRecoveryKey,
  rewrapDataKey,
  type SealedKey,
  sealRecoveryKey,
} from "../pki/envelope.ts";
import { effectivePolicy } from "./policy.ts";

/** A reported volume after validation. */
export interface VolumeReport extends VolumeFacts {
  keySlots: { slot: number; kind: string; managed: boolean }[];
  escrowedKeyId: string;
}

/** The caller on the policy port. */
export interface NodeRef {
  nodeId: string;
  nodeName: string;
}

/** A pending task as the agent receives it. */
export interface TaskRow {
  id: string;
  kind: "escrow" | "rotate" | "enroll_tpm2" | "enroll_tang";
  volume_uuid: string;
  reason: string;
  created_at: Date;
}

/** The recovery-key format agents generate: 8 groups of 8 modhex characters (256 bits), as typed. */
export const RECOVERY_KEY_PATTERN = /^[cbdefghijklnrtuv]{8}(-[cbdefghijklnrtuv]{8}){7}$/;

type Op = "escrow" | "confirm" | "release" | "destroy";

/** Runs `fn` and counts it in `svc_luks_escrow_operations_total` (a refusal counts as an error). */
export async function counted<T>(op: Op, fn: () => Promise<T>): Promise<T> {
  try {
    const out = await fn();
    luksEscrowOperations.inc({ op, outcome: "ok" });
    return out;
  } catch (err) {
    luksEscrowOperations.inc({ op, outcome: "error" });
    throw err;
  }
}

function identityOf(v: Pick<VolumeReport, "luksVersion" | "uuid" | "device">): string {
  return v.luksVersion > 0 ? v.uuid : `dev:${v.device}`;
}

/**
 * Stores a node's report: upserts its volumes, marks volumes it no longer lists as missing, and schedules
 * what the policy asks for (escrow of volumes without a key, rotation by age, rotation on drift). The node
 * is told to fetch tasks when new ones appeared.
 */
export async function storeReport(
  tx: Queryable,
  node: NodeRef,
  report: { volumes: VolumeReport[]; tpm2Available: boolean; externalManager: string },
): Promise<void> {
  await tx.query(
    `INSERT INTO luks_node_state (node_id, tpm2_available, external_manager, reported_at) VALUES ($1, $2, $3, now())
     ON CONFLICT (node_id) DO UPDATE SET tpm2_available = excluded.tpm2_available,
       external_manager = excluded.external_manager, reported_at = now()`,
    [node.nodeId, report.tpm2Available, report.externalManager],
  );
  const identities: string[] = [];
  for (const v of report.volumes) {
    const identity = identityOf(v);
    identities.push(identity);
    await tx.query(
      `INSERT INTO luks_volumes (node_id, node_name, identity, luks_uuid, device, mapper_name, mount_point, is_root,
         luks_version, cipher, key_size_bits, pbkdf, key_slots, tpm2_enrolled, tpm2_pcrs, tang_enrolled,
         agent_key_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::text::jsonb, $14, $15::int[], $16, $17)
       ON CONFLICT (node_id, identity) DO UPDATE SET node_name = excluded.node_name,
         device = excluded.device, mapper_name = excluded.mapper_name, mount_point = excluded.mount_point,
         is_root = excluded.is_root, luks_version = excluded.luks_version, cipher = excluded.cipher,
         key_size_bits = excluded.key_size_bits, pbkdf = excluded.pbkdf, key_slots = excluded.key_slots,
         tpm2_enrolled = excluded.tpm2_enrolled, tpm2_pcrs = excluded.tpm2_pcrs,
         tang_enrolled = excluded.tang_enrolled, agent_key_id = excluded.agent_key_id,
         reported_at = now(), missing_since = NULL`,
      [
        node.nodeId,
        node.nodeName,
        identity,
        v.luksVersion > 0 ? v.uuid : "",
        v.device,
        v.mapperName,
        v.mountPoint,
        v.root,
        v.luksVersion,
        v.cipher,
        v.keySizeBits,
        v.pbkdf,
        JSON.stringify(v.keySlots),
        v.tpm2Enrolled,
        v.tpm2Pcrs,
        v.tangEnrolled,
        v.escrowedKeyId,
      ],
    );
  }
  await tx.query(
    `UPDATE luks_volumes SET missing_since = now()
      WHERE node_id = $1 AND missing_since IS NULL AND NOT (identity = ANY($2::text[]))`,
    [node.nodeId, identities],
  );
  if (await scheduleForNode(tx, node.nodeId)) await sendNodeCommand(tx, node.nodeId, "disk_encryption_task");
}

/**
 * Adds the tasks the node's policy calls for (escrow, rotation by age or drift, TPM2 and Tang protectors)
 * and closes protector tasks the report shows done; true when a task was added.
 */
async function scheduleForNode(tx: Queryable, nodeId: string): Promise<boolean> {
  await tx.query(
    `UPDATE luks_tasks t SET state = 'done', done_at = now() FROM luks_volumes v
      WHERE t.volume_id = v.id AND t.node_id = $1 AND t.state = 'pending'
        AND ((t.kind = 'enroll_tpm2' AND v.tpm2_enrolled) OR (t.kind = 'enroll_tang' AND v.tang_enrolled))`,
    [nodeId],
  );
  const effective = await effectivePolicy(tx, nodeId);
  if (!effective) return false;
  const policy = effective.policy;
  const volumes = await tx.query<{
    id: string;
    agent_key_id: string;
    key_slots: { slot: number }[];
    tpm2_enrolled: boolean;
    tang_enrolled: boolean;
    tpm2_available: boolean | null;
    external_manager: string | null;
    active_id: string | null;
    active_slot: number | null;
    active_age_days: number | null;
    rotation_open: boolean;
  }>(
    `SELECT v.id, v.agent_key_id, v.key_slots, v.tpm2_enrolled, v.tang_enrolled, s.tpm2_available,
            s.external_manager, k.id AS active_id, k.key_slot AS active_slot,
            extract(epoch FROM now() - k.confirmed_at)::float8 / 86400 AS active_age_days,
            EXISTS (SELECT 1 FROM luks_rotations r WHERE r.volume_id = v.id AND r.state = 'open') AS rotation_open
       FROM luks_volumes v LEFT JOIN luks_recovery_keys k ON k.volume_id = v.id AND k.state = 'active'
       LEFT JOIN luks_node_state s ON s.node_id = v.node_id
      WHERE v.node_id = $1 AND v.luks_version > 0 AND v.missing_since IS NULL`,
    [nodeId],
  );
  let added = false;
  const days = policy.recoveryKeyRotationDays;
  for (const v of volumes) {
    // A TPM/unlock stack owned by another tool (snapd, sdbootutil) is left alone.
    const ownStack = (v.external_manager ?? "") === "";
    if (policy.tpm2?.enroll && !v.tpm2_enrolled && v.tpm2_available && ownStack) {
      added = await addTask(tx, nodeId, v.id, "enroll_tpm2", "the policy requires a TPM2 protector") || added;
    }
    if (policy.tang && policy.tang.servers.length > 0 && !v.tang_enrolled && ownStack) {
      added = await addTask(tx, nodeId, v.id, "enroll_tang", "the policy requires Tang protectors") || added;
    }
    if (!policy.escrowRecoveryKey) continue;
    if (!v.active_id) {
      added = await addTask(tx, nodeId, v.id, "escrow", "no recovery key escrowed") || added;
      continue;
    }
    if (v.rotation_open) continue;
    const slots = new Set(v.key_slots.map((s) => s.slot));
    if (v.agent_key_id !== v.active_id || !slots.has(v.active_slot ?? -1)) {
      const why = v.agent_key_id !== v.active_id
        ? "drift: the node reports another recovery key than the escrowed one"
        : `drift: keyslot ${v.active_slot} of the escrowed recovery key is gone`;
      added = await requestRotation(tx, v.id, why) || added;
    } else if (days > 0 && (v.active_age_days ?? 0) >= days) {
      added = await requestRotation(tx, v.id, `recovery key older than ${days} days`) || added;
    }
  }
  return added;
}

async function addTask(
  tx: Queryable,
  nodeId: string,
  volumeId: string,
  kind: TaskRow["kind"],
  reason: string,
): Promise<boolean> {
  const rows = await tx.query(
    `INSERT INTO luks_tasks (node_id, volume_id, kind, reason) VALUES ($1, $2, $3, $4)
     ON CONFLICT (volume_id, kind) WHERE state = 'pending' DO NOTHING RETURNING id`,
    [nodeId, volumeId, kind, reason],
  );
  return rows.length > 0;
}

/**
 * Marks a volume's recovery key due for rotation (it counts as overdue until a rotation completes) and
 * queues the agent's task. True when a new task was queued; the caller notifies the node.
 */
export async function requestRotation(tx: Queryable, volumeId: string, reason: string): Promise<boolean> {
  const [v] = await tx.query<{ node_id: string | null }>(
    `UPDATE luks_volumes SET rotation_requested_at = coalesce(rotation_requested_at, now()),
       rotation_reason = CASE WHEN rotation_requested_at IS NULL THEN $2 ELSE rotation_reason END
     WHERE id = $1 RETURNING node_id`,
    [volumeId, reason],
  );
  if (!v?.node_id) return false;
  return await addTask(tx, v.node_id, volumeId, "rotate", reason);
}

/** Rotations due by age across the fleet (the periodic sweep); returns the nodes that got tasks. */
export async function sweepDueRotations(db: Db): Promise<string[]> {
  const nodes = await db.query<{ node_id: string }>(
    `SELECT DISTINCT node_id FROM luks_volumes
      WHERE node_id IS NOT NULL AND luks_version > 0 AND missing_since IS NULL`,
  );
  const touched: string[] = [];
  for (const { node_id } of nodes) {
    const added = await db.transaction(async (tx) => {
      const any = await scheduleForNode(tx, node_id);
      if (any) await sendNodeCommand(tx, node_id, "disk_encryption_task");
      return any;
    });
    if (added) touched.push(node_id);
  }
  return touched;
}

/** The node's pending tasks, oldest first. */
export async function pendingTasks(q: Queryable, nodeId: string): Promise<TaskRow[]> {
  return await q.query<TaskRow>(
    `SELECT t.id, t.kind, v.luks_uuid AS volume_uuid, t.reason, t.created_at
       FROM luks_tasks t JOIN luks_volumes v ON v.id = t.volume_id
      WHERE t.node_id = $1 AND t.state = 'pending' ORDER BY t.created_at, t.id`,
    [nodeId],
  );
}

/** The caller's own encrypted volume with this LUKS UUID, or a refusal naming the fix. */
async function ownVolume(tx: Queryable, node: NodeRef, uuid: string): Promise<{ id: string }> {
  const [v] = await tx.query<{ id: string }>(
    `SELECT id FROM luks_volumes WHERE node_id = $1 AND luks_uuid = $2 AND luks_version > 0 FOR UPDATE`,
    [node.nodeId, uuid],
  );
  if (!v) {
    throw new DomainError(
      "not_found",
      `volume ${uuid} is not in the disk-encryption inventory of node "${node.nodeName}"; report it with ReportDiskEncryptionState first`,
    );
  }
  return v;
}

async function checkTask(tx: Queryable, node: NodeRef, taskId: string, volumeId: string): Promise<void> {
  if (!taskId) return;
  const [t] = await tx.query(
    "SELECT 1 FROM luks_tasks WHERE id = $1 AND node_id = $2 AND volume_id = $3",
    [taskId, node.nodeId, volumeId],
  );
  if (!t) throw notFoundError(`task ${taskId} of this volume`);
}

/** Starts (or returns the open) rotation of the caller's volume. */
export async function beginRotation(
  tx: Queryable,
  node: NodeRef,
  input: { volumeUuid: string; taskId: string },
): Promise<{ rotationId: string; currentKeyId: string }> {
  const volume = await ownVolume(tx, node, input.volumeUuid);
  await checkTask(tx, node, input.taskId, volume.id);
  const [open] = await tx.query<{ id: string; previous_key_id: string | null }>(
    "SELECT id, previous_key_id FROM luks_rotations WHERE volume_id = $1 AND state = 'open'",
    [volume.id],
  );
  if (open) return { rotationId: open.id, currentKeyId: open.previous_key_id ?? "" };
  const [active] = await tx.query<{ id: string }>(
    "SELECT id FROM luks_recovery_keys WHERE volume_id = $1 AND state = 'active'",
    [volume.id],
  );
  const [row] = await tx.query<{ id: string }>(
    `INSERT INTO luks_rotations (volume_id, previous_key_id, task_id) VALUES ($1, $2, $3) RETURNING id`,
    [volume.id, active?.id ?? null, input.taskId || null],
  );
  return { rotationId: row.id, currentKeyId: active?.id ?? "" };
}

/**
 * Stores a new recovery key as `pending`, sealed under the KEK. A first escrow needs a volume without an
 * active key; replacing an active key needs the rotation from {@link beginRotation}.
 */
export async function escrowKey(
  tx: Queryable,
  keyring: Keyring,
  node: NodeRef,
  input: { volumeUuid: string; recoveryKey: string; taskId: string; rotationId: string },
): Promise<string> {
  const volume = await ownVolume(tx, node, input.volumeUuid);
  await checkTask(tx, node, input.taskId, volume.id);
  if (input.rotationId) {
    const [r] = await tx.query(
      "SELECT 1 FROM luks_rotations WHERE id = $1 AND volume_id = $2 AND state = 'open'",
      [input.rotationId, volume.id],
    );
    if (!r) throw conflictError(`rotation ${input.rotationId} is not open for volume ${input.volumeUuid}`);
  } else {
    const [active] = await tx.query(
      "SELECT 1 FROM luks_recovery_keys WHERE volume_id = $1 AND state = 'active'",
      [volume.id],
    );
    if (active) {
      throw conflictError(
        `volume ${input.volumeUuid} already has an active recovery key; call BeginRecoveryKeyRotation and pass its rotation_id`,
      );
    }
  }
  const keyId = crypto.randomUUID();
  const sealed = await sealRecoveryKey(keyring, keyId, input.recoveryKey);
  await tx.query(
    `INSERT INTO luks_recovery_keys (id, volume_id, state, rotation_id, kek_id, wrapped_data_key, ciphertext)
     VALUES ($1, $2, 'pending', $3, $4, $5, $6)`,
    [keyId, volume.id, input.rotationId || null, sealed.kekId, sealed.wrappedDataKey, sealed.ciphertext],
  );
  return keyId;
}

/**
 * Makes an escrowed key the volume's active key in `keySlot`. The key it replaces becomes `destroyed` when
 * this completes a rotation (the agent removed its keyslot before confirming), `retired` otherwise; other
 * pending keys are abandoned, the rotation and the volume's escrow/rotate tasks are done. Confirming the
 * active key again with the same slot is accepted (an agent retrying after a lost answer).
 */
export async function confirmKey(
  tx: Queryable,
  node: NodeRef,
  input: { keyId: string; keySlot: number },
): Promise<
  { volumeId: string; volumeUuid: string; changed: boolean; replacedKeyId?: string; destroyedKeyId?: string }
> {
  const [key] = await tx.query<{
    id: string;
    volume_id: string;
    luks_uuid: string;
    state: string;
    key_slot: number | null;
    rotation_id: string | null;
  }>(
    `SELECT k.id, k.volume_id, v.luks_uuid, k.state, k.key_slot, k.rotation_id FROM luks_recovery_keys k
       JOIN luks_volumes v ON v.id = k.volume_id
      WHERE k.id = $1 AND v.node_id = $2 FOR UPDATE OF k`,
    [input.keyId, node.nodeId],
  );
  if (!key) throw notFoundError(`recovery key ${input.keyId} of node "${node.nodeName}"`);
  const done = { volumeId: key.volume_id, volumeUuid: key.luks_uuid };
  if (key.state === "active" && key.key_slot === input.keySlot) return { ...done, changed: false };
  if (key.state !== "pending") {
    throw conflictError(`recovery key ${input.keyId} is ${key.state}; only a pending key can be confirmed`);
  }
  const [previous] = await tx.query<{ id: string }>(
    `UPDATE luks_recovery_keys SET state = $2, retired_at = now()
      WHERE volume_id = $1 AND state = 'active' RETURNING id`,
    [key.volume_id, key.rotation_id ? "destroyed" : "retired"],
  );
  await tx.query(
    `UPDATE luks_recovery_keys SET state = 'abandoned' WHERE volume_id = $1 AND state = 'pending' AND id <> $2`,
    [key.volume_id, key.id],
  );
  await tx.query(
    "UPDATE luks_recovery_keys SET state = 'active', key_slot = $2, confirmed_at = now() WHERE id = $1",
    [key.id, input.keySlot],
  );
  await tx.query(
    "UPDATE luks_volumes SET agent_key_id = $2, rotation_requested_at = NULL, rotation_reason = '' WHERE id = $1",
    [key.volume_id, key.id],
  );
  if (key.rotation_id) {
    await tx.query("UPDATE luks_rotations SET state = 'completed', completed_at = now() WHERE id = $1", [
      key.rotation_id,
    ]);
  }
  await tx.query(
    `UPDATE luks_tasks SET state = 'done', done_at = now()
      WHERE volume_id = $1 AND state = 'pending' AND kind IN ('escrow', 'rotate')`,
    [key.volume_id],
  );
  // A key revealed while it was still pending must not stay valid either.
  const [revealed] = await tx.query<{ node_id: string | null }>(
    `SELECT v.node_id FROM luks_recovery_keys k JOIN luks_volumes v ON v.id = k.volume_id
      WHERE k.id = $1 AND k.reveal_count > 0`,
    [key.id],
  );
  if (revealed?.node_id && (await effectivePolicy(tx, revealed.node_id))?.policy.rotateAfterReveal) {
    if (await requestRotation(tx, key.volume_id, "recovery key revealed before its confirmation")) {
      await sendNodeCommand(tx, revealed.node_id, "disk_encryption_task");
    }
  }
  return {
    ...done,
    changed: true,
    ...(previous ? { replacedKeyId: previous.id } : {}),
    ...(key.rotation_id && previous ? { destroyedKeyId: previous.id } : {}),
  };
}

/** A revealed key and what the reveal did. */
export interface Reveal {
  keyId: string;
  recoveryKey: string;
  /**
   * Escrowed keys not confirmed yet (a key change in progress, or interrupted by a crash): the volume may
   * already open only with one of these, so they are revealed along with the active key.
   */
  alternates: { keyId: string; recoveryKey: string }[];
  volumeUuid: string;
  nodeName: string;
  rotationScheduled: boolean;
}

/**
 * Opens the recovery key of a volume for an administrator: the active key, plus any escrowed key not yet
 * confirmed (without an active key, the newest of those leads). Counts the reveal on every key shown, and
 * schedules a rotation when the node's policy rotates after reveals (a revealed key confirmed later is
 * rotated at its confirmation). Authorisation, reason and re-authentication are the caller's job (the
 * REST route); this only runs after them.
 */
export async function revealKey(tx: Queryable, keyring: Keyring, volumeId: string): Promise<Reveal> {
  const [volume] = await tx.query<{ luks_uuid: string; node_name: string; node_id: string | null }>(
    "SELECT luks_uuid, node_name, node_id FROM luks_volumes WHERE id = $1",
    [volumeId],
  );
  if (!volume) throw notFoundError(`volume ${volumeId}`);
  const rows = await tx.query<
    { id: string; kek_id: string; wrapped_data_key: Uint8Array; ciphertext: Uint8Array }
  >(
    `SELECT id, kek_id, wrapped_data_key, ciphertext FROM luks_recovery_keys
      WHERE volume_id = $1 AND state IN ('active', 'pending')
      ORDER BY state = 'active' DESC, created_at DESC, id FOR UPDATE`,
    [volumeId],
  );
  if (rows.length === 0) throw conflictError(`volume ${volumeId} has no escrowed recovery key to reveal`);
  const opened = [];
  for (const row of rows) {
    opened.push({ keyId: row.id, recoveryKey: await openRecoveryKey(keyring, row.id, sealedOf(row)) });
  }
  await tx.query(
    "UPDATE luks_recovery_keys SET reveal_count = reveal_count + 1, last_revealed_at = now() WHERE id = ANY($1::uuid[])",
    [rows.map((r) => r.id)],
  );
  let rotationScheduled = false;
  if (volume.node_id && (await effectivePolicy(tx, volume.node_id))?.policy.rotateAfterReveal) {
    rotationScheduled = true;
    if (await requestRotation(tx, volumeId, "recovery key revealed")) {
      await sendNodeCommand(tx, volume.node_id, "disk_encryption_task");
    }
  }
  luksRecoveryKeyReveals.inc();
  luksEscrowOperations.inc({ op: "release", outcome: "ok" });
  return {
    ...opened[0],
    alternates: opened.slice(1),
    volumeUuid: volume.luks_uuid,
    nodeName: volume.node_name,
    rotationScheduled,
  };
}

function sealedOf(row: { kek_id: string; wrapped_data_key: Uint8Array; ciphertext: Uint8Array }): SealedKey {
  return {
    kekId: row.kek_id,
    wrappedDataKey: new Uint8Array(row.wrapped_data_key),
    ciphertext: new Uint8Array(row.ciphertext),
  };
}

/**
 * Re-wraps every data key not wrapped by the keyring's current KEK (after a new KEK was put first in the
 * file). Each key is its own short transaction; returns how many were re-wrapped and which KEK ids remain
 * in use (when only the current one remains, the old lines can leave the file).
 */
export async function rewrapAll(
  db: Db,
  keyring: Keyring,
): Promise<{ rewrapped: number; kekIdsInUse: string[] }> {
  const ids = await db.query<{ id: string }>(
    "SELECT id FROM luks_recovery_keys WHERE kek_id <> $1 ORDER BY id",
    [keyring.currentId],
  );
  let rewrapped = 0;
  for (const { id } of ids) {
    await db.transaction(async (tx) => {
      const [row] = await tx.query<{ kek_id: string; wrapped_data_key: Uint8Array; ciphertext: Uint8Array }>(
        "SELECT kek_id, wrapped_data_key, ciphertext FROM luks_recovery_keys WHERE id = $1 FOR UPDATE",
        [id],
      );
      if (!row || row.kek_id === keyring.currentId) return;
      const next = await rewrapDataKey(keyring, id, sealedOf(row));
      await tx.query("UPDATE luks_recovery_keys SET kek_id = $2, wrapped_data_key = $3 WHERE id = $1", [
        id,
        next.kekId,
        next.wrappedDataKey,
      ]);
      rewrapped++;
    });
  }
  const inUse = await db.query<{ kek_id: string }>(
    "SELECT DISTINCT kek_id FROM luks_recovery_keys ORDER BY kek_id",
  );
  return { rewrapped, kekIdsInUse: inUse.map((r) => r.kek_id) };
}
