/**
 * Login sessions as rotating refresh-token families (`refresh_tokens`). Each refresh marks the presented
 * token used and issues its successor in the same family; presenting a used token again means it was
 * copied, so the whole family is revoked and every access token of that session stops working.
 *
 * One exception keeps two browser tabs that refresh at the same moment from ending their own session: a
 * token presented again within {@link REFRESH_REUSE_GRACE_SECONDS} of its first use gets the same successor
 * the first use received (the same new session, not a second one). The successor is stored sealed with a key
 * derived from the token it replaced, so only someone holding that token can open it. A replay after the
 * grace period still revokes the whole family.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { hashToken, randomToken } from "./tokens.ts";

/**
 * How long a just-rotated refresh token still yields its successor, in seconds: long enough for concurrent
 * refreshes from several tabs of one browser (they share the cookie), short enough that a stolen token is
 * of no use to anyone who did not race its owner.
 */
export const REFRESH_REUSE_GRACE_SECONDS = 30;

/** A refresh token handed to the client (plaintext, once). */
export interface IssuedRefreshToken {
  token: string;
  familyId: string;
  userId: string;
  expiresAt: Date;
}

/** Outcome of presenting a refresh token. */
export type RotateResult =
  /** A successor was issued; `grace` when it is the one an earlier presentation of the same token received. */
  | { kind: "rotated"; issued: IssuedRefreshToken; grace?: boolean }
  | { kind: "invalid" }
  | { kind: "reused"; userId: string; familyId: string };

/** Starts a new session (family) for a user. */
export async function startSession(
  q: Queryable,
  options: { userId: string; ttlSeconds: number },
): Promise<IssuedRefreshToken> {
  return await issue(q, {
    userId: options.userId,
    familyId: crypto.randomUUID(),
    ttlSeconds: options.ttlSeconds,
  });
}

async function issue(
  q: Queryable,
  options: { userId: string; familyId: string; ttlSeconds: number },
): Promise<IssuedRefreshToken> {
  const token = randomToken();
  const expiresAt = new Date(Date.now() + options.ttlSeconds * 1000);
  await q.query(
    "INSERT INTO refresh_tokens (family_id, user_id, token_hash, expires_at) VALUES ($1, $2, $3, $4)",
    [options.familyId, options.userId, await hashToken(token), expiresAt],
  );
  return { token, familyId: options.familyId, userId: options.userId, expiresAt };
}

/**
 * Exchanges a refresh token for its successor. Must run inside a transaction: the used-marking is a
 * conditional UPDATE, so two concurrent presentations of one token cannot both succeed.
 */
