/**
 * Second factors of a user: the TOTP authenticator (secret sealed at rest, each code accepted once) and
 * single-use backup codes. SQL and crypto only; no HTTP.
 *
 * TOTP secrets are sealed (AES-256-GCM, bound to the user) under a key of their own, kept in the database
 * sealed by the server's key-encryption key and shared by every replica (`ctx.totpKey`, `server_secrets` row
 * `totp_key`). Seals of the first version (`v1.`) used a key derived from the session secret (JWT_SECRET):
 * changing that secret made every authenticator unreadable, and whoever held it could read them. Those are
 * opened with the derived key once, at start, and sealed again under the TOTP key
 * ({@linkcode resealLegacyTotpSecrets}).
 *
 * @module
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { DomainError } from "../core/errors.ts";
import { hashToken } from "./tokens.ts";
import { matchTotpStep, newTotpSecret } from "./totp.ts";

/** Backup codes issued at a time. */
export const BACKUP_CODE_COUNT = 10;

/** Seals and opens TOTP secrets, bound to their user. */
export interface SecretSealer {
  seal(userId: string, secret: Uint8Array<ArrayBuffer>): Promise<string>;
  open(userId: string, sealed: string): Promise<Uint8Array<ArrayBuffer>>;
}

/**
 * The sealer under `totpKey` (32 bytes; `ctx.totpKey`). `legacyJwtSecret` opens `v1.` seals, made under a
 * key derived from the session secret before the TOTP key existed; new seals are always `v2.`.
 */
export function createSecretSealer(totpKey: Uint8Array<ArrayBuffer>, legacyJwtSecret = ""): SecretSealer {
  // Imported when first needed: route tables are also built without a server (the OpenAPI document).
  let imported: Promise<CryptoKey> | undefined;
  const key = () =>
    imported ??= crypto.subtle.importKey("raw", totpKey, "AES-GCM", false, ["encrypt", "decrypt"]);
  let legacyImported: Promise<CryptoKey> | undefined;
  const legacy = () => legacyImported ??= legacyKey(legacyJwtSecret);
  return {
    async seal(userId, secret) {
      const iv = crypto.getRandomValues(new Uint8Array(12));
      const sealed = new Uint8Array(
        await crypto.subtle.encrypt(
          { name: "AES-GCM", iv, additionalData: new TextEncoder().encode(userId) },
          await key(),
          secret,
        ),
      );
      return `v2.${toBase64(iv)}.${toBase64(sealed)}`;
    },
    async open(userId, sealed) {
      const [version, iv, data] = sealed.split(".");
      if ((version !== "v1" && version !== "v2") || !iv || !data) {
        throw new Error("mfa: unknown sealed secret format");
      }
      if (version === "v1" && legacyJwtSecret === "") {
        throw new Error("mfa: a v1 seal needs the former session secret to open");
      }
      return new Uint8Array(
        await crypto.subtle.decrypt(
          { name: "AES-GCM", iv: fromBase64(iv), additionalData: new TextEncoder().encode(userId) },
          version === "v1" ? await legacy() : await key(),
          fromBase64(data),
        ),
      );
    },
  };
}

/** The key `v1.` seals were made under: HKDF-SHA256 of the session secret. */
async function legacyKey(jwtSecret: string): Promise<CryptoKey> {
  const material = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(jwtSecret),
    "HKDF",
    false,
    ["deriveKey"],
  );
  return await crypto.subtle.deriveKey(
    {
      name: "HKDF",
      hash: "SHA-256",
      salt: new TextEncoder().encode("svc second factors"),
      info: new TextEncoder().encode("totp secret sealing v1"),
    },
    material,
    { name: "AES-GCM", length: 256 },
    false,
    ["encrypt", "decrypt"],
  );
}

/**
 * Seals every `v1.` TOTP secret again under the TOTP key (at start; each row in its own statement, guarded
 * by its old value, so replicas starting together do not undo each other). A row the current session secret
 * does not open (the secret changed since) is left as it is and counted: that user logs in with a backup
 * code or an admin resets the factor, as before. Returns how many rows were sealed again and left.
 */
