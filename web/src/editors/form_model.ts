/**
 * The data side of the generated policy forms, free of DOM and Lit so it runs (and is tested) anywhere: what
 * each field shows (from a browser type's catalogue, else from the .proto comments), how the top level is
 * grouped and searched, and immutable edits of protojson values.
 */
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import type { FieldInfo, KeyMergeRule } from "../../../shared/policy_types/browser.ts";
import type { JsonObject, JsonValue } from "../content.ts";

/** A path into a value: object keys and list indices. */
export type Segment = string | number;

/** "DisableAppUpdate" → "Disable app update"; "DNSOverHTTPS" → "DNS over HTTPS"; "schemaId" → "Schema id". */
export function humanize(name: string): string {
  const words = name
    .replace(/_/g, " ")
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2")
    .split(/\s+/)
    .filter(Boolean)
    .map((
      w,
      i,
    ) => (/^[A-Z0-9]{2,}s?$/.test(w)
      ? w
      : i === 0
      ? w[0].toUpperCase() + w.slice(1).toLowerCase()
      : w.toLowerCase())
    );
  return words.join(" ");
}

/** Allowed values a .proto comment lists: `"a", "b" or "c".` or `0 = off, 1 = moderate, 2 = strict.` */
export function optionsFromDoc(doc: string | undefined): Array<{ value: string | number; label: string }> {
  if (!doc) return [];
  const sentence = doc.trim();
  if (/^("[^"]*"(, | or |, or ))+"[^"]*"\.?$/.test(sentence)) {
    return [...sentence.matchAll(/"([^"]*)"/g)].map((m) => ({
      value: m[1],
      label: m[1] === "" ? "(empty)" : m[1],
    }));
  }
  const numbered = [...sentence.matchAll(/(-?\d+) = ([^,.;]+)/g)];
  if (numbered.length >= 2) {
    return numbered.map((m) => ({ value: Number(m[1]), label: `${m[1]}: ${m[2].trim()}` }));
  }
  return [];
}

/** True for values that manage nothing: absent, null, empty list or empty object. */
export function isEmptyValue(v: JsonValue | undefined): boolean {
  if (v === undefined || v === null) return true;
  if (Array.isArray(v)) return v.length === 0;
  if (typeof v === "object") return Object.keys(v).length === 0;
  return false;
}

/** Returns a copy of `root` with the value at `path` replaced (undefined deletes it and prunes empty objects). */
export function setIn(root: JsonObject, path: Segment[], value: JsonValue | undefined): JsonObject {
  const copy = (v: JsonValue | undefined, next: Segment): JsonObject | JsonValue[] =>
    Array.isArray(v) ? [...v] : v && typeof v === "object" ? { ...v } : typeof next === "number" ? [] : {};
  const walk = (node: JsonValue | undefined, i: number): JsonValue | undefined => {
    const key = path[i];
    const container = copy(node, key) as Record<string | number, JsonValue>;
    if (i === path.length - 1) {
      if (value === undefined) {
        if (Array.isArray(container)) (container as JsonValue[]).splice(key as number, 1);
        else delete container[key];
      } else {
        container[key] = value;
      }
    } else {
      const child = walk((node as Record<string | number, JsonValue> | undefined)?.[key], i + 1);
      if (child === undefined || (!Array.isArray(child) && isEmptyValue(child))) {
        if (Array.isArray(container)) container[key] = child ?? {};
        else delete container[key];
      } else {
        container[key] = child;
      }
    }
    return container as JsonValue;
  };
  return (walk(root, 0) ?? {}) as JsonObject;
}

/** A value a choice offers and the text shown for it. */
export interface ChoiceOption {
  value: string | number;
  label: string;
  /**
   * The value is an internal name (a proto enum constant) the person never needs: the option shows its
   * label only. Catalogue options show the value written to the file after the label.
   */
  internal?: boolean;
}

/** The shared registry's catalogue of a browser type: the groups and per-setting metadata the form follows. */
export interface FormCatalogue {
  /** Group names in display order. */
  groups: readonly string[];
  /** Catalogue path (`Key`, `Key.Sub`, `List[].Sub`, `Map.*.Sub`) → metadata. */
  fieldInfo: Readonly<Record<string, FieldInfo>>;
}

