/**
 * DiskEncryption compliance: each policy's requirements checked per volume of the inventory and reported item by
 * item. Nothing is enforced by re-encrypting, and no file is written; the enforcer reads (`cryptsetup luksDump`,
 * `lsblk`) and reports:
 *
 * - `requirements`: encryption, LUKS version, cipher, key size (the shared rule of the policy type);
 * - `recovery_key`: a recovery key escrowed by this agent is in the header (when the policy escrows);
 * - `tpm2` / `tang`: the protector is present; INAPPLICABLE when the node lacks the TPM or the tools, or when a
 *   higher-priority policy enrolls it differently (merge.ts).
 *
 * A desktop type over `desktop_enforcer.ts`: re-validation, "cryptsetup is not installed" (a {@linkcode NodeNeed},
 * so also what the type watches), the nothing-to-do result, the priority winners of the protectors and the rollup
 * are the skeleton's. It has no {@linkcode Effects}: what changes the volumes (escrowing and rotating recovery
 * keys, enrolling protectors) is the server's tasks, performed by the manager (manager.ts) outside the sync
 * because each is a series of server round-trips with a crash-safe journal, started by the server and retried
 * at the next connect; a task done asks for a sync, whose read-back here reports the new keyslots.
 *
 * @module
 */
import type { DiskEncryptionPolicy } from "../../shared/gen/svc/policy/v1/disk_encryption_pb.ts";
import { volumeRequirementIssues } from "../../shared/policy_types/disk_encryption.ts";
import type { ComplianceStatusName, Enforcer, ItemResult } from "../sync/types.ts";
import {
  type Checked,
  desktopEnforcer,
  type DesktopPlan,
  type NodeNeed,
  summarize,
  type Winners,
} from "../enforcers/desktop_enforcer.ts";
import { collectInventory, type Inventory, type Volume } from "./inventory.ts";
import {
  checkDiskEncryption,
  DISK_ENCRYPTION_TYPE,
  type ProtectorAsk,
  protectorSettings,
  protectorWinners,
  sameProtector,
} from "./merge.ts";
import { tpm2Present } from "./protectors.ts";

/** The merged protectors; no file is ever planned. */
interface DiskPlan extends DesktopPlan {
  protectors: Winners<ProtectorAsk>;
}

/** The inventory as read back, and which protectors this node can take. */
interface DiskState extends Inventory {
  haveTpm2: boolean;
  haveClevis: boolean;
}

/** What the node must have: without cryptsetup no header can be read. */
const NEEDS: NodeNeed[] = [{
  command: "cryptsetup",
  installedAt: ["/usr/sbin/cryptsetup", "/usr/bin/cryptsetup"],
  missing: "cryptsetup is not installed on this node",
}];

/** A protector of `volume` as the node shows it, when it is in effect as far as the merge goes. */
function judgeProtector(
  kind: ProtectorAsk["kind"],
  volume: Volume,
  state: DiskState,
): [ComplianceStatusName, string] {
  if (kind === "tpm2") {
    if (volume.tpm2Enrolled) {
      return ["COMPLIANT", `TPM2 keyslot present (PCRs ${volume.tpm2Pcrs.join("+") || "unknown"})`];
    }
    return state.haveTpm2
      ? ["NON_COMPLIANT", "no TPM2 keyslot"]
      : ["INAPPLICABLE", "no TPM 2.0 device or systemd-cryptenroll on this node"];
  }
  if (volume.tangEnrolled) return ["COMPLIANT", "Tang (clevis) keyslot present"];
  return state.haveClevis
    ? ["NON_COMPLIANT", "no Tang keyslot"]
    : ["INAPPLICABLE", "clevis is not installed"];
}

/** One policy's items: inventory problems, then per volume its requirements, recovery key and protectors. */
function items(
  { policy, message }: Checked<DiskEncryptionPolicy>,
  plan: DiskPlan,
  state: DiskState,
): ItemResult[] {
  const items: ItemResult[] = state.problems.map((p) => ({
    schemaId: "inventory",
    key: "device",
    status: "ERROR" as const,
    message: p,
  }));
  for (const v of state.volumes) {
    const issues = volumeRequirementIssues(message, v);
    items.push({
      schemaId: v.device,
      key: "requirements",
      status: issues.length ? "NON_COMPLIANT" : "COMPLIANT",
      message: issues.join("; ") ||
        (v.luksVersion ? `LUKS${v.luksVersion} ${v.cipher} ${v.keySizeBits} bits` : "not encrypted"),
    });
    if (v.luksVersion === 0) continue;
    if (message.escrowRecoveryKey) {
      const own = state.state[v.uuid];
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
    items.push(...plan.protectors.itemsOf(policy.id, {
      id: (ask) => ask.kind,
      same: sameProtector,
      applied: protectorSettings,
      item: (ask) => ({ schemaId: v.device, key: ask.kind }),
      judge: (_, ask) => judgeProtector(ask.kind, v, state),
    }));
  }
  if (state.volumes.length === 0) {
    items.push({
      schemaId: "inventory",
      key: "volumes",
      status: "INAPPLICABLE",
      message: "no fixed volumes found",
    });
  }
  return items;
}

/** The DiskEncryption enforcer (read-only; see the module documentation). */
export const diskEncryptionEnforcer: Enforcer = {
  ...desktopEnforcer<DiskEncryptionPolicy, DiskPlan, DiskState>({
    type: DISK_ENCRYPTION_TYPE,
    notifiesUsers: false,
    check: checkDiskEncryption,
    needs: NEEDS,
    // Installing the tools of a protector turns its INAPPLICABLE items into ones judged against the header.
    reads: ["/usr/bin/systemd-cryptenroll", "/usr/bin/clevis"],
    plan: (valid) => Promise.resolve({ files: new Map(), protectors: protectorWinners(valid) }),
    async readBack(io) {
      const { fs, runner } = io;
      const inventory = await collectInventory({
        fs,
        runner,
        devices: io.config.diskEncryption.devices,
        dataDir: io.config.enrollment.dataDir,
      });
      const haveTpm2 = await tpm2Present(fs) && await runner.which("systemd-cryptenroll") !== undefined;
      return { ...inventory, haveTpm2, haveClevis: await runner.which("clevis") !== undefined };
    },
    report(checked, { plan, state }) {
      const all = items(checked, plan, state);
      const bad = all.filter((i) => i.status === "NON_COMPLIANT").length;
      const volumes = () => `${state.volumes.length} volume(s) checked`;
      const otherwise = () => bad ? `${bad} requirement(s) not met` : volumes();
      return { ...summarize(all, { inEffect: volumes, noneApplies: volumes, otherwise }), items: all };
    },
  }),
  // Reading every header can take long on a node with many disks; the engine runs it in its own lane.
  background: true,
};
