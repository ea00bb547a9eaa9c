/**
 * What the escrow keeps under `<data dir>/disk-encryption/`, each file 0600 in a 0700 directory and written
 * atomically: `state.json` names the confirmed recovery key and its keyslot per LUKS UUID (the enforcer reads it
 * to tell svc's recovery slot from the others), `journal.json` the escrows under way (escrow.ts).
 *
 * @module
 */
import { join } from "node:path";
import { readFileIfExists, writeFileAtomic } from "../fs.ts";

/** The recovery key escrowed and confirmed for one LUKS volume. */
export interface VolumeState {
  keyId: string;
  slot: number;
}

/** The folder of the escrow's files under the agent's data directory (host path). */
export function escrowDir(dataDir: string): string {
  return join(dataDir, "disk-encryption");
}

/** The JSON object in `name` of the escrow folder; empty when the file does not exist yet. */
export async function readEscrowFile<T>(dataDir: string, name: string): Promise<Record<string, T>> {
  const bytes = await readFileIfExists(join(escrowDir(dataDir), name));
  return bytes ? JSON.parse(new TextDecoder().decode(bytes)) : {};
}

/** Writes `value` as the JSON of `name` in the escrow folder (0600, atomically). */
export async function writeEscrowFile(dataDir: string, name: string, value: unknown): Promise<void> {
  await writeFileAtomic(join(escrowDir(dataDir), name), JSON.stringify(value, null, 2) + "\n", {
    mode: 0o600,
    dirMode: 0o700,
  });
}

/** The confirmed recovery key and slot per LUKS UUID. */
export function readVolumeState(dataDir: string): Promise<Record<string, VolumeState>> {
  return readEscrowFile<VolumeState>(dataDir, "state.json");
}

/** svc's recovery keyslot per LUKS UUID, as the inventory marks it managed. */
export function managedSlots(state: Record<string, VolumeState>): Map<string, number> {
  return new Map(Object.entries(state).map(([uuid, s]) => [uuid, s.slot]));
}
