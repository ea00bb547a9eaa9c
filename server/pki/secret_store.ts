/**
 * Server-wide secrets kept in the database (`server_secrets`) so that every replica shares them by
 * construction: the internal CA's private key, the session signing secret and the key sealing TOTP secrets. Each is sealed with
 * AES-256-GCM under a key-encryption key (KEK) read from `ca.key_encryption_key_file`, which never enters
 * the database; the row name is the additional data, so a sealed value copied into another row does not
 * open. A database dump or backup alone therefore yields neither the CA key nor the signing secret.
 *
 * The key file has the format of `disk_encryption.kek_file` (`<kek-id> <base64 of 32 bytes>` per line, the
 * first line current, older lines only open older seals) and is made by `svc-server kek generate FILE --for ca`.
 * When it is missing and the database holds no sealed secret yet, the first start creates it (mode 0600);
 * when the database already holds secrets, a missing file stops the start with a message saying to copy
 * the file from the replica that created them. A row sealed by an older key of the file is sealed again
 * under the current key at start.
 *
 * @module
 */
import { dirname, join } from "node:path";
import type { Db, Queryable } from "../db/db.ts";
import { Buffer } from "node:buffer";
import { type Keyring, parseKeyring } from "./envelope.ts";
import { ensurePrivateDir } from "./files.ts";

const NONCE_BYTES = 12;
const SETTING = "ca.key_encryption_key_file";

/** A secret as stored: its public part and the opened secret bytes. */
export interface StoredSecret {
  publicPem: string;
  secret: Uint8Array<ArrayBuffer>;
  /** True when this call inserted the row. */
  created: boolean;
}

/** The key-encryption key of the server's secrets, loaded on first use. */
export interface SecretStore {
  /** Path of the key file. */
  readonly path: string;
  /**
   * The row `name`, or the one `make` produces when there is none yet. When replicas race, the first
   * insert wins and every caller gets that row.
   */
  getOrCreate(
    name: string,
    make: () => Promise<{ publicPem: string; secret: Uint8Array<ArrayBuffer> }>,
  ): Promise<StoredSecret>;
  /** The row `name` opened, or undefined when there is none. */
  get(name: string): Promise<{ publicPem: string; secret: Uint8Array<ArrayBuffer> } | undefined>;
  /** Inserts or replaces the row `name` (a renewed certificate). */
  put(name: string, publicPem: string, secret: Uint8Array<ArrayBuffer>): Promise<void>;
}

/** Options of {@linkcode openSecretStore}. */
export interface SecretStoreOptions {
  db: Db;
  /** The key file (`ca.key_encryption_key_file`, or the default under the data directory). */
  path: string;
}

/** A store over `options.db` whose key file is read (or created) the first time a secret is needed. */
export function openSecretStore(options: SecretStoreOptions): SecretStore {
  const { db, path } = options;
  let keyring: Promise<Keyring> | undefined;
  const ring = () => {
    keyring ??= loadOrCreateKeyring(db, path);
    keyring.catch(() => (keyring = undefined));
    return keyring;
  };
  return {
    path,
    async getOrCreate(name, make) {
      const kr = await ring();
      let created = false;
      let row = await readRow(db, name);
      if (!row) {
        const fresh = await make();
        const sealed = await seal(kr, name, fresh.secret);
        const inserted = await db.query(
          `INSERT INTO server_secrets (name, public_pem, kek_id, sealed) VALUES ($1, $2, $3, $4)
           ON CONFLICT (name) DO NOTHING RETURNING name`,
          [name, fresh.publicPem, kr.currentId, sealed],
        );
        created = inserted.length === 1;
        fresh.secret.fill(0);
        row = await readRow(db, name);
        if (!row) throw new Error(`server secret "${name}" vanished right after it was stored`);
      }
      const secret = await open(kr, name, row);
      if (row.kek_id !== kr.currentId) {
        // Rotation: the file's first key is new; seal again so the old line can be dropped later.
        await db.query(
          "UPDATE server_secrets SET kek_id = $2, sealed = $3, updated_at = now() WHERE name = $1 AND kek_id = $4",
          [name, kr.currentId, await seal(kr, name, secret), row.kek_id],
        );
      }
      return { publicPem: row.public_pem, secret, created };
    },
    async get(name) {
      const row = await readRow(db, name);
      if (!row) return undefined;
      return { publicPem: row.public_pem, secret: await open(await ring(), name, row) };
    },
    async put(name, publicPem, secret) {
      const kr = await ring();
      await db.query(
        `INSERT INTO server_secrets (name, public_pem, kek_id, sealed) VALUES ($1, $2, $3, $4)
         ON CONFLICT (name) DO UPDATE SET public_pem = EXCLUDED.public_pem, kek_id = EXCLUDED.kek_id,
           sealed = EXCLUDED.sealed, updated_at = now()`,
        [name, publicPem, kr.currentId, await seal(kr, name, secret)],
      );
    },
  };
}

