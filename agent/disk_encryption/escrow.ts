/**
 * One recovery-key escrow, from a new key to a confirmed keyslot, in an order that survives a crash at any point.
 * Each step is recorded in a journal (`<data dir>/disk-encryption/journal.json`, state.ts) before the next
 * begins:
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
import * as grpc from "@grpc/grpc-js";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import type { PolicyClient } from "../client.ts";
import type { RootFs } from "../fs.ts";
import type { Logger } from "../log.ts";
import type { Runner } from "../runner.ts";
import { addKey, killSlot, type PbkdfArgs, readHeader, slotOpenedBy } from "./cryptsetup.ts";
import type { Volume } from "./inventory.ts";
import { generateRecoveryKey } from "./recovery_key.ts";
import { readEscrowFile, readVolumeState, writeEscrowFile } from "./state.ts";

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

/** What an {@link Escrow} works with. */
export interface EscrowOptions {
  fs: RootFs;
  runner: Runner;
  logger: Logger;
  /** The agent's data directory (host path). */
  dataDir: string;
  clientId: string;
  /** Node path of the directory with `<LUKS UUID>.key` unlock secrets. */
  unlockKeyDir: string;
  /** PBKDF arguments for new keyslots; default argon2id with cryptsetup's benchmarked cost. */
  pbkdf?: PbkdfArgs;
  /** Called after each completed step (tests interrupt here to simulate a crash). */
  afterStep?: (step: EscrowStep, uuid: string) => void | Promise<void>;
  /** The deadline of one server call. */
  deadline(): { deadline: number };
}

/** Escrows recovery keys step by step; see the module documentation. */
export class Escrow {
  readonly #o: EscrowOptions;

  constructor(options: EscrowOptions) {
    this.#o = options;
  }

  /** Completes or drops the escrows a crash interrupted (see the module documentation). */
  async recover(client: PolicyClient): Promise<void> {
    const journal = await readEscrowFile<JournalEntry>(this.#o.dataDir, "journal.json");
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
  }

  /** Escrows a new recovery key for `volume` (a rotation when `rotationId` is set), replacing svc's previous one. */
  async escrow(
    client: PolicyClient,
    volume: Volume,
    ids: { taskId: string; rotationId: string },
  ): Promise<void> {
    await this.unlockKeyFile(volume.uuid);
    const previous = (await readVolumeState(this.#o.dataDir))[volume.uuid];
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
    }, this.#o.deadline());
    entry.keyId = keyId;
    await this.#step(entry, "escrowed");
    await this.#continue(client, entry);
  }

  /** Host path of the volume's unlock secret; refused when missing or readable by others. */
  async unlockKeyFile(uuid: string): Promise<string> {
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

  async #journal(entry: JournalEntry | { uuid: string; remove: true }): Promise<void> {
    const all = await readEscrowFile<JournalEntry>(this.#o.dataDir, "journal.json");
    if ("remove" in entry) delete all[entry.uuid];
    else all[entry.uuid] = entry;
    await writeEscrowFile(this.#o.dataDir, "journal.json", all);
  }

  async #step(entry: JournalEntry, step: EscrowStep): Promise<void> {
    entry.step = step;
    if (step === "confirmed") {
      const state = await readVolumeState(this.#o.dataDir);
      state[entry.uuid] = { keyId: entry.keyId!, slot: entry.slot! };
      await writeEscrowFile(this.#o.dataDir, "state.json", state);
      await this.#journal({ uuid: entry.uuid, remove: true });
    } else {
      await this.#journal(entry);
    }
    await this.#o.afterStep?.(step, entry.uuid);
  }

  /** Runs the remaining steps of an escrow whose key the server holds. */
  async #continue(client: PolicyClient, entry: JournalEntry): Promise<void> {
    const { runner } = this.#o;
    const host = await this.#o.fs.resolve(entry.device);
    const authKeyFile = await this.unlockKeyFile(entry.uuid);
    if (entry.step === "escrowed") {
      const slot = await slotOpenedBy(runner, host, entry.key) ??
        await addKey(runner, host, { authKeyFile, newKey: entry.key, pbkdf: this.#o.pbkdf ?? [] });
      entry.slot = slot;
      await this.#step(entry, "slotted");
    }
    if (entry.step === "slotted") {
      if (entry.oldSlot !== undefined && entry.oldSlot !== entry.slot) {
        const header = await readHeader(runner, host);
        const unlock = new TextDecoder().decode(await Deno.readFile(authKeyFile));
        const unlockSlot = await slotOpenedBy(runner, host, unlock);
        if (header.slots.includes(entry.oldSlot) && unlockSlot !== entry.oldSlot) {
          await killSlot(runner, host, { slot: entry.oldSlot, authKeyFile });
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
        }, this.#o.deadline());
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
