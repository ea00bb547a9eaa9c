/** Users: local accounts, their profile and enabled flag. SQL only; no HTTP. */
import { type Queryable, queryOne } from "../db/db.ts";
import { likePattern, type Page, type PageRequest, Params, selectPage } from "../db/pagination.ts";
import { hashPassword } from "./password.ts";
import { revokeAllSessions } from "./sessions.ts";

/** A user as the API shows it (never the password hash). */
export interface User {
  id: string;
  username: string;
  email: string;
  full_name: string;
  source: string;
  enabled: boolean;
  created_at: Date;
  updated_at: Date;
}

/** A user with what login needs. */
export interface UserWithSecret extends User {
  password_hash: string;
}

const COLUMNS = "id, username, email, full_name, source, enabled, created_at, updated_at";

/** Username rule (also enforced by the schema's CHECK). */
export const USERNAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$";

/** Creates a local user; the password is hashed here. */
export async function createUser(
  q: Queryable,
  input: { username: string; password: string; email?: string; fullName?: string; enabled?: boolean },
): Promise<User> {
  const hash = await hashPassword(input.password);
  const [row] = await q.query<User>(
    `INSERT INTO users (username, password_hash, email, full_name, enabled)
     VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}`,
    [input.username, hash, input.email ?? "", input.fullName ?? "", input.enabled ?? true],
  );
  return row;
}

/** One user, or undefined. */
export async function getUser(q: Queryable, id: string): Promise<User | undefined> {
  return await queryOne<User>(q, `SELECT ${COLUMNS} FROM users WHERE id = $1`, [id]);
}

/** A user with the hash, by exact username (login). */
export async function findUserForLogin(q: Queryable, username: string): Promise<UserWithSecret | undefined> {
  return await queryOne<UserWithSecret>(
    q,
    `SELECT ${COLUMNS}, password_hash FROM users WHERE username = $1`,
    [username],
  );
}

/** A user's hash by id (own password change). */
export async function passwordHashOf(q: Queryable, id: string): Promise<string | undefined> {
  const row = await queryOne<{ password_hash: string }>(q, "SELECT password_hash FROM users WHERE id = $1", [
    id,
  ]);
  return row?.password_hash;
}

/** Lists users ordered by username; `search` matches username, email or full name (case-insensitive). */
export async function listUsers(
  q: Queryable,
  options: { search?: string; enabled?: boolean; page: PageRequest },
): Promise<Page<User>> {
  const params = new Params();
  const where: string[] = [];
  if (options.search) {
    const like = params.add(likePattern(options.search));
    where.push(
      `(username ILIKE ${like} ESCAPE '\\' OR email ILIKE ${like} ESCAPE '\\' OR full_name ILIKE ${like} ESCAPE '\\')`,
    );
  }
  if (options.enabled !== undefined) where.push(`enabled = ${params.add(options.enabled)}`);
  return await selectPage<User>(q, {
    columns: COLUMNS,
    from: "users",
    where,
    params: params.values,
    orderBy: "ORDER BY username",
    page: options.page,
  });
}

/** Updates profile fields and the enabled flag; disabling revokes every session. */
export async function updateUser(
  q: Queryable,
  id: string,
  changes: { email?: string; fullName?: string; enabled?: boolean },
): Promise<User | undefined> {
  const before = await getUser(q, id);
  if (!before) return undefined;
  const [row] = await q.query<User>(
    `UPDATE users SET email = $2, full_name = $3, enabled = $4, updated_at = now() WHERE id = $1
     RETURNING ${COLUMNS}`,
    [
      id,
      changes.email ?? before.email,
      changes.fullName ?? before.full_name,
      changes.enabled ?? before.enabled,
    ],
  );
  if (before.enabled && !row.enabled) await revokeAllSessions(q, id);
  return row;
}

/** Sets a new password and revokes every session of the user. Returns the revocation cut-off (ms). */
export async function setPassword(q: Queryable, id: string, password: string): Promise<number> {
  const hash = await hashPassword(password);
  await q.query("UPDATE users SET password_hash = $2, updated_at = now() WHERE id = $1", [id, hash]);
  return await revokeAllSessions(q, id);
}

/** Deletes a user; false when there was none. */
export async function deleteUser(q: Queryable, id: string): Promise<boolean> {
  const rows = await q.query("DELETE FROM users WHERE id = $1 RETURNING id", [id]);
  return rows.length > 0;
}