export async function resealLegacyTotpSecrets(
  q: Queryable,
  sealer: SecretSealer,
): Promise<{ resealed: number; unreadable: number }> {
  const rows = await q.query<{ user_id: string; secret_sealed: string }>(
    "SELECT user_id, secret_sealed FROM user_totp WHERE secret_sealed LIKE 'v1.%'",
  );
  let resealed = 0;
  let unreadable = 0;
  for (const row of rows) {
    let secret: Uint8Array<ArrayBuffer>;
    try {
      secret = await sealer.open(row.user_id, row.secret_sealed);
    } catch {
      unreadable++;
      continue;
    }
    await q.query("UPDATE user_totp SET secret_sealed = $1 WHERE user_id = $2 AND secret_sealed = $3", [
      await sealer.seal(row.user_id, secret),
      row.user_id,
      row.secret_sealed,
    ]);
    secret.fill(0);
    resealed++;
  }
  return { resealed, unreadable };
}

/** What second factors a user has. */
export interface FactorSummary {
  /** A confirmed TOTP authenticator. */
  totp: boolean;
  /** An enrolment waiting for its confirmation code. */
  totpPending: boolean;
  backupCodesLeft: number;
  webauthn: number;
}

/** The user's factors. */
export async function factorsOf(q: Queryable, userId: string): Promise<FactorSummary> {
  const row = await queryOne<{ confirmed: boolean | null; left: number; keys: number }>(
    q,
    `SELECT (SELECT confirmed_at IS NOT NULL FROM user_totp WHERE user_id = $1) AS confirmed,
            (SELECT count(*)::int FROM user_backup_codes WHERE user_id = $1 AND used_at IS NULL) AS left,
            (SELECT count(*)::int FROM webauthn_credentials WHERE user_id = $1) AS keys`,
    [userId],
  );
  return {
    totp: row?.confirmed === true,
    totpPending: row?.confirmed === false,
    backupCodesLeft: row?.left ?? 0,
    webauthn: row?.keys ?? 0,
  };
}

/** True when the user must present a second factor at login and step-up. */
export function hasSecondFactor(f: FactorSummary): boolean {
  return f.totp || f.webauthn > 0;
}

/**
 * Starts (or restarts) a TOTP enrolment: a new secret, unconfirmed until {@link confirmTotp}. Refused while
 * a confirmed authenticator exists (remove it first, with step-up).
 */
export async function startTotpEnrolment(
  q: Queryable,
  sealer: SecretSealer,
  userId: string,
): Promise<Uint8Array<ArrayBuffer>> {
  const secret = newTotpSecret();
  const sealed = await sealer.seal(userId, secret);
  const rows = await q.query(
    `INSERT INTO user_totp (user_id, secret_sealed) VALUES ($1, $2)
     ON CONFLICT (user_id) DO UPDATE SET secret_sealed = $2, created_at = now(), last_used_step = NULL
       WHERE user_totp.confirmed_at IS NULL
     RETURNING user_id`,
    [userId, sealed],
  );
  if (rows.length === 0) {
    throw new DomainError(
      "conflict",
      "an authenticator app is already set up; remove it first (Settings → Second factors) to set up another",
      undefined,
      { code: "totp_already_enrolled" },
    );
  }
  return secret;
}

/**
 * Confirms the pending enrolment with a code from the app; on success returns fresh backup codes (shown
 * once; earlier ones stop working). Throws 400 `invalid_code` for a wrong code.
 */
export async function confirmTotp(
  q: Queryable,
  sealer: SecretSealer,
  userId: string,
  code: string,
  atMs: number = Date.now(),
): Promise<string[]> {
  const row = await queryOne<{ secret_sealed: string }>(
    q,
    "SELECT secret_sealed FROM user_totp WHERE user_id = $1 AND confirmed_at IS NULL",
    [userId],
  );
  if (!row) {
    throw new DomainError("conflict", "no authenticator enrolment is waiting: start one first", undefined, {
      code: "no_pending_enrolment",
    });
  }
  const step = await matchTotpStep(await sealer.open(userId, row.secret_sealed), code, atMs);
  if (step === undefined) {
    throw new DomainError("bad_request", "the code is wrong: type the 6 digits the app shows now", [
      { field: "code", message: "does not match the authenticator" },
    ], { code: "invalid_code" });
  }
  await q.query(
    "UPDATE user_totp SET confirmed_at = now(), last_used_step = $2 WHERE user_id = $1",
    [userId, step],
  );
  return await replaceBackupCodes(q, userId);
}