export async function rotateRefreshToken(
  tx: Queryable,
  options: { token: string; ttlSeconds: number },
): Promise<RotateResult> {
  const tokenHash = await hashToken(options.token);
  const row = await queryOne<{ family_id: string; user_id: string; claimed: boolean; live: boolean }>(
    tx,
    `WITH claim AS (
       UPDATE refresh_tokens SET used_at = now()
        WHERE token_hash = $1 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > now()
        RETURNING id)
     SELECT t.family_id, t.user_id, EXISTS (SELECT 1 FROM claim) AS claimed, u.enabled AS live
       FROM refresh_tokens t JOIN users u ON u.id = t.user_id
      WHERE t.token_hash = $1`,
    [tokenHash],
  );
  if (!row) return { kind: "invalid" };
  if (!row.claimed) {
    // Known token that is used, revoked or expired. Used moments ago: the successor its first use received.
    // Used earlier: a replay, so the session ends everywhere.
    const used = await queryOne<
      { used: boolean; in_grace: boolean; successor_sealed: string | null; revoked: boolean }
    >(
      tx,
      `SELECT used_at IS NOT NULL AS used, revoked_at IS NOT NULL AS revoked, successor_sealed,
              used_at > now() - make_interval(secs => $2::int) AS in_grace
         FROM refresh_tokens WHERE token_hash = $1`,
      [tokenHash, REFRESH_REUSE_GRACE_SECONDS],
    );
    if (used?.used && used.in_grace && !used.revoked && used.successor_sealed && row.live) {
      const successor = await unseal(options.token, used.successor_sealed);
      const next = successor === undefined ? undefined : await queryOne<{ expires_at: Date; live: boolean }>(
        tx,
        `SELECT expires_at, revoked_at IS NULL AND expires_at > now() AS live
           FROM refresh_tokens WHERE token_hash = $1 AND family_id = $2`,
        [await hashToken(successor), row.family_id],
      );
      if (successor !== undefined && next?.live) {
        return {
          kind: "rotated",
          grace: true,
          issued: {
            token: successor,
            familyId: row.family_id,
            userId: row.user_id,
            expiresAt: new Date(next.expires_at),
          },
        };
      }
    }
    if (used?.used) {
      await revokeSession(tx, row.family_id);
      return { kind: "reused", userId: row.user_id, familyId: row.family_id };
    }
    return { kind: "invalid" };
  }
  if (!row.live) {
    await revokeSession(tx, row.family_id);
    return { kind: "invalid" };
  }
  const issued = await issue(tx, {
    userId: row.user_id,
    familyId: row.family_id,
    ttlSeconds: options.ttlSeconds,
  });
  await tx.query("UPDATE refresh_tokens SET successor_sealed = $2 WHERE token_hash = $1", [
    tokenHash,
    await seal(options.token, issued.token),
  ]);
  return { kind: "rotated", issued };
}

/** The AES-GCM key that seals the successor of `token`: derived from the token, never stored. */
async function sealingKey(token: string): Promise<CryptoKey> {
  const material = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(`svc refresh successor\0${token}`),
  );
  return await crypto.subtle.importKey("raw", material, "AES-GCM", false, ["encrypt", "decrypt"]);
}

async function seal(token: string, successor: string): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = new Uint8Array(
    await crypto.subtle.encrypt(
      { name: "AES-GCM", iv },
      await sealingKey(token),
      new TextEncoder().encode(successor),
    ),
  );
  return btoa(String.fromCharCode(...iv, ...sealed));
}

async function unseal(token: string, sealed: string): Promise<string | undefined> {
  try {
    const bytes = Uint8Array.from(atob(sealed), (c) => c.charCodeAt(0));
    const plain = await crypto.subtle.decrypt(
      { name: "AES-GCM", iv: bytes.slice(0, 12) },
      await sealingKey(token),
      bytes.slice(12),
    );
    return new TextDecoder().decode(plain);
  } catch {
    return undefined;
  }
}

/** Revokes one session: its refresh tokens stop working and its access tokens are refused. */
export async function revokeSession(q: Queryable, familyId: string): Promise<void> {
  await q.query("UPDATE refresh_tokens SET revoked_at = now() WHERE family_id = $1 AND revoked_at IS NULL", [
    familyId,
  ]);
}

/**
 * Revokes every session of a user and refuses access tokens issued before now (disable, password change,
 * delete). Returns the cut-off in milliseconds; tokens issued later carry an `iat_ms` at or after it.
 */
export async function revokeAllSessions(q: Queryable, userId: string): Promise<number> {
  // One millisecond ahead: a token signed in the same millisecond, just before this call, is refused too.
  const cutoff = Date.now() + 1;
  await q.query("UPDATE users SET tokens_valid_after = $2 WHERE id = $1", [userId, new Date(cutoff)]);
  await q.query("UPDATE refresh_tokens SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL", [
    userId,
  ]);
  return cutoff;
}

/** Deletes families whose every token has expired (replay detection has nothing left to protect). */
export async function purgeExpiredSessions(q: Queryable): Promise<number> {
  const rows = await q.query<{ n: number }>(
    `WITH gone AS (
       DELETE FROM refresh_tokens WHERE family_id IN (
         SELECT family_id FROM refresh_tokens GROUP BY family_id HAVING max(expires_at) < now() - interval '1 day')
       RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
  );
  return rows[0]?.n ?? 0;
}
