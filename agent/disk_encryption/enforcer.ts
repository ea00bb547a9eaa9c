/**
 * DiskEncryption compliance: each policy's requirements checked per volume of the inventory and reported
 * item by item. Nothing is enforced by re-encrypting; recovery keys are written by the escrow manager on
 * the server's tasks, so this enforcer only reads (`cryptsetup luksDump`, `lsblk`) and reports:
 *
 * - `requirements`: encryption, LUKS version, cipher, key size (the shared rule of the policy type);
 * - `recovery_key`: a recovery key escrowed by this agent is in the header (when the policy escrows);
 * - `tpm2` / `tang`: the protector is present; INAPPLICABLE when the node lacks the TPM or the tools.
 *
 * @module
 */
import { join } from "node:path";
import { type DiskEncryptionPolicy } from "../../shared/gen/svc/policy/v1/disk_encryption_pb.ts";
import { diskEncryptionType, volumeRequirementIssues } from "../../shared/policy_types/disk_encryption.ts";
import { readFileIfExists } from "../fs.ts";
import { type CachedPolicy, type Enforcer, type ItemResult, rollupStatus } from "../sync/types.ts";
import { collectInventory } from "./inventory.ts";
import { parsePolicyContent } from "../sync/content.ts";

function parsePolicy(policy: CachedPolicy): DiskEncryptionPolicy {
  return parsePolicyContent(policy, diskEncryptionType);
}

/** The DiskEncryption enforcer (read-only; see the module documentation). */
export const diskEncryptionEnforcer: Enforcer = {
  type: diskEncryptionType.wireName,
  notifiesUsers: false,
  background: true,
  async sync(policies, io) {
    if (policies.length === 0) return { policies: [], changed: [] };
    const stateBytes = await readFileIfExists(
      join(io.config.enrollment.dataDir, "disk-encryption", "state.json"),
    );
    const state: Record<string, { keyId: string; slot: number }> = stateBytes
      ? JSON.parse(new TextDecoder().decode(stateBytes))
      : {};
    const cryptsetup = await io.runner.which("cryptsetup");
    if (!cryptsetup) {
      return {
        changed: [],
        policies: policies.map((p) => ({
          policyId: p.id,
          status: "INAPPLICABLE" as const,
          message: "cryptsetup is not installed on this node",
          items: [],
        })),
      };
    }
    const { volumes, problems } = await collectInventory({
      fs: io.fs,
      runner: io.runner,
      devices: io.config.diskEncryption.devices,
      managedSlots: new Map(Object.entries(state).map(([uuid, s]) => [uuid, s.slot])),
    });
    const tpmVersion = await io.fs.readTextFile("/sys/class/tpm/tpm0/tpm_version_major");
    const haveTpm2 = tpmVersion?.trim() === "2" && await io.runner.which("systemd-cryptenroll") !== undefined;
    const haveClevis = await io.runner.which("clevis") !== undefined;
    const results = policies.map((cached) => {
      let policy: DiskEncryptionPolicy;
      try {
        policy = parsePolicy(cached);
      } catch (err) {
        return { policyId: cached.id, status: "ERROR" as const, message: (err as Error).message, items: [] };
      }
      const items: ItemResult[] = problems.map((p) => ({
        schemaId: "inventory",
        key: "device",
        status: "ERROR" as const,
        message: p,
      }));
      for (const v of volumes) {
        const issues = volumeRequirementIssues(policy, v);
        items.push({
          schemaId: v.device,
          key: "requirements",
          status: issues.length ? "NON_COMPLIANT" : "COMPLIANT",
          message: issues.join("; ") ||
            (v.luksVersion ? `LUKS${v.luksVersion} ${v.cipher} ${v.keySizeBits} bits` : "not encrypted"),
        });
        if (v.luksVersion === 0) continue;
        if (policy.escrowRecoveryKey) {
          const own = state[v.uuid];
          const present = own !== undefined && v.slots.some((s) => s.slot === own.slot);
          items.push({
            schemaId: v.device,
            key: "recovery_key",
            status: present ? "COMPLIANT" : "NON_COMPLIANT",
            message: present
              ? `escrowed recovery key in keyslot ${own.slot}`
              : "no escrowed recovery key in the header yet",
          });
        }
        if (policy.tpm2?.enroll) {
          items.push({
            schemaId: v.device,
            key: "tpm2",
            status: v.tpm2Enrolled ? "COMPLIANT" : haveTpm2 ? "NON_COMPLIANT" : "INAPPLICABLE",
            message: v.tpm2Enrolled
              ? `TPM2 keyslot present (PCRs ${v.tpm2Pcrs.join("+") || "unknown"})`
              : haveTpm2
              ? "no TPM2 keyslot"
              : "no TPM 2.0 device or systemd-cryptenroll on this node",
          });
        }
        if (policy.tang && policy.tang.servers.length > 0) {
          items.push({
            schemaId: v.device,
            key: "tang",
            status: v.tangEnrolled ? "COMPLIANT" : haveClevis ? "NON_COMPLIANT" : "INAPPLICABLE",
            message: v.tangEnrolled
              ? "Tang (clevis) keyslot present"
              : haveClevis
              ? "no Tang keyslot"
              : "clevis is not installed",
          });
        }
      }
      if (volumes.length === 0) {
        items.push({
          schemaId: "inventory",
          key: "volumes",
          status: "INAPPLICABLE",
          message: "no fixed volumes found",
        });
      }
      const status = rollupStatus(items);
      const bad = items.filter((i) => i.status === "NON_COMPLIANT").length;
      return {
        policyId: cached.id,
        status,
        message: bad ? `${bad} requirement(s) not met` : `${volumes.length} volume(s) checked`,
        items,
      };
    });
    return { policies: results, changed: [] };
  },
};
