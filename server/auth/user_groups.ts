/** User groups and their members. SQL only, no HTTP. */
import { type Queryable, queryOne } from "../db/db.ts";
import { type Page, type PageRequest, selectPage } from "../db/pagination.ts";
import type { User } from "./users.ts";

/** A user group. */
export interface UserGroup {
  id: string;
  name: string;
  description: string;
  member_count: number;
  created_at: Date;
  updated_at: Date;
}

const GROUP_COLUMNS = `g.id, g.name, g.description, g.created_at, g.updated_at,
  (SELECT count(*)::int FROM user_group_members m WHERE m.user_group_id = g.id) AS member_count`;

/** Lists groups by name. */
export async function listUserGroups(q: Queryable, page: PageRequest): Promise<Page<UserGroup>> {
  return await selectPage<UserGroup>(q, {
    columns: GROUP_COLUMNS,
    from: "user_groups g",
    orderBy: "ORDER BY g.name",
    page,
  });
}

/** One group, or undefined. */
export async function getUserGroup(q: Queryable, id: string): Promise<UserGroup | undefined> {
  return await queryOne<UserGroup>(q, `SELECT ${GROUP_COLUMNS} FROM user_groups g WHERE g.id = $1`, [id]);
}

/** Creates a group. */
export async function createUserGroup(
  q: Queryable,
  input: { name: string; description?: string },
): Promise<UserGroup> {
  const [row] = await q.query<{ id: string }>(
    "INSERT INTO user_groups (name, description) VALUES ($1, $2) RETURNING id",
    [input.name, input.description ?? ""],
  );
  return (await getUserGroup(q, row.id))!;
}

/** Updates name and description. */
export async function updateUserGroup(
  q: Queryable,
  group: UserGroup,
  changes: { name?: string; description?: string },
): Promise<UserGroup> {
  await q.query("UPDATE user_groups SET name = $2, description = $3, updated_at = now() WHERE id = $1", [
    group.id,
    changes.name ?? group.name,
    changes.description ?? group.description,
  ]);
  return (await getUserGroup(q, group.id))!;
}

/** Deletes a group (members and bindings go with it). */
export async function deleteUserGroup(q: Queryable, id: string): Promise<boolean> {
  const rows = await q.query("DELETE FROM user_groups WHERE id = $1 RETURNING id", [id]);
  return rows.length > 0;
}

/** Members of a group, by username. */
export async function listMembers(q: Queryable, groupId: string, page: PageRequest): Promise<Page<User>> {
  return await selectPage<User>(q, {
    columns: "u.id, u.username, u.email, u.full_name, u.source, u.enabled, u.created_at, u.updated_at",
    from: "user_group_members m JOIN users u ON u.id = m.user_id",
    where: ["m.user_group_id = $1"],
    params: [groupId],
    orderBy: "ORDER BY u.username",
    page,
  });
}

/** Adds a member; false when already a member. */
export async function addMember(q: Queryable, groupId: string, userId: string): Promise<boolean> {
  const rows = await q.query(
    `INSERT INTO user_group_members (user_group_id, user_id) VALUES ($1, $2)
     ON CONFLICT DO NOTHING RETURNING user_id`,
    [groupId, userId],
  );
  return rows.length > 0;
}

/** Removes a member; false when they were not one. */
export async function removeMember(q: Queryable, groupId: string, userId: string): Promise<boolean> {
  const rows = await q.query(
    "DELETE FROM user_group_members WHERE user_group_id = $1 AND user_id = $2 RETURNING user_id",
    [groupId, userId],
  );
  return rows.length > 0;
}

/** Groups a user belongs to. */
export async function groupsOfUser(q: Queryable, userId: string): Promise<{ id: string; name: string }[]> {
  return await q.query(
    `SELECT g.id, g.name FROM user_group_members m JOIN user_groups g ON g.id = m.user_group_id
      WHERE m.user_id = $1 ORDER BY g.name`,
    [userId],
  );
}
