/**
 * The inventory as the server receives it (`ReportDiskEncryptionState`): every volume with its keyslots and
 * their kinds, svc's escrowed key per volume, and whether the node can take a TPM2 protector.
 *
 * @module
 */
import { LuksKeySlotKind, type ReportDiskEncryptionStateRequest } from "../gen/svc/policy/v1/policy_pb.ts";
import type { Inventory, SlotKind } from "./inventory.ts";

const KIND: Record<SlotKind, LuksKeySlotKind> = {
  passphrase: LuksKeySlotKind.PASSPHRASE,
  recovery: LuksKeySlotKind.RECOVERY_KEY,
  tpm2: LuksKeySlotKind.TPM2,
  tang: LuksKeySlotKind.TANG,
  fido2: LuksKeySlotKind.FIDO2,
  pkcs11: LuksKeySlotKind.PKCS11,
};

/** The report of `inventory` by agent `clientId`; `tpm2Available` when a TPM2 protector can be enrolled. */
export function inventoryReport(
  { volumes, state }: Inventory,
  node: { clientId: string; tpm2Available: boolean },
): ReportDiskEncryptionStateRequest {
  return {
    $typeName: "svc.policy.v1.ReportDiskEncryptionStateRequest",
    clientId: node.clientId,
    tpm2Available: node.tpm2Available,
    externalManager: "",
    volumes: volumes.map((v) => ({
      $typeName: "svc.policy.v1.LuksVolume",
      device: v.device,
      uuid: v.uuid,
      mapperName: v.mapperName,
      mountPoint: v.mountPoint,
      root: v.root,
      luksVersion: v.luksVersion,
      cipher: v.cipher,
      keySizeBits: v.keySizeBits,
      pbkdf: v.pbkdf,
      keySlots: v.slots.map((s) => ({
        $typeName: "svc.policy.v1.LuksKeySlot",
        slot: s.slot,
        kind: KIND[s.kind],
        managed: s.managed,
      })),
      tpm2Enrolled: v.tpm2Enrolled,
      tpm2Pcrs: v.tpm2Pcrs,
      tangEnrolled: v.tangEnrolled,
      escrowedKeyId: state[v.uuid]?.keyId ?? "",
    })),
  };
}
