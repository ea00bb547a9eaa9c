/** Writes audit events into `audit_logs`. */
import type { Queryable } from "../db/db.ts";
import type { AuditEvent } from "./event.ts";

/** An event as stored, with its time and row id. */
export interface StoredAuditEvent extends AuditEvent {
  id: number;
  createdAt: Date;
}

/** Inserts one (already redacted) event and returns it with its id and time. */
export async function insertAuditEvent(q: Queryable, event: AuditEvent): Promise<StoredAuditEvent> {
  // Actor and node ids are stored only while they exist: a row about a just-deleted user must still be written.
  const [row] = await q.query<{ id: number; created_at: Date }>(
    `INSERT INTO audit_logs
       (user_id, username, node_id, action, resource_type, resource_id, resource_name, outcome, source_ip, details)
     VALUES ((SELECT id FROM users WHERE id = $1::uuid), $2, (SELECT id FROM nodes WHERE id = $3::uuid),
             $4, $5, $6, $7, $8, $9, ($10::text)::jsonb)
     RETURNING id, created_at`,
    [
      uuidOrNull(event.actor.userId),
      event.actor.username ?? "",
      uuidOrNull(event.actor.nodeId),
      event.action,
      event.resource.type,
      event.resource.id ?? "",
      event.resource.name ?? "",
      event.outcome,
      event.sourceIp ?? "",
      JSON.stringify(storable(event.details ?? {})),
    ].map((v) => typeof v === "string" ? storable(v) : v),
  );
  return { ...event, id: row.id, createdAt: row.created_at };
}

/** Characters PostgreSQL text and jsonb cannot hold: NUL and UTF-16 surrogates that are not paired. */
// deno-lint-ignore no-control-regex
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * The event with every string PostgreSQL cannot store made storable (U+FFFD in place of NUL and lone
 * surrogates). The edge refuses such strings, so this is the last line: a row about a hostile request is
 * never lost because of what the request contained.
 */
function storable<T>(value: T): T {
  if (typeof value === "string") return value.replace(UNSTORABLE, "\ufffd") as T;
  if (Array.isArray(value)) return value.map(storable) as T;
  if (value && typeof value === "object" && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [storable(k), storable(v)])) as T;
  }
  return value;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function uuidOrNull(id: string | undefined): string | null {
  return id && UUID.test(id) ? id : null;
}
