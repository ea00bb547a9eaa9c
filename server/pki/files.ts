/**
 * File handling for key material: private directories, atomic writes and
 * certificate/key pairs named in the configuration.
 *
 * @module
 */

import { basename, dirname, join } from "node:path";

/** Mode of directories that hold private keys. */
export const PRIVATE_DIR_MODE = 0o700;
/** Mode of private key files. */
export const PRIVATE_FILE_MODE = 0o600;
/** Mode of certificate files, which are public. */
export const PUBLIC_FILE_MODE = 0o644;

/**
 * Creates `path` (and missing parents) with mode 0700 and tightens it to 0700
 * when it already existed, because it is about to receive private keys.
 */
export async function ensurePrivateDir(path: string): Promise<void> {
  await Deno.mkdir(path, { recursive: true, mode: PRIVATE_DIR_MODE });
  await Deno.chmod(path, PRIVATE_DIR_MODE);
}

/**
 * Writes `data` to `path` through a temporary file in the same directory and
 * a rename, so a reader never sees a half-written key or certificate.
 */
export async function writeFileAtomic(path: string, data: string, options: { mode: number }): Promise<void> {
  const suffix = crypto.getRandomValues(new Uint32Array(1))[0].toString(16);
  const temp = join(dirname(path), `.${basename(path)}.${suffix}.tmp`);
  try {
    await Deno.writeTextFile(temp, data, { mode: options.mode, createNew: true });
    // The mode given at creation is filtered by the umask; set it exactly.
    await Deno.chmod(temp, options.mode);
    await Deno.rename(temp, path);
  } catch (err) {
    await Deno.remove(temp).catch(() => {});
    throw err;
  }
}

/** Whether `path` exists (any file type). */
export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

/** A certificate and key file pair as given in the configuration. */
export interface ConfiguredPair {
  certFile?: string;
  keyFile?: string;
}

/** Configuration key names used in error messages, e.g. `ca.cert_file`. */
export interface PairKeys {
  cert: string;
  key: string;
}

/**
 * Whether the configuration names a certificate/key pair. Empty strings count
 * as unset, because that is what an empty environment variable produces.
 *
 * @throws {Error} when only one of the two is set
 */
export function pairIsConfigured(pair: ConfiguredPair, keys: PairKeys): boolean {
  const hasCert = Boolean(pair.certFile);
  const hasKey = Boolean(pair.keyFile);
  if (hasCert !== hasKey) {
    const missing = hasCert ? keys.key : keys.cert;
    throw new Error(
      `${keys.cert} and ${keys.key} must be set together or both left empty; ${missing} is empty`,
    );
  }
  return hasCert;
}

/**
 * Reads a file of key material for the configuration key `what`.
 *
 * @throws {Error} naming the key, the path and the cause
 */
export async function readConfiguredFile(path: string, what: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (err) {
    throw new Error(`${what} ${path} cannot be read: ${(err as Error).message}`);
  }
}
