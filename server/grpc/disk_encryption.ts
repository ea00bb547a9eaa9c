/**
 * The five disk-encryption methods of `PolicyService`. The caller is the node of the verified client
 * certificate (the service's guard resolves it); every lookup is restricted to that node's own volumes and
 * keys, so one node can neither escrow for, confirm, rotate nor learn about another node's volumes.
 *
 * @module
 */
import * as grpc from "@grpc/grpc-js";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServerContext } from "../context.ts";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import {
  type BeginRecoveryKeyRotationRequest,
  type ConfirmRecoveryKeyRequest,
  DiskEncryptionTaskKind,
  type EscrowRecoveryKeyRequest,
  LuksKeySlotKind,
  type ReportDiskEncryptionStateRequest,
} from "../../shared/gen/svc/policy/v1/policy_pb.ts";
import { DomainError } from "../core/errors.ts";
import { checkCount, checkText, checkUuid, invalid } from "./validate.ts";
import { KekError } from "../pki/envelope.ts";
import {
  beginRotation,
  confirmKey,
  counted,
  escrowKey,
  type NodeRef,
  pendingTasks,
  RECOVERY_KEY_PATTERN,
  storeReport,
  type VolumeReport,
} from "../disk_encryption/escrow.ts";
import { keyringFor } from "../disk_encryption/kek.ts";

const SLOT_KINDS: Record<number, string> = {
  [LuksKeySlotKind.UNSPECIFIED]: "unknown",
  [LuksKeySlotKind.PASSPHRASE]: "passphrase",
  [LuksKeySlotKind.RECOVERY_KEY]: "recovery",
  [LuksKeySlotKind.TPM2]: "tpm2",
  [LuksKeySlotKind.TANG]: "tang",
  [LuksKeySlotKind.FIDO2]: "fido2",
  [LuksKeySlotKind.PKCS11]: "pkcs11",
};

const TASK_KINDS: Record<string, DiskEncryptionTaskKind> = {
  escrow: DiskEncryptionTaskKind.ESCROW,
  rotate: DiskEncryptionTaskKind.ROTATE,
  enroll_tpm2: DiskEncryptionTaskKind.ENROLL_TPM2,
  enroll_tang: DiskEncryptionTaskKind.ENROLL_TANG,
};

/** Maps domain and KEK refusals to gRPC statuses; anything else propagates (INTERNAL, logged). */
async function mapped<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof DomainError) {
      const code = {
        not_found: grpc.status.NOT_FOUND,
        conflict: grpc.status.FAILED_PRECONDITION,
        invalid: grpc.status.INVALID_ARGUMENT,
        forbidden: grpc.status.PERMISSION_DENIED,
        bad_request: grpc.status.INVALID_ARGUMENT,
        unauthorized: grpc.status.UNAUTHENTICATED,
        too_many_requests: grpc.status.RESOURCE_EXHAUSTED,
        unavailable: grpc.status.UNAVAILABLE,
      }[err.kind];
      throw new GrpcError(code, err.message);
    }
    if (err instanceof KekError) throw new GrpcError(grpc.status.FAILED_PRECONDITION, err.message);
    throw err;
  }
}

function checkVolume(v: ReportDiskEncryptionStateRequest["volumes"][number], i: number): VolumeReport {
  const f = (name: string) => `volumes[${i}].${name}`;
  const device = checkText(f("device"), v.device, { max: 4096, required: true });
  if (!device.startsWith("/")) throw invalid(f("device"), "must be an absolute path such as /dev/nvme0n1p3");
  if (![0, 1, 2].includes(v.luksVersion)) throw invalid(f("luks_version"), "must be 0 (unencrypted), 1 or 2");
  const uuid = v.luksVersion > 0 ? checkUuid(f("uuid"), v.uuid) : "";
  checkCount(f("key_slots"), v.keySlots, 32);
  const seen = new Set<number>();
  const keySlots = v.keySlots.map((s, j) => {
    if (s.slot < 0 || s.slot > 31 || seen.has(s.slot)) {
      throw invalid(`${f("key_slots")}[${j}].slot`, "must be a distinct keyslot number between 0 and 31");
    }
    seen.add(s.slot);
    const kind = SLOT_KINDS[s.kind];
    if (kind === undefined) throw invalid(`${f("key_slots")}[${j}].kind`, `${s.kind} is not a known kind`);
    return { slot: s.slot, kind, managed: s.managed };
  });
  checkCount(f("tpm2_pcrs"), v.tpm2Pcrs, 24);
  for (const pcr of v.tpm2Pcrs) if (pcr > 23) throw invalid(f("tpm2_pcrs"), "PCRs are 0 to 23");
  if (v.keySizeBits < 0 || v.keySizeBits > 8192) throw invalid(f("key_size_bits"), "must be 0 to 8192");
  return {
    device,
    uuid,
    mapperName: checkText(f("mapper_name"), v.mapperName, { max: 255 }),
    mountPoint: checkText(f("mount_point"), v.mountPoint, { max: 4096 }),
    root: v.root,
    luksVersion: v.luksVersion,
    cipher: checkText(f("cipher"), v.cipher, { max: 128 }),
    keySizeBits: v.keySizeBits,
    pbkdf: checkText(f("pbkdf"), v.pbkdf, { max: 64 }),
    keySlots,
    tpm2Enrolled: v.tpm2Enrolled,
    tpm2Pcrs: [...v.tpm2Pcrs],
    tangEnrolled: v.tangEnrolled,
    escrowedKeyId: v.escrowedKeyId === "" ? "" : checkUuid(f("escrowed_key_id"), v.escrowedKeyId),
  };
}

