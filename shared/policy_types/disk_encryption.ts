/**
 * DiskEncryption: requirements on LUKS volumes, recovery-key escrow and unlock protectors, merged by
 * priority. Cipher names and PCR numbers become cryptsetup/systemd-cryptenroll arguments and Tang URLs and
 * thumbprints end up in clevis configuration, so each is checked.
 */
import {
  type DiskEncryptionPolicy,
  DiskEncryptionPolicySchema,
} from "../gen/svc/policy/v1/disk_encryption_pb.ts";
import { defineType, messageJson } from "./define.ts";
import { matches, urlWithScheme } from "./sanitizers.ts";

// LUKS1 headers name the IV generator's hash after a colon (`aes-cbc-essiv:sha256`, what cryptsetup prints and
// takes), so one hash suffix is allowed: an admin must be able to allow the ciphers of older volumes.
const CIPHER = matches(
  /^[a-z0-9]+(-[a-z0-9]+){0,3}(:[a-z0-9]+)?$/,
  "a cipher in cryptsetup notation such as aes-xts-plain64 or aes-cbc-essiv:sha256",
);
const THUMBPRINT = matches(
  /^[A-Za-z0-9_-]{16,128}$/,
  "a key thumbprint (base64url, as printed by tang-show-keys)",
);

/** The DiskEncryption policy type. */
export const diskEncryptionType = defineType<DiskEncryptionPolicy>({
  wireName: "DiskEncryption",
  label: "Disk encryption",
  description: "LUKS recovery keys escrowed to the server.",
  schema: DiskEncryptionPolicySchema,
  typedContentCase: "diskEncryptionPolicy",
  merge: "priority_merge",
  names: "proto",
  check(message, issues) {
    const json = messageJson(DiskEncryptionPolicySchema, message) as Record<string, unknown>;
    if (Object.keys(json).length === 0) issues.add("", "policy content needs at least one setting");
    if (![0, 1, 2].includes(message.minLuksVersion)) {
      issues.add("min_luks_version", "must be 0 (any), 1 or 2");
    }
    issues.each("allowed_ciphers", message.allowedCiphers, CIPHER);
    if (message.minKeySizeBits < 0 || message.minKeySizeBits > 4096 || message.minKeySizeBits % 8 !== 0) {
      issues.add("min_key_size_bits", "must be a multiple of 8 between 0 and 4096");
    }
    if (message.recoveryKeyRotationDays < 0 || message.recoveryKeyRotationDays > 3650) {
      issues.add("recovery_key_rotation_days", "must be between 0 and 3650");
    }
    if (!message.escrowRecoveryKey) {
      if (message.recoveryKeyRotationDays > 0) {
        issues.add(
          "recovery_key_rotation_days",
          "only applies with escrow_recovery_key; enable escrow or set 0",
        );
      }
      if (message.rotateAfterReveal) {
        issues.add("rotate_after_reveal", "only applies with escrow_recovery_key; enable escrow or clear it");
      }
    }
    const tpm2 = message.tpm2;
    if (tpm2) {
      const seen = new Set<number>();
      tpm2.pcrs.forEach((pcr, i) => {
        if (pcr > 23) issues.add(`tpm2.pcrs[${i}]`, "must be a PCR number between 0 and 23");
        else if (seen.has(pcr)) issues.add(`tpm2.pcrs[${i}]`, `PCR ${pcr} is listed twice`);
        seen.add(pcr);
      });
    }
    const tang = message.tang;
    if (tang) {
      if (tang.servers.length === 0) issues.add("tang.servers", "at least one Tang server is required");
      if (tang.threshold < 0 || tang.threshold > tang.servers.length) {
        issues.add("tang.threshold", `must be between 0 and the number of servers (${tang.servers.length})`);
      }
      tang.servers.forEach((server, i) => {
        issues.check(`tang.servers[${i}].url`, server.url, urlWithScheme(["http", "https"]));
        issues.check(`tang.servers[${i}].thumbprint`, server.thumbprint, THUMBPRINT);
      });
    }
  },
});

/** What {@link volumeRequirementIssues} needs to know about one volume (server and agent both have it). */
export interface VolumeFacts {
  /** 0 for an unencrypted volume. */
  luksVersion: number;
  cipher: string;
  keySizeBits: number;
}

/**
 * The policy's requirements a volume misses, each a sentence for a person; empty when it complies. The agent
 * reports these and the server's inventory shows them; nothing re-encrypts a volume to fix them.
 */
export function volumeRequirementIssues(policy: DiskEncryptionPolicy, volume: VolumeFacts): string[] {
  if (volume.luksVersion === 0) return policy.requireEncryption ? ["volume is not encrypted"] : [];
  const issues: string[] = [];
  if (policy.minLuksVersion > volume.luksVersion) {
    issues.push(`LUKS${volume.luksVersion} header; the policy requires LUKS${policy.minLuksVersion}`);
  }
  if (policy.allowedCiphers.length > 0 && !policy.allowedCiphers.includes(volume.cipher)) {
    issues.push(`cipher ${volume.cipher || "(unknown)"} is not one of ${policy.allowedCiphers.join(", ")}`);
  }
  if (policy.minKeySizeBits > volume.keySizeBits) {
    issues.push(`key size ${volume.keySizeBits} bits is below the required ${policy.minKeySizeBits}`);
  }
  return issues;
}

/** The DiskEncryption policies reaching one node, as one: what the server schedules and judges from. */
export interface MergedDiskEncryption {
  /** Every policy reaching the node, highest priority first: each one's requirements are checked on its own. */
  requirements: DiskEncryptionPolicy[];
  /** Escrow when any policy asks for it; rotation age from the first escrowing policy that sets one. */
  escrowRecoveryKey: boolean;
  recoveryKeyRotationDays: number;
  rotateAfterReveal: boolean;
  /** Each unlock protector from the first policy asking for it (the agent's merge: one identity per kind). */
  tpm2?: DiskEncryptionPolicy["tpm2"];
  tang?: DiskEncryptionPolicy["tang"];
}

/**
 * Merges the DiskEncryption policies of one node, field by field, in the agent's order (priority descending,
 * then policy id), so that the server asks for the same protectors the agent enrolls: a lower policy asking for
 * TPM2 where the top one does not still gets its protector task. Requirements are not merged (a volume must meet
 * each policy's), escrow is asked for by any policy.
 */
export function mergeDiskEncryption(ordered: readonly DiskEncryptionPolicy[]): MergedDiskEncryption {
  const escrowing = ordered.filter((p) => p.escrowRecoveryKey);
  return {
    requirements: [...ordered],
    escrowRecoveryKey: escrowing.length > 0,
    recoveryKeyRotationDays: escrowing.find((p) => p.recoveryKeyRotationDays > 0)?.recoveryKeyRotationDays ??
      0,
    rotateAfterReveal: escrowing.some((p) => p.rotateAfterReveal),
    tpm2: ordered.find((p) => p.tpm2?.enroll)?.tpm2,
    tang: ordered.find((p) => (p.tang?.servers.length ?? 0) > 0)?.tang,
  };
}

/** The requirements of every policy a volume misses, each once. */
export function mergedRequirementIssues(merged: MergedDiskEncryption, volume: VolumeFacts): string[] {
  return [...new Set(merged.requirements.flatMap((policy) => volumeRequirementIssues(policy, volume)))];
}