/** Issues {@link BACKUP_CODE_COUNT} new backup codes (plaintext returned once), replacing the old ones. */
export async function replaceBackupCodes(q: Queryable, userId: string): Promise<string[]> {
  const codes = Array.from({ length: BACKUP_CODE_COUNT }, newBackupCode);
  await q.query("DELETE FROM user_backup_codes WHERE user_id = $1", [userId]);
  for (const code of codes) {
    await q.query("INSERT INTO user_backup_codes (user_id, code_hash) VALUES ($1, $2)", [
      userId,
      await hashToken(normalizeBackupCode(code)),
    ]);
  }
  return codes;
}

const CODE_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789";

/** 12 characters from a 31-letter alphabet without look-alikes (~59 bits), as `xxxx-xxxx-xxxx`. */
function newBackupCode(): string {
  let out = "";
  while (out.length < 12) {
    const [byte] = crypto.getRandomValues(new Uint8Array(1));
    // Rejection sampling keeps every letter equally likely.
    if (byte < 248) out += CODE_ALPHABET[byte % 31];
  }
  return `${out.slice(0, 4)}-${out.slice(4, 8)}-${out.slice(8)}`;
}

function normalizeBackupCode(code: string): string {
  return code.toLowerCase().replace(/[\s-]/g, "");
}

/** What the person typed as their second factor. */
export interface SecondFactorProof {
  /** A 6-digit TOTP code. */
  code?: string;
  /** One of the backup codes. */
  backupCode?: string;
}

/**
 * Checks a TOTP code or a backup code and uses it up: a TOTP step at or before the last accepted one is
 * refused (a code works once, across its whole window and every replica), a backup code is marked used.
 * Returns which factor matched, or undefined.
 */
export async function useSecondFactor(
  q: Queryable,
  sealer: SecretSealer,
  userId: string,
  proof: SecondFactorProof,
  atMs: number = Date.now(),
): Promise<"totp" | "backup_code" | undefined> {
  if (proof.code) {
    const row = await queryOne<{ secret_sealed: string; last_used_step: string | number | null }>(
      q,
      "SELECT secret_sealed, last_used_step FROM user_totp WHERE user_id = $1 AND confirmed_at IS NOT NULL",
      [userId],
    );
    if (!row) return undefined;
    const step = await matchTotpStep(await sealer.open(userId, row.secret_sealed), proof.code.trim(), atMs);
    if (step === undefined) return undefined;
    // The conditional update is the replay check: two requests racing with one code, one wins.
    const won = await q.query(
      `UPDATE user_totp SET last_used_step = $2
        WHERE user_id = $1 AND (last_used_step IS NULL OR last_used_step < $2) RETURNING user_id`,
      [userId, step],
    );
    return won.length > 0 ? "totp" : undefined;
  }
  if (proof.backupCode) {
    const used = await q.query(
      `UPDATE user_backup_codes SET used_at = now()
        WHERE user_id = $1 AND code_hash = $2 AND used_at IS NULL RETURNING id`,
      [userId, await hashToken(normalizeBackupCode(proof.backupCode))],
    );
    return used.length > 0 ? "backup_code" : undefined;
  }
  return undefined;
}

/** Removes the TOTP authenticator and backup codes; with `webauthn`, security keys too. */
export async function removeFactors(
  q: Queryable,
  userId: string,
  options: { webauthn: boolean },
): Promise<void> {
  await q.query("DELETE FROM user_totp WHERE user_id = $1", [userId]);
  await q.query("DELETE FROM user_backup_codes WHERE user_id = $1", [userId]);
  if (options.webauthn) await q.query("DELETE FROM webauthn_credentials WHERE user_id = $1", [userId]);
}

function toBase64(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}
