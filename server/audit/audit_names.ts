/**
 * Names for the ids an audit page mentions, resolved when the page is read: the resource, the agent's node
 * and every id in the details (e.g. a group's new members, a removed member). Rows are written with the
 * resource's name where the route knows it; this fills what they hold only as ids, with the names the things
 * have now. An id whose thing was deleted keeps no name here and is shown as the id. SQL only.
 */
import type { Queryable } from "../db/db.ts";
import type { AuditLogRow } from "./audit_logs.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A resolved id: what it is and its current name. */
export interface AuditName {
  type: string;
  name: string;
}

/** An audit row with the names of the ids it mentions. */
export interface NamedAuditLogRow extends AuditLogRow {
  /** Id → current name and type, for the ids of the row that still exist. */
  names: Record<string, AuditName>;
}

/** Every UUID in a value: strings, arrays and objects, down to a few levels. */
function collectIds(value: unknown, into: Set<string>, depth = 0): void {
  if (depth > 4) return;
  if (typeof value === "string") {
    if (UUID.test(value)) into.add(value.toLowerCase());
  } else if (Array.isArray(value)) {
    for (const v of value) collectIds(v, into, depth + 1);
  } else if (value && typeof value === "object") {
    for (const v of Object.values(value)) collectIds(v, into, depth + 1);
  }
}

/** Current names of `ids` among the named things of the server. */
async function lookUp(q: Queryable, ids: string[]): Promise<Map<string, AuditName>> {
  const out = new Map<string, AuditName>();
  if (ids.length === 0) return out;
  const rows = await q.query<{ id: string; type: string; name: string }>(
    `SELECT id::text, 'policy' AS type, name FROM policies WHERE id = ANY($1::uuid[])
     UNION ALL SELECT id::text, 'node', name FROM nodes WHERE id = ANY($1::uuid[])
     UNION ALL SELECT id::text, 'node_group', name FROM node_groups WHERE id = ANY($1::uuid[])
     UNION ALL SELECT id::text, 'user', username FROM users WHERE id = ANY($1::uuid[])
     UNION ALL SELECT id::text, 'role', name FROM roles WHERE id = ANY($1::uuid[])
     UNION ALL SELECT id::text, 'user_group', name FROM user_groups WHERE id = ANY($1::uuid[])
     UNION ALL SELECT b.id::text, 'binding', p.name || ' → ' || g.name
       FROM policy_bindings b JOIN policies p ON p.id = b.policy_id JOIN node_groups g ON g.id = b.node_group_id
      WHERE b.id = ANY($1::uuid[])`,
    [ids],
  );
  for (const r of rows) out.set(r.id, { type: r.type, name: r.name });
  return out;
}

/**
 * The rows with the names of the ids they mention; a row whose resource name is empty gets its resource's
 * current name (when the resource still exists).
 */
export async function withAuditNames(q: Queryable, rows: AuditLogRow[]): Promise<NamedAuditLogRow[]> {
  const perRow = rows.map((row) => {
    const ids = new Set<string>();
    collectIds(row.resource_id, ids);
    if (row.node_id) ids.add(row.node_id.toLowerCase());
    if (row.user_id) ids.add(row.user_id.toLowerCase());
    collectIds(row.details, ids);
    return ids;
  });
  const names = await lookUp(q, [...new Set(perRow.flatMap((ids) => [...ids]))]);
  return rows.map((row, i) => {
    const own: Record<string, AuditName> = {};
    for (const id of perRow[i]) {
      const name = names.get(id);
      if (name) own[id] = name;
    }
    const resource = own[row.resource_id.toLowerCase()];
    return { ...row, resource_name: row.resource_name || resource?.name || "", names: own };
  });
}