/** Comments of the .proto files (`proto_docs.gen.json`): message doc and, per field, doc and group heading. */
export type ProtoDocs = Record<
  string,
  { doc?: string; fields: Record<string, { doc?: string; group?: string }> }
>;

/** Where a form's labels, help and allowed values come from. */
export interface MetaSource {
  /** A browser type's catalogue; preferred over the .proto comments wherever it has an entry. */
  catalogue?: FormCatalogue;
  /** The .proto comments (every type). */
  docs: ProtoDocs;
  /** json_name of the free-form escape hatch (`additional`), shown last in its own group. */
  escapeHatch?: string;
}

/** What the form shows for one field. */
export interface FieldMeta {
  /** json_name of the field (the key in the stored JSON). */
  key: string;
  /** Short name. */
  label: string;
  /** One line of help. */
  description?: string;
  /** Heading the field is listed under (top-level fields). */
  group: string;
  /** Allowed values with their labels (for a list: of each item). */
  options?: readonly ChoiceOption[];
  /** Smallest allowed number. */
  min?: number;
  /** Largest allowed number. */
  max?: number;
  /** Unit of a number. */
  unit?: string;
  /** Value format named by the catalogue (`url`, `comma_list`, …). */
  format?: string;
  /** Google Chrome knows the setting, Chromium does not. */
  chromeOnly: boolean;
  /** Why the setting is deprecated (shown as a warning; still accepted). */
  deprecated?: string;
  /** Why the browser ignores the field: hidden unless stored content sets it. */
  unsupported?: string;
  /** How the setting combines when several policies set it (top-level lists and maps). */
  mergeHint?: string;
  /** Lower-case text the search looks in: label, keys, description, group and the labels of nested settings. */
  searchText: string;
}

/** Heading of the escape hatch's group. */
const OTHER_KEYS_GROUP = "Other policy keys";

/** Sentence explaining a merge rule, or undefined when there is nothing to say. */
export function mergeHint(rule: KeyMergeRule | undefined, collection: boolean): string | undefined {
  switch (rule) {
    case "union":
      return "Lists from several policies are combined (duplicates dropped).";
    case "per-entry":
      return "Entries from several policies are combined; for the same entry the highest-priority policy wins.";
    case "per-member-union":
      return "Lists inside are combined across policies; other values come from the highest-priority policy.";
    default:
      return collection
        ? "Not combined across policies: the highest-priority policy's value is used as a whole."
        : undefined;
  }
}

/** "From 3,600,000 to 2,147,483,647 milliseconds.", or undefined without a range. */
export function rangeText(meta: Pick<FieldMeta, "min" | "max" | "unit">): string | undefined {
  const n = (v: number) => v.toLocaleString("en");
  const unit = meta.unit ? ` ${meta.unit}` : "";
  if (meta.min !== undefined && meta.max !== undefined) {
    return `From ${n(meta.min)} to ${n(meta.max)}${unit}.`;
  }
  if (meta.min !== undefined) return `At least ${n(meta.min)}${unit}.`;
  if (meta.max !== undefined) return `At most ${n(meta.max)}${unit}.`;
  return undefined;
}

/** Catalogue entries below `path` (`Homepage.URL` below `Homepage`, `Bookmarks[].URL` below `Bookmarks`). */
function nestedEntries(catalogue: FormCatalogue, path: string): FieldInfo[] {
  return Object.entries(catalogue.fieldInfo)
    .filter(([k]) => k.startsWith(`${path}.`) || k.startsWith(`${path}[]`))
    .map(([, v]) => v);
}

/**
 * The metadata of `field` of `message` at catalogue path `rule`: the catalogue's entry when the source has
 * one, else the field's .proto comment (labels from the json name, allowed values from the comment).
 */
