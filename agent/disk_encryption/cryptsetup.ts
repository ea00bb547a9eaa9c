/**
 * The LUKS operations the agent needs, each one real `cryptsetup` call through the agent's runner. Secrets
 * never appear in an argument vector: an existing secret is a key file (0600, in a private directory) and a
 * new key travels on stdin. Devices are host paths (already resolved under the agent's root).
 *
 * @module
 */
import type { Runner } from "../runner.ts";

/** A failed cryptsetup call; the message carries cryptsetup's own words. */
export class CryptsetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CryptsetupError";
  }
}

/** What a LUKS header says about a volume. */
export interface LuksHeader {
  version: 1 | 2;
  uuid: string;
  cipher: string;
  keySizeBits: number;
  pbkdf: string;
  /** Keyslot numbers in use. */
  slots: number[];
  /** LUKS2 tokens: type and the keyslots they use (systemd-tpm2, clevis, systemd-recovery, …). */
  tokens: { type: string; keyslots: number[]; raw: Record<string, unknown> }[];
}

const CRYPTSETUP = "cryptsetup";
const TIMEOUT_MS = 120_000;

/** PBKDF settings for keyslots the agent writes; tests pass a fast pbkdf2 to keep image work quick. */
export type PbkdfArgs = readonly string[];

async function call(runner: Runner, args: string[], stdin?: string) {
  const r = await runner.run(CRYPTSETUP, args, { timeoutMs: TIMEOUT_MS, stdin, env: { LC_ALL: "C" } });
  if (r.notFound) throw new CryptsetupError("cryptsetup is not installed");
  return r;
}

function failure(what: string, r: { stderr: string; code: number }): CryptsetupError {
  return new CryptsetupError(`${what}: ${r.stderr.trim().split("\n").at(-1) || `exit code ${r.code}`}`);
}

/** True when `device` carries a LUKS header. */
export async function isLuks(runner: Runner, device: string): Promise<boolean> {
  return (await call(runner, ["isLuks", device])).code === 0;
}

/** Reads the header: JSON metadata for LUKS2, the text dump for LUKS1. */
export async function readHeader(runner: Runner, device: string): Promise<LuksHeader> {
  const text = await call(runner, ["luksDump", device]);
  if (text.code !== 0) throw failure(`cryptsetup luksDump ${device}`, text);
  const version = Number(/^Version:\s*(\d+)/m.exec(text.stdout)?.[1]);
  const uuid = /^UUID:\s*(\S+)/m.exec(text.stdout)?.[1] ?? "";
  if (version === 1) {
    const name = /^Cipher name:\s*(\S+)/m.exec(text.stdout)?.[1] ?? "";
    const mode = /^Cipher mode:\s*(\S+)/m.exec(text.stdout)?.[1] ?? "";
    return {
      version: 1,
      uuid,
      cipher: name && mode ? `${name}-${mode}` : name,
      keySizeBits: Number(/^MK bits:\s*(\d+)/m.exec(text.stdout)?.[1] ?? 0),
      pbkdf: "pbkdf2",
      slots: [...text.stdout.matchAll(/^Key Slot (\d+): ENABLED/gm)].map((m) => Number(m[1])),
      tokens: [],
    };
  }
  if (version !== 2) throw new CryptsetupError(`${device}: unknown LUKS version in luksDump output`);
  const json = await call(runner, ["luksDump", "--dump-json-metadata", device]);
  if (json.code !== 0) throw failure(`cryptsetup luksDump --dump-json-metadata ${device}`, json);
  const meta = JSON.parse(json.stdout) as {
    keyslots: Record<string, { type?: string; key_size?: number; kdf?: { type?: string } }>;
    tokens: Record<string, { type?: string; keyslots?: string[] }>;
    segments: Record<string, { encryption?: string }>;
  };
  const slots = Object.keys(meta.keyslots).map(Number).sort((a, b) => a - b);
  const first = slots.length ? meta.keyslots[String(slots[0])] : undefined;
  const segment = meta.segments["0"] ?? Object.values(meta.segments)[0];
  return {
    version: 2,
    uuid,
    cipher: segment?.encryption ?? "",
    keySizeBits: (first?.key_size ?? 0) * 8,
    pbkdf: first?.kdf?.type ?? "",
    slots,
    tokens: Object.values(meta.tokens).map((t) => ({
      type: String(t.type ?? ""),
      keyslots: (t.keyslots ?? []).map(Number),
      raw: t as Record<string, unknown>,
    })),
  };
}

/** The keyslot `key` opens, or undefined when it opens none. */
export async function slotOpenedBy(runner: Runner, device: string, key: string): Promise<number | undefined> {
  const r = await call(runner, ["open", "--test-passphrase", "-v", "--key-file=-", device], key);
  if (r.code !== 0) return undefined;
  const m = /Key slot (\d+) unlocked/.exec(r.stdout + r.stderr);
  return m ? Number(m[1]) : undefined;
}

/** Adds `newKey` in a new keyslot, authorised by the key in `authKeyFile`; returns the new slot. */
export async function addKey(
  runner: Runner,
  device: string,
  options: { authKeyFile: string; newKey: string; pbkdf: PbkdfArgs },
): Promise<number> {
  const r = await call(
    runner,
    ["luksAddKey", ...options.pbkdf, "--key-file", options.authKeyFile, device],
    options.newKey,
  );
  if (r.code !== 0) throw failure(`cryptsetup luksAddKey ${device}`, r);
  const slot = await slotOpenedBy(runner, device, options.newKey);
  if (slot === undefined) throw new CryptsetupError(`${device}: the key just added opens no keyslot`);
  return slot;
}

/** Destroys keyslot `slot`, authorised by the key in `authKeyFile` (which must open another slot). */
export async function killSlot(
  runner: Runner,
  device: string,
  options: { slot: number; authKeyFile: string },
): Promise<void> {
  const r = await call(runner, [
    "luksKillSlot",
    "-q",
    "--key-file",
    options.authKeyFile,
    device,
    String(options.slot),
  ]);
  if (r.code !== 0) throw failure(`cryptsetup luksKillSlot ${device} ${options.slot}`, r);
}
