/**
 * An audit entry in words: what it names (the ids it mentions by the names the server resolved, the bare id
 * once a thing is deleted) and what changed (`details.changes` as before → after; lists as added/removed;
 * policy contents by setting), with the other details the routes record (state moves, versions, members,
 * bulk counts, refusals). Pure, so it is tested without a browser.
 */
import { humanize } from "./editors/form_model.ts";

/** Names of ids, as the audit list answers them. */
export type AuditNames = Record<string, { type: string; name: string }>;

/** What the wording needs of an entry. */
export interface AuditWords {
  details?: Record<string, unknown>;
  names?: AuditNames;
}

/** One changed field: a value (`from` → `to`) or a set of names (`to` lists + added, − removed, ~ changed). */
export interface ChangeLine {
  field: string;
  label: string;
  kind: "value" | "set";
  from: string;
  to: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A value of the details in words: ids by name, lists joined, nothing as "(none)". */
export function detailValue(value: unknown, names: AuditNames = {}): string {
  if (value === null || value === undefined || value === "") return "(none)";
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "string") return UUID.test(value) ? names[value.toLowerCase()]?.name ?? value : value;
  if (Array.isArray(value)) {
    return value.length ? value.map((v) => detailValue(v, names)).join(", ") : "(none)";
  }
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** The changed fields of an entry, each with its before and after in words. */
export function changeLines(entry: AuditWords): ChangeLine[] {
  const changes = entry.details?.changes;
  if (!changes || typeof changes !== "object") return [];
  const names = entry.names ?? {};
  return Object.entries(changes as Record<string, Record<string, unknown>>).map(([field, c]) => {
    const label = field === "content" ? "Settings" : humanize(field);
    if ("from" in c || "to" in c) {
      return { field, label, kind: "value", from: detailValue(c.from, names), to: detailValue(c.to, names) };
    }
    const list = (k: string) => (Array.isArray(c[k]) ? c[k] as string[] : []);
    const parts = [
      ...list("added").map((x) => `+ ${x}`),
      ...list("removed").map((x) => `− ${x}`),
      ...list("changed").map((x) => `~ ${x}`),
    ];
    return {
      field,
      label,
      kind: "set",
      from: list("removed").length || list("changed").length
        ? [...list("removed"), ...list("changed")].join(", ")
        : "",
      to: parts.join(", "),
    };
  });
}

/** The entry's changes and notable details in one line ("" when it records nothing more). */
export function auditSummary(entry: AuditWords): string {
  const d = entry.details ?? {};
  const names = entry.names ?? {};
  const parts: string[] = [];
  for (const c of changeLines(entry)) {
    parts.push(c.kind === "set" ? `${c.label}: ${c.to}` : `${c.label}: ${c.from} → ${c.to}`);
  }
  const v = (k: string) => detailValue(d[k], names);
  if (d.from !== undefined && d.to !== undefined) parts.push(`${v("from")} → ${v("to")}`);
  if (d.from_version !== undefined && d.to_version !== undefined) {
    parts.push(`version ${v("from_version")} → ${v("to_version")}`);
  }
  if (d.restores_version !== undefined) parts.push(`restores version ${v("restores_version")}`);
  if (d.group !== undefined) parts.push(`to ${v("group")}`);
  if (Array.isArray(d.left_groups) && d.left_groups.length) parts.push(`left ${v("left_groups")}`);
  if (Array.isArray(d.added)) parts.push(`added ${v("added")}`);
  if (d.node_id !== undefined) parts.push(`node ${v("node_id")}`);
  if (d.member !== undefined) parts.push(`member ${v("member")}`);
  if (d.member_id !== undefined) parts.push(`member ${v("member_id")}`);
  if (d.requested !== undefined) {
    parts.push(
      `${v("requested")} requested, ${v("succeeded")} done${
        Number(d.failed) ? `, ${v("failed")} failed` : ""
      }`,
    );
  }
  if (d.lockout_override !== undefined) parts.push(`lockout overridden: ${v("lockout_override")}`);
  if (d.message !== undefined && d.error !== undefined) parts.push(`refused: ${v("message")}`);
  else if (d.error !== undefined) parts.push(`refused (${v("error")})`);
  return parts.join("; ");
}