interface Row {
  public_pem: string;
  kek_id: string;
  sealed: Uint8Array;
}

async function readRow(q: Queryable, name: string): Promise<Row | undefined> {
  const [row] = await q.query<Row>(
    "SELECT public_pem, kek_id, sealed FROM server_secrets WHERE name = $1",
    [name],
  );
  return row;
}

function aad(name: string): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(`svc-server-secret:${name}`);
}

async function seal(kr: Keyring, name: string, plaintext: Uint8Array<ArrayBuffer>): Promise<Uint8Array> {
  const iv = crypto.getRandomValues(new Uint8Array(NONCE_BYTES));
  const ct = new Uint8Array(
    await crypto.subtle.encrypt(
      { name: "AES-GCM", iv, additionalData: aad(name) },
      kr.keys.get(kr.currentId)!,
      plaintext,
    ),
  );
  const out = new Uint8Array(NONCE_BYTES + ct.length);
  out.set(iv);
  out.set(ct, NONCE_BYTES);
  return out;
}

async function open(kr: Keyring, name: string, row: Row): Promise<Uint8Array<ArrayBuffer>> {
  const key = kr.keys.get(row.kek_id);
  if (!key) {
    throw new Error(
      `server secret "${name}" in the database is sealed with key-encryption key "${row.kek_id}", which ` +
        `${SETTING} ${kr.path} does not hold: give this server the same key file as the replica that ` +
        `created it (every replica needs the same ${SETTING})`,
    );
  }
  const bytes = new Uint8Array(row.sealed);
  try {
    return new Uint8Array(
      await crypto.subtle.decrypt(
        { name: "AES-GCM", iv: bytes.slice(0, NONCE_BYTES), additionalData: aad(name) },
        key,
        bytes.slice(NONCE_BYTES),
      ),
    );
  } catch {
    throw new Error(
      `server secret "${name}" in the database does not open with key "${row.kek_id}" of ${kr.path}: ` +
        "the key line or the row was altered; restore the key file or the database from a backup",
    );
  }
}

async function loadOrCreateKeyring(db: Db, path: string): Promise<Keyring> {
  let info: Deno.FileInfo | undefined;
  try {
    info = await Deno.stat(path);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) {
      throw new Error(`cannot read ${SETTING} ${path}: ${(err as Error).message}`);
    }
  }
  if (!info) {
    const held = await db.query<{ kek_id: string }>("SELECT DISTINCT kek_id FROM server_secrets ORDER BY 1");
    if (held.length === 0) {
      await createKeyFileOnce(path);
      info = await Deno.stat(path);
    } else {
      // A process sharing this path may have created the file and stored a secret since the stat above.
      info = await Deno.stat(path).catch(() => undefined);
      if (!info) {
        throw new Error(
          `${SETTING} ${path} does not exist, but the database already holds secrets sealed with key ` +
            `${held.map((r) => `"${r.kek_id}"`).join(", ")}: copy the key file from the server that ` +
            `created them to ${path} (mode 0600), or point ${SETTING} at it`,
        );
      }
    }
  }
  if (info.mode !== null && (info.mode & 0o077) !== 0) {
    throw new Error(
      `${SETTING} ${path} is readable by group or others (mode ${(info.mode & 0o777).toString(8)}); ` +
        `run: chmod 600 ${path}`,
    );
  }
  try {
    return await parseKeyring(await Deno.readTextFile(path), path);
  } catch (err) {
    throw new Error(`${SETTING}: ${(err as Error).message}`);
  }
}

/**
 * Writes a new one-key file next to `path` and hard-links it into place, so a second process racing on
 * the same path either wins or finds the whole file (never an empty one being written).
 */
async function createKeyFileOnce(path: string): Promise<void> {
  await ensurePrivateDir(dirname(path));
  const id = `secrets-${new Date().toISOString().slice(0, 10)}-${crypto.randomUUID().slice(0, 8)}`;
  const line = `${id} ${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64")}\n`;
  const temp = join(dirname(path), `.${crypto.randomUUID()}.kek.tmp`);
  try {
    await Deno.writeTextFile(temp, line, { createNew: true, mode: 0o600 });
    await Deno.chmod(temp, 0o600);
    await Deno.link(temp, path);
  } catch (err) {
    if (!(err instanceof Deno.errors.AlreadyExists)) {
      throw new Error(`cannot create ${SETTING} ${path}: ${(err as Error).message}`);
    }
  } finally {
    await Deno.remove(temp).catch(() => {});
  }
}
