/**
 * The priority merge of the DiskEncryption policies, in one place for the enforcer's report and the manager's
 * protector tasks, over the desktop skeleton's {@linkcode Winners} (the engine's order: priority descending, then
 * policy id).
 *
 * Requirements (encryption, LUKS version, ciphers, key size) and recovery-key escrow are not merged: each
 * policy's requirements are checked against every volume, nothing is set by them, and escrow is yes or no. What
 * a policy sets up is its unlock protectors, each once per volume, so each protector (TPM2, Tang) is one identity
 * of the merge, field by field: the first policy asking for it decides how it is enrolled (PCRs, servers), and a
 * later policy asking for it differently is overridden. The server merges the same way
 * (`mergeDiskEncryption` in shared/policy_types/disk_encryption.ts) to issue protector tasks, so each task it
 * sends is for this merge's winner.
 *
 * @module
 */
import type {
  DiskEncryptionPolicy,
  DiskEncryptionTang,
  DiskEncryptionTpm2,
} from "../../shared/gen/svc/policy/v1/disk_encryption_pb.ts";
import { diskEncryptionType } from "../../shared/policy_types/disk_encryption.ts";
import { type Checked, Winners } from "../enforcers/desktop_enforcer.ts";
import { revalidate } from "../enforcers/revalidate.ts";
import { PolicyContentError } from "../../shared/policy_types/errors.ts";
import { parsePolicyContent } from "../sync/content.ts";
import type { Logger } from "../log.ts";
import { type CachedPolicy, sortPolicies } from "../sync/types.ts";
import { tangPin } from "./protectors.ts";

/** The wire name of the DiskEncryption type (the daemon asks whether the node has such policies). */
export const DISK_ENCRYPTION_TYPE: string = diskEncryptionType.wireName;

/**
 * The agent's check of one DiskEncryption policy (server data is untrusted): it must parse, and what reaches a
 * tool must pass the shared registry's rules (PCRs become systemd-cryptenroll's arguments, Tang URLs and
 * thumbprints clevis's configuration). The requirements are only compared with what cryptsetup reports, so the
 * registry's rule for cipher names is not applied again here. Throws `PolicyContentError` naming the problem.
 */
export function checkDiskEncryption(policy: CachedPolicy): DiskEncryptionPolicy {
  const message = parsePolicyContent(policy, diskEncryptionType);
  const issues = diskEncryptionType.validate(message).filter((i) => /^(tpm2|tang)\b/.test(i.field));
  if (issues.length) {
    throw new PolicyContentError(issues.slice(0, 5).map((i) => `${i.field}: ${i.message}`).join("; "));
  }
  return message;
}

/** One policy's ask for a protector: the TPM2 or Tang settings it would enroll. */
export type ProtectorAsk =
  | { policy: CachedPolicy; kind: "tpm2"; tpm2: DiskEncryptionTpm2 }
  | { policy: CachedPolicy; kind: "tang"; tang: DiskEncryptionTang };

/** The protectors the valid policies ask for, merged by priority (identity: the protector's kind). */
export function protectorWinners(valid: readonly Checked<DiskEncryptionPolicy>[]): Winners<ProtectorAsk> {
  const winners = new Winners<ProtectorAsk>();
  for (const { policy, message } of valid) {
    if (message.tpm2?.enroll) winners.add("tpm2", { policy, kind: "tpm2", tpm2: message.tpm2 });
    if (message.tang && message.tang.servers.length > 0) {
      winners.add("tang", { policy, kind: "tang", tang: message.tang });
    }
  }
  return winners;
}

/**
 * The protectors in force among the node's cached policies (any type; the DiskEncryption ones count). A policy
 * whose content fails the checks is left out, as the enforcer reports it ERROR and never applies it.
 */
export function protectorsInForce(policies: readonly CachedPolicy[], logger: Logger): Winners<ProtectorAsk> {
  const ours = sortPolicies(policies.filter((p) => p.type === DISK_ENCRYPTION_TYPE));
  return protectorWinners(
    revalidate(DISK_ENCRYPTION_TYPE, ours, { check: checkDiskEncryption, logger }).valid,
  );
}

/** How `ask` enrolls its protector, in words (the value shown to an overridden policy). */
export function protectorSettings(ask: ProtectorAsk): string {
  if (ask.kind === "tpm2") {
    const pcrs = ask.tpm2.pcrs.length ? ask.tpm2.pcrs : [7];
    return `TPM2 sealed to PCRs ${pcrs.join("+")}${ask.tpm2.requirePin ? " with a PIN" : ""}`;
  }
  const { servers, threshold } = ask.tang;
  return `Tang ${servers.map((s) => s.url).join(", ")} (${Math.max(1, threshold)} of ${servers.length})`;
}

/** Whether two asks of one protector enroll it the same way (then the later one is judged like the first). */
export function sameProtector(a: ProtectorAsk, b: ProtectorAsk): boolean {
  if (a.kind === "tpm2" || b.kind === "tpm2") return protectorSettings(a) === protectorSettings(b);
  return tangPin(a.tang).config === tangPin(b.tang).config;
}
