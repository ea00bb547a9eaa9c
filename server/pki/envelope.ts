/**
 * Envelope encryption of escrowed recovery keys. Each recovery key gets its own random 256-bit data key;
 * the recovery key is sealed with AES-256-GCM under the data key, and the data key is sealed with
 * AES-256-GCM under a key-encryption key (KEK) that lives in a file outside the database. Both seals carry
 * the key's row id as additional data, so a ciphertext moved to another row does not open.
 *
 * The KEK file holds one key per line, `<kek-id> <base64 of 32 bytes>`; `#` starts a comment. The first key
 * is the current one (new seals and re-wraps use it); the others only open data keys sealed before a
 * rotation. Rotating: prepend a new line ({@link addKekToFile}), restart or reload, re-wrap
 * ({@link rewrapAll} in escrow.ts), then drop the old line.
 *
 * @module
 */
import { Buffer } from "node:buffer";

function encodeBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("base64");
}

function decodeBase64(text: string): Uint8Array<ArrayBuffer> {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) throw new Error("not base64");
  return new Uint8Array(Buffer.from(text, "base64"));
}

/** A configuration or file problem with the KEK; the message names the file and the fix. */
export class KekError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KekError";
  }
}

/** The KEKs of one file: the first is current. */
export interface Keyring {
  path: string;
  currentId: string;
  keys: Map<string, CryptoKey>;
}

/** The sealed form of a recovery key as stored in `luks_recovery_keys`. */
export interface SealedKey {
  kekId: string;
  /** 12-byte nonce + AES-GCM ciphertext and tag of the data key. */
  wrappedDataKey: Uint8Array;
  /** 12-byte nonce + AES-GCM ciphertext and tag of the recovery key. */
  ciphertext: Uint8Array;
}

const KEK_ID = /^[A-Za-z0-9_.-]{1,64}$/;
const NONCE_BYTES = 12;

function aad(kind: "data-key" | "recovery-key", keyId: string): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(`svc-luks-${kind}:${keyId}`);
}

async function importAes(raw: Uint8Array<ArrayBuffer>): Promise<CryptoKey> {
  return await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
}

async function seal(
  key: CryptoKey,
  plaintext: Uint8Array<ArrayBuffer>,
  data: Uint8Array<ArrayBuffer>,
): Promise<Uint8Array> {
  const iv = crypto.getRandomValues(new Uint8Array(NONCE_BYTES));
  const ct = new Uint8Array(
    await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: data }, key, plaintext),
  );
  const out = new Uint8Array(NONCE_BYTES + ct.length);
  out.set(iv);
  out.set(ct, NONCE_BYTES);
  return out;
}

async function open(
  key: CryptoKey,
  sealed: Uint8Array,
  data: Uint8Array<ArrayBuffer>,
): Promise<Uint8Array<ArrayBuffer>> {
  const bytes = new Uint8Array(sealed);
  return new Uint8Array(
    await crypto.subtle.decrypt(
      { name: "AES-GCM", iv: bytes.slice(0, NONCE_BYTES), additionalData: data },
      key,
      bytes.slice(NONCE_BYTES),
    ),
  );
}

/** Parses the text of a KEK file. */
export async function parseKeyring(text: string, path: string): Promise<Keyring> {
  const keys = new Map<string, CryptoKey>();
  let currentId = "";
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.replace(/#.*/, "").trim();
    if (line === "") continue;
    const where = `${path} line ${i + 1}`;
    const m = /^(\S+)\s+(\S+)$/.exec(line);
    if (!m || !KEK_ID.test(m[1])) {
      throw new KekError(
        `${where}: expected "<kek-id> <base64 of 32 random bytes>" (id: letters, digits, . _ -)`,
      );
    }
    let bytes: Uint8Array<ArrayBuffer>;
    try {
      bytes = decodeBase64(m[2]);
    } catch {
      throw new KekError(`${where}: the key is not valid base64`);
    }
    if (bytes.length !== 32) {
      throw new KekError(`${where}: the key must be 32 bytes (AES-256), got ${bytes.length}`);
    }
    if (keys.has(m[1])) throw new KekError(`${where}: key id "${m[1]}" is listed twice`);
    keys.set(m[1], await importAes(bytes));
    currentId ||= m[1];
  }
  if (!currentId) {
    throw new KekError(`${path} holds no key; generate one with: svc-server kek generate ${path}`);
  }
  return { path, currentId, keys };
}

