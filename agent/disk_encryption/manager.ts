/**
 * The agent's side of disk encryption that talks to the server: it reports the inventory (at connect and when it
 * changes, with or without a DiskEncryption policy), fetches the server's tasks and performs them one at a time:
 * escrows and rotations of recovery keys (escrow.ts, crash-safe step by step) and the TPM2 and Tang protectors
 * the policy in force asks for (protectors.ts, settings merged by priority in merge.ts).
 *
 * This is not in the DiskEncryption enforcer's sync (enforcer.ts, over the desktop skeleton): every task is a
 * series of server round-trips (fetch, escrow, confirm, begin a rotation) the server starts with a targeted
 * command, a crash-safe journal must outlive the sync that would run it, and a failed task stays pending on the
 * server for the next connect, not a compliance result. The daemon drives it; when a task changed a volume it
 * asks for a sync, whose read-back reports the new keyslots.
 *
 * @module
 */
import type { PolicyClient } from "../client.ts";
import { DiskEncryptionTaskKind } from "../gen/svc/policy/v1/policy_pb.ts";
import type { RootFs } from "../fs.ts";
import type { Logger } from "../log.ts";
import type { Runner } from "../runner.ts";
import type { CachedPolicy } from "../sync/types.ts";
import type { PbkdfArgs } from "./cryptsetup.ts";
import { Escrow, type EscrowStep, SimulatedCrash } from "./escrow.ts";
import { collectInventory, type Inventory, type Volume } from "./inventory.ts";
import { protectorsInForce } from "./merge.ts";
import { bindTang, enrollTpm2, tpm2Present } from "./protectors.ts";
import { inventoryReport } from "./report.ts";
import { readVolumeState, type VolumeState } from "./state.ts";

export { ESCROW_STEPS, type EscrowStep, SimulatedCrash } from "./escrow.ts";
export { DISK_ENCRYPTION_TYPE } from "./merge.ts";

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
  /** The cached policies (the sync engine's); the DiskEncryption ones in force configure protectors. */
  policies?: () => readonly CachedPolicy[];
  /** Called after tasks changed a volume (a key escrowed or rotated, a protector added): compliance may differ. */
  onTasksDone?: () => void;
  /** TPM for TPM2 protectors: `auto`, a device path or a TCTI (`swtpm:port=2321`); default `auto`. */
  tpm2Device?: string;
}

/** See the module documentation. */
export class DiskEncryptionManager {
  readonly #o: DiskEncryptionOptions;
  readonly #escrow: Escrow;
  #queue: Promise<unknown> = Promise.resolve();
  #lastReport = "";

  constructor(options: DiskEncryptionOptions) {
    this.#o = options;
    this.#escrow = new Escrow({ ...options, deadline: () => this.#deadline() });
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

  /** The confirmed recovery key and slot per LUKS UUID. */
  async state(): Promise<Record<string, VolumeState>> {
    return await readVolumeState(this.#o.dataDir);
  }

  /** The current inventory. */
  async inventory(): Promise<Inventory> {
    const { fs, runner, devices, dataDir } = this.#o;
    return await collectInventory({ fs, runner, devices, dataDir });
  }

  async #request() {
    const inventory = await this.inventory();
    for (const p of inventory.problems) {
      this.#o.logger.warn("disk encryption: volume skipped", { problem: p });
    }
    const tpm2Available = (this.#o.tpm2Device ?? "auto") !== "auto" || await tpm2Present(this.#o.fs);
    return inventoryReport(inventory, { clientId: this.#o.clientId, tpm2Available });
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

  /** Completes or drops the escrows a crash interrupted (escrow.ts). */
  recover(client: PolicyClient): Promise<void> {
    return this.#serial(() => this.#escrow.recover(client));
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
            await this.#escrow.escrow(client, volume, { taskId: task.id, rotationId: "" });
          } else if (task.kind === DiskEncryptionTaskKind.ROTATE) {
            const begun = await client.beginRecoveryKeyRotation({
              clientId: this.#o.clientId,
              volumeUuid: volume.uuid,
              taskId: task.id,
            }, this.#deadline());
            await this.#escrow.escrow(client, volume, { taskId: task.id, rotationId: begun.rotationId });
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

  /** Adds the TPM2 or Tang protector the policies in force ask for; false when there is nothing to do. */
  async #protector(volume: Volume, kind: DiskEncryptionTaskKind): Promise<boolean> {
    const asks = protectorsInForce(this.#o.policies?.() ?? [], this.#o.logger);
    const unlockKeyFile = await this.#escrow.unlockKeyFile(volume.uuid);
    if (kind === DiskEncryptionTaskKind.ENROLL_TPM2) {
      const ask = asks.winner("tpm2");
      if (ask?.kind !== "tpm2" || volume.tpm2Enrolled) return false;
      await enrollTpm2(this.#o.runner, volume.hostPath, {
        tpm2: ask.tpm2,
        tpm2Device: this.#o.tpm2Device ?? "auto",
        unlockKeyFile,
      });
      return true;
    }
    const ask = asks.winner("tang");
    if (ask?.kind !== "tang" || volume.tangEnrolled) return false;
    await bindTang(this.#o.runner, volume.hostPath, { tang: ask.tang, unlockKeyFile });
    return true;
  }
}
