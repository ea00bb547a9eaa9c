/**
 * What a change changed, for its audit row: `details.changes` holds `{field: {from, to}}` for every tracked
 * field whose value differs (lists of names as `{added, removed}`; policy contents as the settings added,
 * removed and changed), so the audit log says "priority: 0 → 10" instead of only "update binding <uuid>".
 */
import type { RouteContext } from "./route.ts";

/** One changed field. */
export type FieldChange =
  | { from: unknown; to: unknown }
  | { added: string[]; removed: string[] }
  | { added: string[]; removed: string[]; changed: string[] };

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function asDate(value: unknown): unknown {
  return value instanceof Date ? value.toISOString() : value;
}

/** Top-level settings of a content (JSON object text); {} when it is not one. */
function settingsOf(content: unknown): Record<string, unknown> {
  if (typeof content !== "string") return {};
  try {
    const parsed = JSON.parse(content);
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

/** The settings (top-level keys) of two policy contents that were added, removed or changed. */
export function settingChanges(
  before: unknown,
  after: unknown,
): { added: string[]; removed: string[]; changed: string[] } {
  const a = settingsOf(before);
  const b = settingsOf(after);
  return {
    added: Object.keys(b).filter((k) => !(k in a)).sort(),
    removed: Object.keys(a).filter((k) => !(k in b)).sort(),
    changed: Object.keys(b).filter((k) => k in a && !same(a[k], b[k])).sort(),
  };
}

/**
 * The tracked `fields` that differ between `before` and `after`. Arrays of strings are compared as sets
 * (`{added, removed}`); fields named in `contentFields` hold policy content and are compared by setting.
 */
export function fieldChanges(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
  fields: readonly string[],
  options: { contentFields?: readonly string[] } = {},
): Record<string, FieldChange> {
  const out: Record<string, FieldChange> = {};
  for (const field of fields) {
    const from = asDate(before[field]);
    const to = asDate(after[field]);
    if (same(from, to)) continue;
    if (options.contentFields?.includes(field)) {
      const settings = settingChanges(from, to);
      if (settings.added.length || settings.removed.length || settings.changed.length) out[field] = settings;
    } else if (Array.isArray(from) && Array.isArray(to)) {
      const added = to.filter((x) => !from.includes(x)).map(String).sort();
      const removed = from.filter((x) => !to.includes(x)).map(String).sort();
      if (added.length || removed.length) out[field] = { added, removed };
    } else {
      out[field] = { from, to };
    }
  }
  return out;
}

/** Adds the differences of `fields` to the request's audit details (`details.changes`). */
export function auditChanges(
  c: RouteContext,
  change: { before: object; after: object; fields: readonly string[]; contentFields?: readonly string[] },
): void {
  const changes = fieldChanges(
    change.before as Record<string, unknown>,
    change.after as Record<string, unknown>,
    change.fields,
    { contentFields: change.contentFields },
  );
  if (Object.keys(changes).length === 0) return;
  const details = c.get("auditDetails") ?? {};
  const previous = (details.changes ?? {}) as Record<string, FieldChange>;
  c.set("auditDetails", { ...details, changes: { ...previous, ...changes } });
}
