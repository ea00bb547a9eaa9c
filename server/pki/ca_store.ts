/**
 * The CA and session secret every replica shares: from operator files when `ca.cert_file`/`ca.key_file`
 * are set, otherwise from the database (`server_secrets`, sealed by the {@link SecretStore}), created by
 * whichever replica starts first.
 *
 * Installs from before the CA moved into the database keep their CA: when the database holds none and
 * `{data_dir}/pki/ca/ca.key` exists, that CA is imported (the files stay; they are only compared from then
 * on, and a different CA in the database stops the start instead of silently locking agents out). Without
 * a private key there, the CA certificate is written to `{data_dir}/pki/ca/ca.crt` at every start as a
 * convenience copy for scripts on the server host; the private key never goes to disk.
 *
 * @module
 */
import { join } from "node:path";
import { decodeCertificate } from "../../shared/pki/csr.ts";
import { type Ca, generateCaPem, loadCa, loadOrCreateCa } from "./ca.ts";
import type { CaKeyType } from "../config/ca_key_type.ts";
import { ensurePrivateDir, exists, PUBLIC_FILE_MODE, readConfiguredFile, writeFileAtomic } from "./files.ts";
import type { SecretStore } from "./secret_store.ts";

/** Row names in `server_secrets`. */
export const CA_SECRET = "ca";
/** Row name of the session signing secret. */
export const JWT_SECRET = "jwt_secret";
/** Row name of the key sealing TOTP secrets at rest. */
export const TOTP_KEY_SECRET = "totp_key";

/** Options of {@linkcode loadSharedCa}. */
export interface SharedCaOptions {
  store: SecretStore;
  dataDir: string;
  certFile?: string;
  keyFile?: string;
  /** `ca.key_type`: the curve of a CA created by this call; a CA that exists keeps its own. */
  keyType?: CaKeyType;
}

/** How the CA was obtained, for the start-up log. */
export type CaOrigin = "files" | "database" | "created" | "imported";

/**
 * The CA: operator files when configured, otherwise the database's (created or imported on first start).
 *
 * @throws {Error} when the files or the database copy cannot be used, or the legacy files under the data
 * directory hold a CA other than the database's
 */
export async function loadSharedCa(options: SharedCaOptions): Promise<{ ca: Ca; origin: CaOrigin }> {
  if (options.certFile || options.keyFile) {
    const ca = await loadOrCreateCa({
      dataDir: options.dataDir,
      certFile: options.certFile,
      keyFile: options.keyFile,
    });
    return { ca, origin: "files" };
  }
  const caDir = join(options.dataDir, "pki", "ca");
  const legacyCert = join(caDir, "ca.crt");
  const legacyKey = join(caDir, "ca.key");
  const hasLegacy = await exists(legacyKey);
  let legacy: { certPem: string; keyPem: string } | undefined;
  if (hasLegacy) {
    if (!(await exists(legacyCert))) {
      throw new Error(
        `internal CA is incomplete: ${legacyKey} exists but ${legacyCert} is missing; restore it from a ` +
          `backup, or remove ${legacyKey} to use (or create) the CA kept in the database`,
      );
    }
    legacy = {
      certPem: await readConfiguredFile(legacyCert, "CA certificate"),
      keyPem: await readConfiguredFile(legacyKey, "CA key"),
    };
  }
  const stored = await options.store.getOrCreate(CA_SECRET, async () => {
    if (legacy) {
      // Checked before it is shared with every replica.
      await loadCa({
        ...legacy,
        certSource: `CA certificate ${legacyCert}`,
        keySource: `CA key ${legacyKey}`,
        generated: false,
      });
      return { publicPem: legacy.certPem, secret: new TextEncoder().encode(legacy.keyPem) };
    }
    const fresh = await generateCaPem(options.keyType);
    return { publicPem: fresh.certPem, secret: new TextEncoder().encode(fresh.keyPem) };
  });
  const keyPem = new TextDecoder().decode(stored.secret);
  stored.secret.fill(0);
  const ca = await loadCa({
    certPem: stored.publicPem,
    keyPem,
    certSource: "CA certificate in the database",
    keySource: "CA key in the database",
    generated: stored.created && !legacy,
  });
  if (legacy) {
    const onDisk = decodeCertificate(legacy.certPem);
    if (!sameBytes(onDisk.rawData, ca.cert.rawData)) {
      throw new Error(
        `${legacyCert} holds a different CA (${onDisk.subject}) than the one in the database ` +
          `(${ca.cert.subject}); agents enrolled against one would be refused by the other. Keep the ` +
          `database's CA by moving ${caDir} away, or configure ca.cert_file and ca.key_file to use the files`,
      );
    }
  } else {
    await writePublicCopy(caDir, legacyCert, ca.certPem);
  }
  const origin: CaOrigin = !stored.created ? "database" : legacy ? "imported" : "created";
  return { ca, origin };
}

/**
 * The session signing secret shared by every replica (64 hex characters from 32 random bytes), created by
 * the first replica that needs it.
 */
export async function loadSharedJwtSecret(store: SecretStore): Promise<string> {
  const stored = await store.getOrCreate(JWT_SECRET, () => {
    const bytes = crypto.getRandomValues(new Uint8Array(32));
    const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    bytes.fill(0);
    return Promise.resolve({ publicPem: "", secret: new TextEncoder().encode(hex) });
  });
  const secret = new TextDecoder().decode(stored.secret);
  stored.secret.fill(0);
  return secret;
}

async function writePublicCopy(caDir: string, path: string, pem: string): Promise<void> {
  const current = await Deno.readTextFile(path).catch(() => undefined);
  if (current === pem) return;
  await ensurePrivateDir(join(caDir, ".."));
  await Deno.mkdir(caDir, { recursive: true, mode: 0o755 });
  await writeFileAtomic(path, pem, { mode: PUBLIC_FILE_MODE });
}

function sameBytes(a: ArrayBuffer, b: ArrayBuffer): boolean {
  if (a.byteLength !== b.byteLength) return false;
  const x = new Uint8Array(a);
  const y = new Uint8Array(b);
  return x.every((v, i) => v === y[i]);
}

/**
 * The key sealing users' TOTP secrets (32 random bytes), shared by every replica and created by the first
 * that needs it. A key of its own rather than one derived from the session secret: rotating the session
 * secret (after a leak, say) must not cost every user their authenticator, and whoever holds the session
 * secret must not be able to read the authenticators' secrets.
 */
export async function loadSharedTotpKey(store: SecretStore): Promise<Uint8Array<ArrayBuffer>> {
  const stored = await store.getOrCreate(
    TOTP_KEY_SECRET,
    () => Promise.resolve({ publicPem: "", secret: crypto.getRandomValues(new Uint8Array(32)) }),
  );
  return stored.secret;
}
