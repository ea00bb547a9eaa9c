/**
 * API tokens: what a script uses instead of a login. A token is `svcpat_` + 32 random bytes (base64url),
 * shown once; only its SHA-256 is stored. It acts as its user (a person, or a service account: a user with
 * `source = 'service'` and no password) with that user's permissions as they are at each request, so
 * removing a role from the user narrows the token at once. Tokens expire (at most a year) and can be revoked.
 * SQL only; the routes are in `api_token_routes.ts`, authentication in `hooks.ts`.
 */
import { type Queryable, queryOne } from "../db/db.ts";
import { sha256Hex } from "../domain/node_groups.ts";
import { conflictError, notFoundError } from "../core/errors.ts";
import { effectivePermissionsSql } from "./rbac.ts";

/** Prefix that tells an API token from a session JWT (and lets secret scanners find leaked ones). */
export const API_TOKEN_PREFIX = "svcpat_";
/** Longest life of a token. */
export const MAX_API_TOKEN_DAYS = 365;

/** A token as listed (never the secret). */
export interface ApiTokenRecord {
  id: string;
  name: string;
  user_id: string;
  username: string;
  hint: string;
  created_by: string;
  created_at: Date;
  expires_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

const COLUMNS = `t.id, t.name, t.user_id, u.username, t.hint, t.created_by, t.created_at, t.expires_at,
  t.last_used_at, t.revoked_at`;

function randomSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Creates a token for `userId`; the plaintext exists only in the result. */
export async function createApiToken(
  q: Queryable,
  input: { userId: string; name: string; days: number; createdBy: string },
): Promise<{ token: string; record: ApiTokenRecord }> {
  const token = API_TOKEN_PREFIX + randomSecret();
  const taken = await queryOne(q, "SELECT 1 FROM api_tokens WHERE user_id = $1 AND name = $2", [
    input.userId,
    input.name,
  ]);
  if (taken) throw conflictError(`this user already has a token named "${input.name}": pick another name`);
  const [row] = await q.query<{ id: string }>(
    `INSERT INTO api_tokens (user_id, name, token_hash, hint, created_by, expires_at)
     VALUES ($1, $2, $3, $4, $5, now() + make_interval(days => $6)) RETURNING id`,
    [
      input.userId,
      input.name,
      sha256Hex(token),
      token.slice(0, API_TOKEN_PREFIX.length + 4),
      input.createdBy,
      input.days,
    ],
  );
  return { token, record: (await getApiToken(q, row.id))! };
}

/** One token, or undefined. */
export async function getApiToken(q: Queryable, id: string): Promise<ApiTokenRecord | undefined> {
  return await queryOne<ApiTokenRecord>(
    q,
    `SELECT ${COLUMNS} FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.id = $1`,
    [id],
  );
}

/** Tokens of one user, or of everyone when `userId` is undefined; newest first. */
export async function listApiTokens(q: Queryable, userId?: string): Promise<ApiTokenRecord[]> {
  return await q.query<ApiTokenRecord>(
    `SELECT ${COLUMNS} FROM api_tokens t JOIN users u ON u.id = t.user_id
      WHERE $1::uuid IS NULL OR t.user_id = $1::uuid ORDER BY t.created_at DESC, t.id`,
    [userId ?? null],
  );
}

/** Revokes a token (idempotent); throws not_found when there is none. */
export async function revokeApiToken(q: Queryable, id: string): Promise<ApiTokenRecord> {
  const rows = await q.query(
    "UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING id",
    [id],
  );
  if (rows.length === 0) throw notFoundError("API token");
  return (await getApiToken(q, id))!;
}

/**
 * The user a presented token acts as, with the permissions that user holds now; undefined when the token is
 * unknown, revoked, expired, or its user is disabled. Records the time of use.
 */
export async function authenticateApiToken(
  q: Queryable,
  token: string,
): Promise<
  { userId: string; username: string; tokenId: string; tokenName: string; permissions: string[] } | undefined
> {
  if (!token.startsWith(API_TOKEN_PREFIX) || token.length > 200) return undefined;
  const row = await queryOne<
    { id: string; name: string; user_id: string; username: string; permissions: string[] }
  >(
    q,
    `UPDATE api_tokens t SET last_used_at = now()
       FROM users u
      WHERE t.token_hash = $1 AND u.id = t.user_id AND u.enabled
        AND t.revoked_at IS NULL AND t.expires_at > now()
     RETURNING t.id, t.name, t.user_id, u.username, ${effectivePermissionsSql("u.id")} AS permissions`,
    [sha256Hex(token)],
  );
  if (!row) return undefined;
  return {
    userId: row.user_id,
    username: row.username,
    tokenId: row.id,
    tokenName: row.name,
    permissions: row.permissions,
  };
}

/** Creates a service account: a user that has no password and acts only through API tokens. */
export async function createServiceAccount(
  q: Queryable,
  input: { username: string; fullName: string },
): Promise<{ id: string; username: string; full_name: string; source: string; enabled: boolean }> {
  const taken = await queryOne(q, "SELECT 1 FROM users WHERE username = $1", [input.username]);
  if (taken) throw conflictError(`a user named "${input.username}" already exists`);
  const [row] = await q.query<
    { id: string; username: string; full_name: string; source: string; enabled: boolean }
  >(
    `INSERT INTO users (username, password_hash, full_name, source) VALUES ($1, '', $2, 'service')
     RETURNING id, username, full_name, source, enabled`,
    [input.username, input.fullName],
  );
  return row;
}
