/**
 * svc's side of directory users: the `source = 'ldap'` user row created at the first login and refreshed
 * at each (name, e-mail, mapped user groups), and disabling it when the directory no longer has the person.
 * SQL only.
 *
 * @module
 */
import { type Queryable, queryOne } from "../db/db.ts";
import type { Logger } from "../core/log.ts";
import type { LdapIdentity } from "./ldap.ts";
import { getUser, type User, USERNAME_PATTERN } from "./users.ts";
import { revokeAllSessions } from "./sessions.ts";

/**
 * Creates or refreshes the svc user of a directory identity and syncs the mapped user groups: for every svc
 * group named in `groupMap`, the user is a member exactly when one of its directory groups maps to it.
 * Returns undefined when the name is taken by a local (or service) account, which is never merged.
 */
export async function syncLdapUser(
  q: Queryable,
  identity: LdapIdentity,
  groupMap: ReadonlyMap<string, string>,
  log: Logger,
): Promise<User | undefined> {
  if (!new RegExp(USERNAME_PATTERN).test(identity.username)) return undefined;
  const existing = await queryOne<{ id: string; source: string }>(
    q,
    "SELECT id, source FROM users WHERE lower(username) = lower($1)",
    [identity.username],
  );
  if (existing && existing.source !== "ldap") return undefined;
  let id: string;
  if (existing) {
    id = existing.id;
    await q.query("UPDATE users SET email = $2, full_name = $3, updated_at = now() WHERE id = $1", [
      id,
      identity.email.slice(0, 254),
      identity.fullName.slice(0, 200),
    ]);
  } else {
    const [row] = await q.query<{ id: string }>(
      `INSERT INTO users (username, password_hash, email, full_name, source)
       VALUES ($1, '', $2, $3, 'ldap') RETURNING id`,
      [identity.username, identity.email.slice(0, 254), identity.fullName.slice(0, 200)],
    );
    id = row.id;
  }
  const wanted = new Map<string, boolean>();
  for (const [directoryGroup, svcGroup] of groupMap) {
    wanted.set(svcGroup, (wanted.get(svcGroup) ?? false) || identity.groups.includes(directoryGroup));
  }
  for (const [svcGroup, member] of wanted) {
    const group = await queryOne<{ id: string }>(q, "SELECT id FROM user_groups WHERE name = $1", [svcGroup]);
    if (!group) {
      log.warn("ldap: ldap.group_map names a user group svc does not have; create it", { group: svcGroup });
      continue;
    }
    if (member) {
      await q.query(
        "INSERT INTO user_group_members (user_group_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        [group.id, id],
      );
    } else {
      await q.query("DELETE FROM user_group_members WHERE user_group_id = $1 AND user_id = $2", [
        group.id,
        id,
      ]);
    }
  }
  return await getUser(q, id);
}

/** Disables the directory user `username` (gone from the directory, or filtered out); true when it was. */
export async function disableLdapUser(q: Queryable, username: string): Promise<boolean> {
  const rows = await q.query<{ id: string }>(
    `UPDATE users SET enabled = false, updated_at = now()
      WHERE lower(username) = lower($1) AND source = 'ldap' AND enabled RETURNING id`,
    [username],
  );
  for (const row of rows) await revokeAllSessions(q, row.id);
  return rows.length > 0;
}
