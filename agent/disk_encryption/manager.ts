/**
 * The agent's side of recovery-key escrow: reports the inventory (at connect and when it changes), fetches
 * and performs the server's tasks, and writes recovery keys to LUKS keyslots in an order that survives a
 * crash at any point.
 *
 * One escrow, step by step, each step recorded in a journal (`<data dir>/disk-encryption/journal.json`,
 * 0600, written atomically) before the next begins:
 *
 *   generated  a new key exists only in the journal
 *   escrowed   the server acknowledged it (key id); only now may it enter the header
 *   slotted    the key is in keyslot N (added with the unlock secret from `disk_encryption.unlock_key_dir`)
 *   replaced   the previous recovery keyslot is destroyed (rotations, or a key the server lost)
 *   (done)     ConfirmRecoveryKey answered; the state file names the key and its slot, the journal entry goes
 *
 * Recovery at start: `generated` is dropped (the key never reached the header; the server may hold an
 * unconfirmed copy, which it abandons later); from `escrowed` on, the step is redone or completed, checking
 * the header first (a key already in a slot is found with --test-passphrase, a slot already destroyed is
 * not destroyed twice). So a keyslot always holds either the unlock secret or a key the server holds, and
 * the journal holding the key in clear text lives only until the confirm.
 *
 * @module
 */
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import {
  DiskEncryptionTaskKind,
  LuksKeySlotKind,
  type ReportDiskEncryptionStateRequest,
} from "../gen/svc/policy/v1/policy_pb.ts";
import type { PolicyClient } from "../client.ts";
import { readFileIfExists, type RootFs, writeFileAtomic } from "../fs.ts";
import type { Logger } from "../log.ts";
import type { Runner } from "../runner.ts";
import { addKey, killSlot, type PbkdfArgs, readHeader, slotOpenedBy } from "./cryptsetup.ts";
import { collectInventory, type SlotKind, type Volume } from "./inventory.ts";
import { generateRecoveryKey } from "./recovery_key.ts";
import { bindTang, enrollTpm2 } from "./protectors.ts";
import { type CachedPolicy, sortPolicies } from "../sync/types.ts";
import { type DiskEncryptionPolicy } from "../../shared/gen/svc/policy/v1/disk_encryption_pb.ts";
import { diskEncryptionType } from "../../shared/policy_types/disk_encryption.ts";
import { parsePolicyContent } from "../sync/content.ts";

/** The wire name of the type this manager serves (the daemon asks whether the node has such policies). */
export const DISK_ENCRYPTION_TYPE: string = diskEncryptionType.wireName;

/** Steps of one escrow, in order. */
export const ESCROW_STEPS = ["generated", "escrowed", "slotted", "replaced", "confirmed"] as const;
/** A step of {@link ESCROW_STEPS}. */
export type EscrowStep = (typeof ESCROW_STEPS)[number];

interface JournalEntry {
  uuid: string;
  device: string;
  step: EscrowStep;
  key: string;
  taskId: string;
  rotationId: string;
  keyId?: string;
  slot?: number;
  /** The recovery keyslot this key replaces. */
  oldSlot?: number;
}

interface VolumeState {
  keyId: string;
  slot: number;
}

/** Options of {@link DiskEncryptionManager}. */
export interface DiskEncryptionOptions {
  fs: RootFs;
  runner: Runner;
  logger: Logger;
  /** The agent's data directory (host path). */
  dataDir: string;
  clientId: string;
  /** Node paths to inventory; empty: lsblk discovery. */
  devices: readonly string[];
  /** Node path of the directory with `<LUKS UUID>.key` unlock secrets. */
  unlockKeyDir: string;
  /** PBKDF arguments for new keyslots; default argon2id with cryptsetup's benchmarked cost. */
  pbkdf?: PbkdfArgs;
  /** Called after each completed step (tests interrupt here to simulate a crash). */
  afterStep?: (step: EscrowStep, uuid: string) => void | Promise<void>;
  /** Deadline per call in milliseconds; default 30 s. */
  callTimeoutMs?: number;
  /** The cached policies (the sync engine's); the DiskEncryption one in force configures protectors. */
  policies?: () => readonly CachedPolicy[];
  /** Called after tasks changed a volume (a key escrowed or rotated, a protector added): compliance may differ. */
  onTasksDone?: () => void;
  /** TPM for TPM2 protectors: `auto`, a device path or a TCTI (`swtpm:port=2321`); default `auto`. */
  tpm2Device?: string;
}

