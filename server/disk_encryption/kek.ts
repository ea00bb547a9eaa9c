/**
 * The server's key-encryption key: where it comes from (`disk_encryption.kek_file`), when its absence stops
 * the server, and the one loaded keyring per configuration.
 *
 * Disk encryption counts as **in use** when the database holds at least one escrowed recovery key (any
 * state), or a released DiskEncryption policy asks for escrow (`escrow_recovery_key: true`). A server in use
 * without a KEK file refuses to start: it could neither store nor reveal keys. A server not in use starts
 * without one; escrow calls then fail with a message naming the setting.
 *
 * @module
 */
import type { ServerConfig } from "../config/config.ts";
import type { Queryable } from "../db/db.ts";
import { createKekFile, KekError, type Keyring, loadKeyring } from "../pki/envelope.ts";

const loaded = new WeakMap<ServerConfig["diskEncryption"], { keyring: Promise<Keyring>; stamp: string }>();

async function fileStamp(path: string): Promise<string> {
  try {
    const info = await Deno.stat(path);
    return `${info.mtime?.getTime()}:${info.size}:${info.ino}`;
  } catch {
    return "missing";
  }
}

/** True when disk encryption is in use (see the module documentation). */
export async function diskEncryptionInUse(q: Queryable): Promise<boolean> {
  const [row] = await q.query<{ used: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM luks_recovery_keys)
         OR EXISTS (SELECT 1 FROM policies WHERE type = 'DiskEncryption' AND state = 'released'
                     AND CASE WHEN type = 'DiskEncryption'
                              THEN content::jsonb @> '{"escrow_recovery_key": true}' END) AS used`,
  );
  return row.used === true;
}

/**
 * The keyring of the configured KEK file (created first when `create_kek_file` is set and the file is
 * missing). It is read again whenever the file changed, so a KEK added on one replica's host and a re-wrap
 * run through another replica reach every replica without a restart. Throws {@link KekError} naming the
 * setting when no file is configured.
 */
export async function keyringFor(config: ServerConfig): Promise<Keyring> {
  const settings = config.diskEncryption;
  const stamp = settings.kekFile === "" ? "" : await fileStamp(settings.kekFile);
  let entry = loaded.get(settings);
  if (!entry || entry.stamp !== stamp) {
    const keyring = openKeyring(settings);
    entry = { keyring, stamp };
    loaded.set(settings, entry);
    // A failure is not cached: fixing the file must not need a restart.
    keyring.catch(() => loaded.delete(settings));
  }
  return await entry.keyring;
}

async function openKeyring(settings: ServerConfig["diskEncryption"]): Promise<Keyring> {
  if (settings.kekFile === "") {
    throw new KekError(
      "recovery-key escrow needs a key-encryption key: set disk_encryption.kek_file (create the file with: svc-server kek generate FILE --for disk-encryption)",
    );
  }
  if (settings.createKekFile) {
    try {
      await createKekFile(settings.kekFile);
    } catch (err) {
      if (!(err instanceof Deno.errors.AlreadyExists)) {
        throw new KekError(
          `cannot create disk_encryption.kek_file ${settings.kekFile}: ${(err as Error).message}`,
        );
      }
    }
  }
  return await loadKeyring(settings.kekFile);
}

/** Forgets the loaded keyring so the next use reads the file again (after adding a KEK). */
export function reloadKeyring(config: ServerConfig): void {
  loaded.delete(config.diskEncryption);
}

/**
 * The start-up check: loads the KEK when configured (a bad file stops the server), and refuses to start
 * without one when disk encryption is in use.
 */
export async function checkKekAtStart(config: ServerConfig, q: Queryable): Promise<void> {
  if (config.diskEncryption.kekFile !== "") {
    await keyringFor(config);
    return;
  }
  if (await diskEncryptionInUse(q)) {
    throw new KekError(
      "disk encryption is in use (escrowed recovery keys or a released DiskEncryption policy with escrow) but disk_encryption.kek_file is not set; point it at the key-encryption key file",
    );
  }
}
