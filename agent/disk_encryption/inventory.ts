/**
 * The node's volumes as the disk-encryption report describes them: every LUKS volume (header facts,
 * keyslots and what each one is: passphrase, svc recovery key, TPM2, Tang, FIDO2, PKCS#11) and every
 * unencrypted fixed volume. Devices come from `lsblk -J` (fixed disks only, lsblk.ts) or, when
 * `disk_encryption.devices` is set, from that list (tests point it at image files). An agent confined to another
 * root than `/` discovers nothing: the host's disks are not its node's.
 *
 * @module
 */
import type { VolumeFacts } from "../../shared/disk_encryption_volume.ts";
import type { RootFs } from "../fs.ts";
import type { Runner } from "../runner.ts";
import { type LuksHeader, readHeader } from "./cryptsetup.ts";
import { devicesFromLsblk, LSBLK_COLUMNS, type Placement } from "./lsblk.ts";
import { managedSlots, readVolumeState, type VolumeState } from "./state.ts";

export { devicesFromLsblk, type LsblkDevice } from "./lsblk.ts";

/** A slot kind as the report names it. */
export type SlotKind = "passphrase" | "recovery" | "tpm2" | "tang" | "fido2" | "pkcs11";

/** One volume of the inventory. */
export interface Volume extends VolumeFacts {
  /** Host path cryptsetup works on (the node path under the agent's root). */
  hostPath: string;
  slots: { slot: number; kind: SlotKind; managed: boolean }[];
}

function decodeSegment(segment: string): Record<string, unknown> | undefined {
  try {
    const b64 = segment.replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4)));
  } catch {
    return undefined;
  }
}

/** The clevis pins of a clevis token (`tang`, `tpm2`, or those inside `sss`). */
function clevisPins(raw: Record<string, unknown>): string[] {
  const jwe = raw.jwe as { protected?: string } | undefined;
  const header = jwe?.protected ? decodeSegment(jwe.protected) : undefined;
  const clevis = header?.clevis as { pin?: string; sss?: { jwe?: string[] } } | undefined;
  if (!clevis?.pin) return [];
  if (clevis.pin !== "sss") return [clevis.pin];
  return (clevis.sss?.jwe ?? []).flatMap((compact) => {
    const inner = decodeSegment(compact.split(".")[0] ?? "");
    const pin = (inner?.clevis as { pin?: string } | undefined)?.pin;
    return pin ? [pin] : [];
  });
}

/** Slot kinds from the header's tokens, with the agent's own recovery slot marked managed. */
export function describeSlots(
  header: LuksHeader,
  managedSlot: number | undefined,
): Pick<Volume, "slots" | "tpm2Enrolled" | "tpm2Pcrs" | "tangEnrolled"> {
  const kinds = new Map<number, SlotKind>();
  let tpm2Pcrs: number[] = [];
  for (const token of header.tokens) {
    let kind: SlotKind | undefined;
    if (token.type === "systemd-tpm2") {
      kind = "tpm2";
      const pcrs = token.raw["tpm2-pcrs"];
      if (Array.isArray(pcrs)) tpm2Pcrs = pcrs.map(Number).filter((n) => Number.isInteger(n));
    } else if (token.type === "systemd-recovery") kind = "recovery";
    else if (token.type === "systemd-fido2") kind = "fido2";
    else if (token.type === "systemd-pkcs11") kind = "pkcs11";
    else if (token.type === "clevis") {
      const pins = clevisPins(token.raw);
      kind = pins.includes("tang") ? "tang" : pins.includes("tpm2") ? "tpm2" : undefined;
    }
    if (kind) token.keyslots.forEach((s) => kinds.set(s, kind!));
  }
  const slots = header.slots.map((slot) => ({
    slot,
    kind: slot === managedSlot ? "recovery" as const : kinds.get(slot) ?? "passphrase" as const,
    managed: slot === managedSlot,
  }));
  return {
    slots,
    tpm2Enrolled: slots.some((s) => s.kind === "tpm2"),
    tpm2Pcrs,
    tangEnrolled: slots.some((s) => s.kind === "tang"),
  };
}

/** Options of {@link collectInventory}. */
export interface InventoryOptions {
  fs: RootFs;
  runner: Runner;
  /** Node paths to look at; empty: discover with lsblk. */
  devices: readonly string[];
  /** The agent's data directory (host path), whose escrow state names svc's recovery slot per volume. */
  dataDir: string;
}

/** What {@link collectInventory} found, with the escrow state it marked svc's recovery slots from. */
export interface Inventory {
  volumes: Volume[];
  /** A device whose header cannot be read is left out and named here. */
  problems: string[];
  state: Record<string, VolumeState>;
}

/** Reads the inventory; see the module documentation. */
export async function collectInventory(options: InventoryOptions): Promise<Inventory> {
  const { fs, runner } = options;
  const state = await readVolumeState(options.dataDir);
  const ownSlots = managedSlots(state);
  const problems: string[] = [];
  const candidates: { device: string; placement?: Placement; plain?: boolean }[] = [];
  if (options.devices.length > 0) {
    candidates.push(...options.devices.map((device) => ({ device })));
  } else if (fs.root === "/") {
    const r = await runner.run("lsblk", ["-J", "-l", "-p", "-o", LSBLK_COLUMNS]);
    if (!r.success) throw new Error(`lsblk failed: ${r.stderr.trim() || `exit code ${r.code}`}`);
    const found = devicesFromLsblk(JSON.parse(r.stdout));
    for (const [device, placement] of found.luks) candidates.push({ device, placement });
    for (const p of found.plain) {
      candidates.push({ device: p.device, placement: { mapperName: "", ...p }, plain: true });
    }
  }
  const volumes: Volume[] = [];
  for (const c of candidates) {
    const hostPath = await fs.resolve(c.device);
    const placement = c.placement ?? { mapperName: "", mountPoint: "", root: false };
    const plainVolume = {
      device: c.device,
      hostPath,
      uuid: "",
      ...placement,
      luksVersion: 0,
      cipher: "",
      keySizeBits: 0,
      pbkdf: "",
      slots: [],
      tpm2Enrolled: false,
      tpm2Pcrs: [],
      tangEnrolled: false,
    };
    if (c.plain) {
      volumes.push(plainVolume);
      continue;
    }
    const probe = await runner.run("cryptsetup", ["isLuks", hostPath], { env: { LC_ALL: "C" } });
    if (probe.notFound) {
      problems.push(`${c.device}: cryptsetup is not installed`);
      continue;
    }
    if (probe.code !== 0) {
      volumes.push(plainVolume);
      continue;
    }
    try {
      const header = await readHeader(runner, hostPath);
      volumes.push({
        device: c.device,
        hostPath,
        uuid: header.uuid.toLowerCase(),
        ...placement,
        luksVersion: header.version,
        cipher: header.cipher,
        keySizeBits: header.keySizeBits,
        pbkdf: header.pbkdf,
        ...describeSlots(header, ownSlots.get(header.uuid.toLowerCase())),
      });
    } catch (err) {
      problems.push(`${c.device}: ${(err as Error).message}`);
    }
  }
  return { volumes, problems, state };
}
