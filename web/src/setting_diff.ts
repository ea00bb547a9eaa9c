/**
 * Policy content as settings a person reads: each top-level setting by the label its editor shows (the
 * browser catalogue, else the .proto comment's field name), its value in one line, and what changed between
 * two contents setting by setting (old → new). Lists of entries (dconf keys, polkit rules, firewall zones…)
 * are compared entry by entry, an entry known by its identifying fields (schema and key, name, id…), so an
 * edited entry reads as one change rather than a removal and an addition. Free of DOM and Lit: the review
 * step, the revision diff and the version history use it, and it is tested without a browser.
 */
import { getPolicyType } from "../../shared/policy_types/mod.ts";
import type { JsonObject, JsonValue } from "./content.ts";
import { editorFor } from "./editors/mod.ts";
import { fieldMeta, humanize, type ProtoDocs } from "./editors/form_model.ts";
import { enumsOf, enumValueLabel } from "./editors/enum_labels.ts";
import docsJson from "./editors/proto_docs.gen.json" with { type: "json" };

const DOCS = docsJson as unknown as ProtoDocs;

/** One setting of a content. */
export interface Setting {
  /** The key in the stored JSON (json_name; `additional.<Key>` for a free-form browser key). */
  key: string;
  /** What the editor calls it. */
  label: string;
  /** The value in one line. */
  text: string;
}

/** One changed entry of a list setting. */
export interface EntryChange {
  kind: "added" | "removed" | "changed";
  /** The entry's identity (or its whole text when it has none). */
  entry: string;
  from?: string;
  to?: string;
}

/** One changed setting. */
export interface SettingChange {
  key: string;
  label: string;
  kind: "added" | "removed" | "changed";
  /** The value before (absent when added). */
  from?: string;
  /** The value after (absent when removed). */
  to?: string;
  /** For a list of entries: which entries changed. */
  entries?: EntryChange[];
}

/** Fields that name an entry of a list, in the order they identify it. */
const IDENTITY_FIELDS = [
  "schemaId",
  "key",
  "name",
  "id",
  "appId",
  "ref",
  "zone",
  "path",
  "section",
  "group",
  "user",
  "actionIds",
];

/** The label the editor gives top-level setting `key` of `type` (the key itself for an unknown type). */
export function settingLabel(type: string, key: string): string {
  const def = getPolicyType(type);
  const hints = editorFor(type).hints;
  const field = def?.schema.fields.find((f) => f.jsonName === key);
  if (!def || !field) return key.startsWith("additional.") ? key.slice("additional.".length) : humanize(key);
  return fieldMeta(
    { catalogue: hints.catalogue, docs: DOCS, escapeHatch: hints.escapeHatch },
    { message: def.schema, field, rule: key },
  ).label;
}

/** Enum constant → the label the form shows for it, for every enum of a type's content message. */
type EnumLabels = ReadonlyMap<string, string>;

const enumLabelCache = new Map<string, EnumLabels>();

function enumLabels(type: string): EnumLabels {
  let labels = enumLabelCache.get(type);
  if (!labels) {
    const def = getPolicyType(type);
    const map = new Map<string, string>();
    for (const e of def ? enumsOf(def.schema) : []) {
      for (const v of e.values) map.set(v.name, enumValueLabel(e, v.name));
    }
    enumLabelCache.set(type, labels = map);
  }
  return labels;
}

/**
 * A value in one line: scalars as they are (enum constants by their label), lists joined, objects as
 * `field: value` pairs.
 */
export function valueText(value: JsonValue | undefined, labels: EnumLabels = new Map(), depth = 0): string {
  if (value === undefined || value === null) return "(none)";
  if (typeof value === "string") return value === "" ? '""' : labels.get(value) ?? value;
  if (typeof value === "boolean") return value ? "on" : "off";
  if (typeof value === "number") return String(value);
  if (depth > 2) return "…";
  if (Array.isArray(value)) {
    return value.length === 0 ? "(empty list)" : value.map((v) => valueText(v, labels, depth + 1)).join(", ");
  }
  const entries = Object.entries(value);
  if (entries.length === 0) return "(empty)";
  return entries.map(([k, v]) => `${humanize(k)}: ${valueText(v, labels, depth + 1)}`).join("; ");
}