/** Reads a KEK file; refuses one that group or others can read. */
export async function loadKeyring(path: string): Promise<Keyring> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new KekError(
        `disk_encryption.kek_file ${path} does not exist; create it with: svc-server kek generate ${path} --for disk-encryption`,
      );
    }
    throw new KekError(`cannot read disk_encryption.kek_file ${path}: ${(err as Error).message}`);
  }
  if (info.mode !== null && (info.mode & 0o077) !== 0) {
    throw new KekError(
      `disk_encryption.kek_file ${path} is readable by group or others (mode ${
        (info.mode & 0o777).toString(8)
      }); run: chmod 600 ${path}`,
    );
  }
  return await parseKeyring(await Deno.readTextFile(path), path);
}

function newKekLine(id?: string): string {
  const kekId = id ?? `kek-${new Date().toISOString().slice(0, 10)}-${crypto.randomUUID().slice(0, 8)}`;
  return `${kekId} ${encodeBase64(crypto.getRandomValues(new Uint8Array(32)))}\n`;
}

/** Creates a new KEK file with one random key, mode 0600; fails when the file exists. */
export async function createKekFile(path: string): Promise<void> {
  await Deno.writeTextFile(path, newKekLine(), { createNew: true, mode: 0o600 });
  await Deno.chmod(path, 0o600);
}

/** Puts a new random key first in an existing KEK file (the old keys stay to open older seals). */
export async function addKekToFile(path: string): Promise<string> {
  const before = await Deno.readTextFile(path);
  await parseKeyring(before, path);
  const line = newKekLine();
  const tmp = `${path}.tmp-${crypto.randomUUID()}`;
  await Deno.writeTextFile(tmp, line + before, { createNew: true, mode: 0o600 });
  await Deno.rename(tmp, path);
  return line.split(" ")[0];
}

/** Seals `recoveryKey` for the row `keyId` under a fresh data key wrapped by the current KEK. */
export async function sealRecoveryKey(
  keyring: Keyring,
  keyId: string,
  recoveryKey: string,
): Promise<SealedKey> {
  const dataKeyBytes = crypto.getRandomValues(new Uint8Array(32));
  const dataKey = await importAes(dataKeyBytes);
  const ciphertext = await seal(dataKey, new TextEncoder().encode(recoveryKey), aad("recovery-key", keyId));
  const kek = keyring.keys.get(keyring.currentId)!;
  const wrappedDataKey = await seal(kek, dataKeyBytes, aad("data-key", keyId));
  dataKeyBytes.fill(0);
  return { kekId: keyring.currentId, wrappedDataKey, ciphertext };
}

async function unwrapDataKey(
  keyring: Keyring,
  keyId: string,
  sealed: SealedKey,
): Promise<Uint8Array<ArrayBuffer>> {
  const kek = keyring.keys.get(sealed.kekId);
  if (!kek) {
    throw new KekError(
      `recovery key ${keyId} is wrapped by KEK "${sealed.kekId}", which ${keyring.path} no longer holds; restore that line`,
    );
  }
  try {
    return await open(kek, sealed.wrappedDataKey, aad("data-key", keyId));
  } catch {
    throw new KekError(`recovery key ${keyId}: its data key does not open with KEK "${sealed.kekId}"`);
  }
}

/** Opens a sealed recovery key (throws {@link KekError} when the KEK is missing or the seal was altered). */
export async function openRecoveryKey(keyring: Keyring, keyId: string, sealed: SealedKey): Promise<string> {
  const raw = await unwrapDataKey(keyring, keyId, sealed);
  const dataKey = await importAes(raw);
  raw.fill(0);
  try {
    return new TextDecoder().decode(await open(dataKey, sealed.ciphertext, aad("recovery-key", keyId)));
  } catch {
    throw new KekError(`recovery key ${keyId}: the ciphertext does not open with its data key`);
  }
}

/** The data key of `sealed` wrapped again by the current KEK; the recovery-key ciphertext is unchanged. */
export async function rewrapDataKey(keyring: Keyring, keyId: string, sealed: SealedKey): Promise<SealedKey> {
  const raw = await unwrapDataKey(keyring, keyId, sealed);
  const kek = keyring.keys.get(keyring.currentId)!;
  const wrappedDataKey = await seal(kek, raw, aad("data-key", keyId));
  raw.fill(0);
  return { kekId: keyring.currentId, wrappedDataKey, ciphertext: sealed.ciphertext };
}
