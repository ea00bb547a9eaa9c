/**
 * The state between login steps: after the right password, a user with a second factor receives an opaque
 * single-use token (32 random bytes; only its SHA-256 is stored) that is good for a few minutes and a few
 * wrong codes, and for nothing but the second step. It is not a session: no cookie, no API access.
 * Stored in the database so the second step may reach another replica.
 *
 * @module
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { hashToken, isWellFormedToken, randomToken } from "./tokens.ts";

/** How long the second step may take. */
export const PENDING_LOGIN_TTL_SECONDS = 300;
/** Wrong second-factor codes one pending login survives. */
export const PENDING_LOGIN_MAX_FAILURES = 5;

/** What a pending login is for. */
export type PendingPurpose = "second_factor" | "webauthn_register" | "webauthn_login";

/** A live pending login. */
export interface PendingLogin {
  id: string;
  userId: string | null;
  challenge: string | null;
  expiresAt: Date;
}

/** Creates a pending login; returns the token to hand to the client. */
export async function createPendingLogin(
  q: Queryable,
  input: { userId: string | null; purpose: PendingPurpose; challenge?: string },
): Promise<{ token: string; expiresAt: Date }> {
  const token = randomToken();
  const [row] = await q.query<{ expires_at: Date }>(
    `INSERT INTO pending_logins (token_hash, user_id, purpose, challenge, expires_at)
     VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5::int)) RETURNING expires_at`,
    [await hashToken(token), input.userId, input.purpose, input.challenge ?? null, PENDING_LOGIN_TTL_SECONDS],
  );
  // Old rows are useless; sweeping here keeps the table small without a job of its own.
  await q.query("DELETE FROM pending_logins WHERE expires_at < now() - interval '1 hour'");
  return { token, expiresAt: new Date(row.expires_at) };
}

/** The live (unused, unexpired, not failed out) pending login of `token` for `purpose`, or undefined. */
export async function findPendingLogin(
  q: Queryable,
  token: string,
  purpose: PendingPurpose,
): Promise<PendingLogin | undefined> {
  if (!isWellFormedToken(token)) return undefined;
  const row = await queryOne<
    { id: string; user_id: string | null; challenge: string | null; expires_at: Date }
  >(
    q,
    `SELECT id, user_id, challenge, expires_at FROM pending_logins
      WHERE token_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > now() AND failures < $3`,
    [await hashToken(token), purpose, PENDING_LOGIN_MAX_FAILURES],
  );
  return row &&
    { id: row.id, userId: row.user_id, challenge: row.challenge, expiresAt: new Date(row.expires_at) };
}

/** Uses the pending login up; false when another request did first (or it died meanwhile). */
export async function consumePendingLogin(q: Queryable, id: string): Promise<boolean> {
  const rows = await q.query(
    `UPDATE pending_logins SET used_at = now()
      WHERE id = $1 AND used_at IS NULL AND expires_at > now() AND failures < $2 RETURNING id`,
    [id, PENDING_LOGIN_MAX_FAILURES],
  );
  return rows.length > 0;
}

/** Counts a wrong code; returns how many tries are left. */
export async function failPendingLogin(q: Queryable, id: string): Promise<number> {
  const [row] = await q.query<{ failures: number }>(
    "UPDATE pending_logins SET failures = failures + 1 WHERE id = $1 RETURNING failures",
    [id],
  );
  return Math.max(0, PENDING_LOGIN_MAX_FAILURES - (row?.failures ?? PENDING_LOGIN_MAX_FAILURES));
}