export function fieldMeta(
  source: MetaSource,
  at: { message: DescMessage; field: DescField; rule: string },
): FieldMeta {
  const { message, field, rule } = at;
  const topLevel = !rule.includes(".") && !rule.includes("[");
  const collection = field.fieldKind === "list" || field.fieldKind === "map";
  const info = source.catalogue?.fieldInfo[rule];
  const doc = source.docs[message.typeName]?.fields[field.name] ?? {};
  const escape = topLevel && field.jsonName === source.escapeHatch;
  const search = (parts: Array<string | undefined>) => parts.filter(Boolean).join("\n").toLowerCase();
  if (info) {
    const nested = nestedEntries(source.catalogue!, rule).filter((e) => !e.unsupported);
    return {
      key: field.jsonName,
      label: info.label,
      description: info.description,
      group: escape ? OTHER_KEYS_GROUP : info.group ?? "Other settings",
      options: info.enum,
      min: info.min,
      max: info.max,
      unit: info.unit,
      format: info.format,
      chromeOnly: info.chromeOnly ?? false,
      deprecated: info.deprecated,
      unsupported: info.unsupported,
      mergeHint: topLevel ? mergeHint(info.merge, collection) : undefined,
      searchText: search([
        info.label,
        field.jsonName,
        field.name,
        info.description,
        info.group,
        ...nested.flatMap((e) => [e.label, e.description]),
      ]),
    };
  }
  const label = humanize(field.jsonName);
  const options = field.fieldKind === "scalar" ? optionsFromDoc(doc.doc) : [];
  return {
    key: field.jsonName,
    label,
    description: doc.doc,
    group: escape ? OTHER_KEYS_GROUP : doc.group ?? "Settings",
    options: options.length ? options : undefined,
    chromeOnly: false,
    searchText: search([label, field.jsonName, field.name, doc.doc, doc.group]),
  };
}

/** True when every word of `filter` occurs in the field's search text (an empty filter matches all). */
export function matchesFilter(meta: FieldMeta, filter: string): boolean {
  return filter.toLowerCase().split(/\s+/).filter(Boolean).every((w) => meta.searchText.includes(w));
}

/** One field as the form lists it. */
export interface FormField {
  field: DescField;
  meta: FieldMeta;
  /** The stored value sets the field. */
  configured: boolean;
}

/**
 * The fields of `message` (at catalogue path `rule`, holding `value`) that the form shows: unsupported fields
 * only when the value sets them, so an admin sees why they are refused and can remove them.
 */
export function visibleFields(
  source: MetaSource,
  at: { message: DescMessage; rule: string; value: JsonValue | undefined },
): FormField[] {
  const { message } = at;
  const object = at.value !== null && typeof at.value === "object" && !Array.isArray(at.value)
    ? at.value as JsonObject
    : {};
  return message.fields.flatMap((field) => {
    const rule = at.rule ? `${at.rule}.${field.jsonName}` : field.jsonName;
    const meta = fieldMeta(source, { message, field, rule });
    const configured = !isEmptyValue(object[field.jsonName]);
    return meta.unsupported && !configured ? [] : [{ field, meta, configured }];
  });
}

/** A heading of the form and its fields. */
export interface FormGroup {
  name: string;
  fields: FormField[];
  /** How many of the group's fields (before filtering) the value sets. */
  configured: number;
  /** How many fields the group has (before filtering). */
  total: number;
}

/** The top level of a form: groups in display order, filtered by a search and "only configured". */
export interface FormModel {
  groups: FormGroup[];
  /** Fields the value sets, over all groups. */
  configured: number;
  /** Fields shown without a filter. */
  total: number;
}

/**
 * Groups the top-level fields of `schema`: in the catalogue's group order for a browser type (escape hatch
 * last), else in the order the .proto file's group headings appear; then keeps the fields matching `filter`
 * (label, key, description) and, with `onlyConfigured`, those the value sets. Empty groups are dropped.
 */
export function formModel(
  source: MetaSource,
  view: { schema: DescMessage; value: JsonObject; filter?: string; onlyConfigured?: boolean },
): FormModel {
  const all = visibleFields(source, { message: view.schema, rule: "", value: view.value });
  const order = [...(source.catalogue?.groups ?? [])];
  for (const f of all) {
    if (!order.includes(f.meta.group) && f.meta.group !== OTHER_KEYS_GROUP) order.push(f.meta.group);
  }
  order.push(OTHER_KEYS_GROUP);
  const groups = order.map((name) => {
    const members = all.filter((f) => f.meta.group === name);
    return {
      name,
      fields: members.filter((f) =>
        (!view.onlyConfigured || f.configured) && matchesFilter(f.meta, view.filter ?? "")
      ),
      configured: members.filter((f) => f.configured).length,
      total: members.length,
    };
  }).filter((g) => g.fields.length > 0);
  return { groups, configured: all.filter((f) => f.configured).length, total: all.length };
}