/** Top-level settings of a content, free-form browser keys (`additional`) listed one by one. */
function flatten(type: string, value: JsonObject): Map<string, JsonValue> {
  const escape = editorFor(type).hints.escapeHatch;
  const out = new Map<string, JsonValue>();
  for (const [k, v] of Object.entries(value)) {
    if (k === escape && v && typeof v === "object" && !Array.isArray(v)) {
      for (const [sub, subValue] of Object.entries(v)) out.set(`${k}.${sub}`, subValue);
    } else {
      out.set(k, v);
    }
  }
  return out;
}

/** Every setting a content sets, in the content's order, labelled. */
export function settingsOf(type: string, value: JsonObject): Setting[] {
  const labels = enumLabels(type);
  return [...flatten(type, value)].map(([key, v]) => ({
    key,
    label: settingLabel(type, key),
    text: valueText(v, labels),
  }));
}

function same(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function identity(entry: JsonValue, labels: EnumLabels): string {
  if (!entry || typeof entry !== "object" || Array.isArray(entry)) return valueText(entry, labels);
  const parts = IDENTITY_FIELDS.filter((f) => entry[f] !== undefined && entry[f] !== "")
    .map((f) => valueText(entry[f], labels));
  return parts.length ? parts.join(" ") : valueText(entry, labels);
}

/** Entry by entry changes of two lists whose entries are objects (empty when they are equal). */
function entryChanges(before: JsonValue[], after: JsonValue[], labels: EnumLabels): EntryChange[] {
  const show = (v: JsonValue | undefined) => valueText(v, labels);
  const index = (list: JsonValue[]) => {
    const map = new Map<string, JsonValue>();
    for (const e of list) {
      let id = identity(e, labels);
      for (let n = 2; map.has(id); n++) id = `${identity(e, labels)} (${n})`;
      map.set(id, e);
    }
    return map;
  };
  const a = index(before);
  const b = index(after);
  const out: EntryChange[] = [];
  for (const [id, e] of a) {
    if (!b.has(id)) out.push({ kind: "removed", entry: id, from: show(e) });
    else if (!same(e, b.get(id))) {
      out.push({ kind: "changed", entry: id, from: show(e), to: show(b.get(id)) });
    }
  }
  for (const [id, e] of b) if (!a.has(id)) out.push({ kind: "added", entry: id, to: show(e) });
  return out;
}

function isEntryList(v: JsonValue | undefined): v is JsonValue[] {
  return Array.isArray(v) && v.length > 0 &&
    v.every((e) => e !== null && typeof e === "object" && !Array.isArray(e));
}

/** What changed from `before` to `after`, setting by setting (settings of `after`'s order, then removed ones). */
export function settingDiff(type: string, before: JsonObject, after: JsonObject): SettingChange[] {
  const labels = enumLabels(type);
  const text = (v: JsonValue | undefined) => valueText(v, labels);
  const a = flatten(type, before);
  const b = flatten(type, after);
  const out: SettingChange[] = [];
  for (const [key, v] of b) {
    const label = settingLabel(type, key);
    if (!a.has(key)) {
      out.push({ key, label, kind: "added", to: text(v) });
      continue;
    }
    const old = a.get(key);
    if (same(old, v)) continue;
    const change: SettingChange = { key, label, kind: "changed", from: text(old), to: text(v) };
    if (isEntryList(old) || isEntryList(v)) {
      change.entries = entryChanges(Array.isArray(old) ? old : [], Array.isArray(v) ? v : [], labels);
    }
    out.push(change);
  }
  for (const [key, v] of a) {
    if (!b.has(key)) out.push({ key, label: settingLabel(type, key), kind: "removed", from: text(v) });
  }
  return out;
}