/** The DiskEncryption policy in force: highest priority, then lowest id (the agent's merge order). */
function effectivePolicy(policies: readonly CachedPolicy[]): DiskEncryptionPolicy | undefined {
  const [top] = sortPolicies(policies.filter((p) => p.type === DISK_ENCRYPTION_TYPE));
  if (!top) return undefined;
  return parsePolicyContent(top, diskEncryptionType);
}

const KIND: Record<SlotKind, LuksKeySlotKind> = {
  passphrase: LuksKeySlotKind.PASSPHRASE,
  recovery: LuksKeySlotKind.RECOVERY_KEY,
  tpm2: LuksKeySlotKind.TPM2,
  tang: LuksKeySlotKind.TANG,
  fido2: LuksKeySlotKind.FIDO2,
  pkcs11: LuksKeySlotKind.PKCS11,
};

/** See the module documentation. */
export class DiskEncryptionManager {
  readonly #o: DiskEncryptionOptions;
  readonly #dir: string;
  #queue: Promise<unknown> = Promise.resolve();
  #lastReport = "";

  constructor(options: DiskEncryptionOptions) {
    this.#o = options;
    this.#dir = join(options.dataDir, "disk-encryption");
  }

  /** Runs `fn` after everything queued before it: one disk operation at a time. */
  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(fn, fn);
    this.#queue = next.catch(() => {});
    return next;
  }

  #deadline() {
    return { deadline: Date.now() + (this.#o.callTimeoutMs ?? 30_000) };
  }

  async #readJson<T>(name: string): Promise<Record<string, T>> {
    const bytes = await readFileIfExists(join(this.#dir, name));
    return bytes ? JSON.parse(new TextDecoder().decode(bytes)) : {};
  }

  async #writeJson(name: string, value: unknown): Promise<void> {
    await writeFileAtomic(join(this.#dir, name), JSON.stringify(value, null, 2) + "\n", {
      mode: 0o600,
      dirMode: 0o700,
    });
  }

  async #journal(entry: JournalEntry | { uuid: string; remove: true }): Promise<void> {
    const all = await this.#readJson<JournalEntry>("journal.json");
    if ("remove" in entry) delete all[entry.uuid];
    else all[entry.uuid] = entry;
    await this.#writeJson("journal.json", all);
  }

  /** The confirmed recovery key and slot per LUKS UUID. */
  async state(): Promise<Record<string, VolumeState>> {
    return await this.#readJson<VolumeState>("state.json");
  }

  /** The current inventory. */
  async inventory(): Promise<{ volumes: Volume[]; problems: string[] }> {
    const state = await this.state();
    return await collectInventory({
      fs: this.#o.fs,
      runner: this.#o.runner,
      devices: this.#o.devices,
      managedSlots: new Map(Object.entries(state).map(([uuid, s]) => [uuid, s.slot])),
    });
  }

  async #request(): Promise<ReportDiskEncryptionStateRequest> {
    const state = await this.state();
    const { volumes, problems } = await this.inventory();
    for (const p of problems) this.#o.logger.warn("disk encryption: volume skipped", { problem: p });
    const tpm2 = await this.#o.fs.readFile("/sys/class/tpm/tpm0/tpm_version_major");
    return {
      $typeName: "svc.policy.v1.ReportDiskEncryptionStateRequest",
      clientId: this.#o.clientId,
      tpm2Available: (this.#o.tpm2Device ?? "auto") !== "auto" ||
        (tpm2 !== undefined && new TextDecoder().decode(tpm2).trim() === "2"),
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

  /** Sends the inventory; with `onlyIfChanged`, only when it differs from the last one sent. */
  report(client: PolicyClient, options: { onlyIfChanged?: boolean } = {}): Promise<boolean> {
    return this.#serial(async () => {
      const request = await this.#request();
      const text = JSON.stringify(request);
      if (options.onlyIfChanged && text === this.#lastReport) return false;
      await client.reportDiskEncryptionState(request, this.#deadline());
      this.#lastReport = text;
      return true;
    });
  }

  /** What a connect does: finish interrupted escrows, report, then perform pending tasks. */
  async connected(client: PolicyClient): Promise<void> {
    await this.recover(client);
    this.#lastReport = "";
    await this.report(client);
    await this.runTasks(client);
  }

  /** Completes or drops the escrows a crash interrupted (see the module documentation). */
  recover(client: PolicyClient): Promise<void> {
    return this.#serial(async () => {
      const journal = await this.#readJson<JournalEntry>("journal.json");
      for (const entry of Object.values(journal)) {
        if (entry.step === "generated") {
          this.#o.logger.info("disk encryption: dropping an escrow that never reached the header", {
            volume: entry.uuid,
          });
          await this.#journal({ uuid: entry.uuid, remove: true });
          continue;
        }
        this.#o.logger.info("disk encryption: completing an interrupted escrow", {
          volume: entry.uuid,
          step: entry.step,
        });
        await this.#continue(client, entry);
      }
    });
  }

  /** Fetches the pending tasks and performs them; a failed task is logged and left for the next time. */
  runTasks(client: PolicyClient): Promise<boolean> {
    return this.#serial(async () => {
      const { tasks } = await client.getDiskEncryptionTasks({ clientId: this.#o.clientId }, this.#deadline());
      let changed = false;
      for (const task of tasks) {
        const volume = (await this.inventory()).volumes.find((v) => v.uuid === task.volumeUuid.toLowerCase());
        try {
          if (!volume) throw new Error(`volume ${task.volumeUuid} is not in this node's inventory`);
          if (task.kind === DiskEncryptionTaskKind.ESCROW) {
            await this.#escrow(client, volume, { taskId: task.id, rotationId: "" });
          } else if (task.kind === DiskEncryptionTaskKind.ROTATE) {
            const begun = await client.beginRecoveryKeyRotation({
              clientId: this.#o.clientId,
              volumeUuid: volume.uuid,
              taskId: task.id,
            }, this.#deadline());
            await this.#escrow(client, volume, { taskId: task.id, rotationId: begun.rotationId });
          } else if (
            task.kind === DiskEncryptionTaskKind.ENROLL_TPM2 ||
            task.kind === DiskEncryptionTaskKind.ENROLL_TANG
          ) {
            if (!await this.#protector(volume, task.kind)) continue;
          } else {
            this.#o.logger.info("disk encryption: task kind not performed by this agent", {
              kind: task.kind,
            });
            continue;
          }
          changed = true;
          this.#o.logger.info("disk encryption: task done", { task: task.id, reason: task.reason });
        } catch (err) {
          if (err instanceof SimulatedCrash) throw err;
          this.#o.logger.warn("disk encryption: task failed; it stays pending", {
            task: task.id,
            volume: task.volumeUuid,
            error: err instanceof Error ? err.message : String(err),
          });
        }
      }
      if (changed) {
        const request = await this.#request();
        await client.reportDiskEncryptionState(request, this.#deadline());
        this.#lastReport = JSON.stringify(request);
        this.#o.onTasksDone?.();
      }
      return changed;
    });
  }

  /** Adds the TPM2 or Tang protector the policy in force asks for; false when there is nothing to do. */
  async #protector(volume: Volume, kind: DiskEncryptionTaskKind): Promise<boolean> {
    const policy = effectivePolicy(this.#o.policies?.() ?? []);
    const unlockKeyFile = await this.#unlockKeyFile(volume.uuid);
    if (kind === DiskEncryptionTaskKind.ENROLL_TPM2) {
      if (!policy?.tpm2?.enroll || volume.tpm2Enrolled) return false;
      await enrollTpm2(this.#o.runner, volume.hostPath, {
        tpm2: policy.tpm2,
        tpm2Device: this.#o.tpm2Device ?? "auto",
        unlockKeyFile,
      });
      return true;
    }
    if (!policy?.tang?.servers.length || volume.tangEnrolled) return false;
    await bindTang(this.#o.runner, volume.hostPath, { tang: policy.tang, unlockKeyFile });
    return true;
  }

  /** Host path of the volume's unlock secret; refused when missing or readable by others. */
  async #unlockKeyFile(uuid: string): Promise<string> {
    const node = `${this.#o.unlockKeyDir.replace(/\/$/, "")}/${uuid}.key`;
    const host = await this.#o.fs.resolve(node);
    let info: Deno.FileInfo;
    try {
      info = await Deno.stat(host);
    } catch {
      throw new Error(
        `no unlock secret for volume ${uuid}: put a key file that opens it at ${node} (mode 0600) so the agent can add a recovery key`,
      );
    }
    if (info.mode !== null && (info.mode & 0o077) !== 0) {
      throw new Error(`unlock secret ${node} is readable by group or others; run: chmod 600 ${node}`);
    }
    return host;
  }

  async #step(entry: JournalEntry, step: EscrowStep): Promise<void> {
    entry.step = step;
    if (step === "confirmed") {
      const state = await this.state();
      state[entry.uuid] = { keyId: entry.keyId!, slot: entry.slot! };
      await this.#writeJson("state.json", state);
      await this.#journal({ uuid: entry.uuid, remove: true });
    } else {
      await this.#journal(entry);
    }
    await this.#o.afterStep?.(step, entry.uuid);
  }

  async #escrow(
    client: PolicyClient,
    volume: Volume,
    ids: { taskId: string; rotationId: string },
  ): Promise<void> {
    await this.#unlockKeyFile(volume.uuid);
    const previous = (await this.state())[volume.uuid];
    const entry: JournalEntry = {
      uuid: volume.uuid,
      device: volume.device,
      step: "generated",
      key: generateRecoveryKey(),
      taskId: ids.taskId,
      rotationId: ids.rotationId,
      ...(previous && volume.slots.some((s) => s.slot === previous.slot) ? { oldSlot: previous.slot } : {}),
    };
    await this.#step(entry, "generated");
    const { keyId } = await client.escrowRecoveryKey({
      clientId: this.#o.clientId,
      volumeUuid: volume.uuid,
      recoveryKey: entry.key,
      taskId: ids.taskId,
      rotationId: ids.rotationId,
    }, this.#deadline());
    entry.keyId = keyId;
    await this.#step(entry, "escrowed");
    await this.#continue(client, entry);
  }

  /** Runs the remaining steps of an escrow whose key the server holds. */
  async #continue(client: PolicyClient, entry: JournalEntry): Promise<void> {
    const host = await this.#o.fs.resolve(entry.device);
    const authKeyFile = await this.#unlockKeyFile(entry.uuid);
    if (entry.step === "escrowed") {
      const slot = await slotOpenedBy(this.#o.runner, host, entry.key) ??
        await addKey(this.#o.runner, host, { authKeyFile, newKey: entry.key, pbkdf: this.#o.pbkdf ?? [] });
      entry.slot = slot;
      await this.#step(entry, "slotted");
    }
    if (entry.step === "slotted") {
      if (entry.oldSlot !== undefined && entry.oldSlot !== entry.slot) {
        const header = await readHeader(this.#o.runner, host);
        const unlockSlot = await slotOpenedBy(
          this.#o.runner,
          host,
          new TextDecoder().decode(await Deno.readFile(authKeyFile)),
        );
        if (header.slots.includes(entry.oldSlot) && unlockSlot !== entry.oldSlot) {
          await killSlot(this.#o.runner, host, { slot: entry.oldSlot, authKeyFile });
        }
      }
      await this.#step(entry, "replaced");
    }
    if (entry.step === "replaced") {
      try {
        await client.confirmRecoveryKey({
          clientId: this.#o.clientId,
          keyId: entry.keyId!,
          keySlot: entry.slot!,
        }, this.#deadline());
      } catch (err) {
        // Not answered (server away): the journal keeps the entry and the next connect confirms.
        if (!(err instanceof GrpcError) || err.code !== grpc.status.FAILED_PRECONDITION) throw err;
        this.#o.logger.warn("disk encryption: the server refused the confirmation", { error: err.message });
      }
      await this.#step(entry, "confirmed");
    }
  }
}

/** Thrown by tests' `afterStep` to stop an escrow where a crash would. */
export class SimulatedCrash extends Error {
  constructor(step: string) {
    super(`simulated crash after ${step}`);
    this.name = "SimulatedCrash";
  }
}