/** Builds the five handlers on `ctx` (the guard passes the authenticated node). */
export function diskEncryptionHandlers(ctx: ServerContext) {
  const { db } = ctx;
  return {
    async reportState(request: ReportDiskEncryptionStateRequest, node: NodeRef) {
      checkCount("volumes", request.volumes, 256);
      const volumes = request.volumes.map(checkVolume);
      const ids = new Set<string>();
      for (const [i, v] of volumes.entries()) {
        const id = v.luksVersion > 0 ? v.uuid : v.device;
        if (ids.has(id)) throw invalid(`volumes[${i}]`, `volume ${id} is listed twice`);
        ids.add(id);
      }
      const externalManager = checkText("external_manager", request.externalManager, { max: 64 });
      await mapped(() =>
        db.transaction((tx) =>
          storeReport(tx, node, { volumes, tpm2Available: request.tpm2Available, externalManager })
        )
      );
      return {};
    },
    async getTasks(node: NodeRef) {
      const rows = await pendingTasks(db, node.nodeId);
      return {
        tasks: rows.map((t) => ({
          id: t.id,
          kind: TASK_KINDS[t.kind],
          volumeUuid: t.volume_uuid,
          reason: t.reason,
          createdAt: timestampFromDate(new Date(t.created_at)),
        })),
      };
    },
    async escrow(request: EscrowRecoveryKeyRequest, node: NodeRef) {
      return await counted("escrow", async () => {
        const volumeUuid = checkUuid("volume_uuid", request.volumeUuid);
        // Never echo the value: it is a secret even when malformed.
        if (!RECOVERY_KEY_PATTERN.test(request.recoveryKey)) {
          throw invalid("recovery_key", "must be 8 groups of 8 modhex characters separated by '-'");
        }
        const taskId = request.taskId ? checkUuid("task_id", request.taskId) : "";
        const rotationId = request.rotationId ? checkUuid("rotation_id", request.rotationId) : "";
        const keyId = await mapped(async () => {
          const keyring = await keyringFor(ctx.config);
          return await db.transaction((tx) =>
            escrowKey(tx, keyring, node, { volumeUuid, recoveryKey: request.recoveryKey, taskId, rotationId })
          );
        });
        return { keyId };
      });
    },
    async confirm(request: ConfirmRecoveryKeyRequest, node: NodeRef) {
      const keyId = checkUuid("key_id", request.keyId);
      if (request.keySlot < 0 || request.keySlot > 31) throw invalid("key_slot", "must be 0 to 31");
      // The confirmation and its audit row (which key opens which volume since when: the trail a later reveal
      // is checked against) commit together.
      const out = await counted(
        "confirm",
        () =>
          mapped(() =>
            db.unitOfWork(async () => {
              const done = await db.transaction((tx) =>
                confirmKey(tx, node, { keyId, keySlot: request.keySlot })
              );
              if (done.changed) {
                await ctx.audit.record({
                  action: "disk_encryption.key_confirmed",
                  outcome: "success",
                  actor: { nodeId: node.nodeId, username: node.nodeName },
                  resource: {
                    type: "luks_volume",
                    id: done.volumeId,
                    name: `${node.nodeName}:${done.volumeUuid}`,
                  },
                  details: {
                    key_id: keyId,
                    key_slot: request.keySlot,
                    ...(done.replacedKeyId ? { replaced_key_id: done.replacedKeyId } : {}),
                    ...(done.destroyedKeyId ? { keyslot_destroyed: true } : {}),
                  },
                });
              }
              return done;
            })
          ),
      );
      if (out.destroyedKeyId) await counted("destroy", () => Promise.resolve());
      return {};
    },
    async beginRotation(request: BeginRecoveryKeyRotationRequest, node: NodeRef) {
      const volumeUuid = checkUuid("volume_uuid", request.volumeUuid);
      const taskId = request.taskId ? checkUuid("task_id", request.taskId) : "";
      return await mapped(() => db.transaction((tx) => beginRotation(tx, node, { volumeUuid, taskId })));
    },
  };
}
