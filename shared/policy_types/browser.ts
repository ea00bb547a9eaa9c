/**
 * What the browser types (Firefox, Thunderbird, Chrome, Edge) share: their content is the browser's own policy
 * JSON, described by a catalogue of curated settings. The catalogue is the one source for
 *
 * - the editor: groups in display order and, per setting, label, one-line description, allowed values with
 *   labels, ranges and value formats ({@link BrowserTypeDef.groups}, {@link BrowserTypeDef.fieldInfo});
 * - validation: enumerations, numeric ranges, URL schemes and list item formats (extension ids, URL patterns,
 *   …), checked by the server and again by the agent ({@link checkBrowserPolicy});
 * - the merge on the node: which top-level keys are additive across policies ({@link BrowserTypeDef.mergeRule}).
 *
 * Catalogue keys are paths in the browser's JSON: `Homepage` (top level; needs a group), `Homepage.URL`,
 * `Bookmarks[].URL` (items of a list of objects), `ExtensionSettings.*.installation_mode` (`*` = any map key).
 * The rule of a list of scalars (`URLBlocklist`) applies to each item.
 *
 * The `additional` escape hatch takes any other policy key: keys must look like policy names and must not name a
 * curated setting, so the typed field always wins.
 */
import type { JsonValue, Message } from "@bufbuild/protobuf";
import type { DescMessage } from "@bufbuild/protobuf";
import type { GenMessage } from "@bufbuild/protobuf/codegenv2";
import { defineType, messageJson, type PolicyTypeDef } from "./define.ts";
import { joinPath } from "./json_guard.ts";
import { type IssueList, multiLineText } from "./sanitizers.ts";
import { type FieldFormat, formatChecker } from "./browser_catalogue/formats.ts";

export type { FieldFormat } from "./browser_catalogue/formats.ts";

/**
 * How a top-level key combines when several policies of one type reach a node:
 *
 * - `replace` (default): the value of the policy with the highest priority is used as a whole; equal
 *   priorities are settled by the smaller policy id;
 * - `union`: a list; the items of every policy are joined, duplicates dropped, higher priority first;
 * - `per-entry`: an object whose entries (extension ids, preference names) are merged one by one, each
 *   like `replace`;
 * - `per-member-union`: an object whose list members are `union` and other members `replace`.
 */
export type KeyMergeRule = "replace" | "union" | "per-entry" | "per-member-union";

/** One allowed value of an enumerated setting and the text a form shows for it. */
export interface EnumOption {
  /** The value as written to the browser's file. */
  value: string | number;
  /** What the value means, for a form. */
  label: string;
}

/** Metadata of one setting (see the module documentation for the key syntax). */
export interface FieldInfo {
  /** Topic the setting is listed under; required for top-level settings, one of {@link BrowserTypeDef.groups}. */
  group?: string;
  /** Short name for a form. */
  label: string;
  /** One line saying what the setting does. */
  description: string;
  /** Allowed values (for a list: of each item; for `comma_list`: of each comma-separated part). */
  enum?: readonly EnumOption[];
  /** Smallest allowed number. */
  min?: number;
  /** Largest allowed number. */
  max?: number;
  /** Unit of a number, e.g. `seconds`. */
  unit?: string;
  /** Format of a string (for a list: of each item). */
  format?: FieldFormat;
  /** URL schemes for `url` and `search_url` (default http, https). */
  schemes?: readonly string[];
  /** An empty string is a documented value (e.g. "no page"), so it passes the format check. */
  allowEmpty?: boolean;
  /** For a map: format of its keys. */
  keyFormat?: FieldFormat;
  /** How the key merges across policies (top level only; default `replace`). */
  merge?: KeyMergeRule;
  /** Chrome type: Google Chrome only; Chromium does not know it (the agent does not write it for Chromium). */
  chromeOnly?: boolean;
  /** Why the setting is deprecated or not honoured by current browser versions (shown; still accepted). */
  deprecated?: string;
  /**
   * Why the browser ignores this field (it exists only because field numbers are permanent); setting it is
   * refused with this text as the fix, and editors hide it.
   */
  unsupported?: string;
}

/** Allowed values and URL schemes by catalogue path (the editor's hints). */
export interface BrowserRules {
  /** Path pattern → allowed values. */
  enums: Record<string, readonly (string | number)[]>;
  /** Path pattern → allowed URL schemes. */
  urls: Record<string, readonly string[]>;
}

/** A browser type's catalogue. */
export interface BrowserCatalogue {
  /** Group names in display order. */
  groups: readonly string[];
  /** Path → metadata; top-level settings in display order. */
  fields: Readonly<Record<string, FieldInfo>>;
  /** Checks spanning several settings (e.g. minimum TLS version not above the maximum). */
  crossCheck?: (json: Readonly<Record<string, JsonValue>>, issues: IssueList) => void;
}

/** A browser policy type: a {@link PolicyTypeDef} plus its catalogue. */
export interface BrowserTypeDef<M = unknown> extends PolicyTypeDef<M> {
  /** Group names in display order. */
  readonly groups: readonly string[];
  /** Catalogue path → metadata (see the module documentation). */
  readonly fieldInfo: Readonly<Record<string, FieldInfo>>;
  /** Allowed values and URL schemes by path, derived from {@link fieldInfo}. */
  readonly rules: BrowserRules;
  /** How a top-level key merges across policies; keys outside the catalogue are `replace`. */
  mergeRule(key: string): KeyMergeRule;
}

/** Whether a registered type is a browser type (carries a catalogue). */
export function isBrowserType(def: PolicyTypeDef | undefined): def is BrowserTypeDef {
  return def !== undefined && "fieldInfo" in def && "mergeRule" in def;
}

/**
 * Keys allowed in `additional`: what browser policy names look like (a letter, then letters, digits and `_`,
 * at most 128 characters). The agent applies the same pattern to every key it writes.
 */
export const ADDITIONAL_KEY = /^[A-Za-z][A-Za-z0-9_]{0,127}$/;

/** Stamps `group` on every top-level setting of a section. */
export function section(group: string, fields: Record<string, FieldInfo>): Record<string, FieldInfo> {
  return Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, { ...v, group }]));
}

/** Shorthand for a {@link FieldInfo}. */
export function field(label: string, description: string, extra: Partial<FieldInfo> = {}): FieldInfo {
  return { label, description, ...extra };
}

/** Enum options from `[value, label]` pairs. */
export function options(...pairs: [string | number, string][]): EnumOption[] {
  return pairs.map(([value, label]) => ({ value, label }));
}

/** Replaces `{app}` in the labels and descriptions of `entries`. */
export function forApp(entries: Record<string, FieldInfo>, app: string): Record<string, FieldInfo> {
  return Object.fromEntries(
    Object.entries(entries).map(([k, v]) => [k, {
      ...v,
      label: v.label.replaceAll("{app}", app),
      description: v.description.replaceAll("{app}", app),
    }]),
  );
}

/** The entries of `source` named in `keys`, in that order (throws on a typo, so tables cannot drift). */
export function pick(source: Record<string, FieldInfo>, keys: readonly string[]): Record<string, FieldInfo> {
  return Object.fromEntries(keys.map((k) => {
    if (!Object.hasOwn(source, k)) throw new Error(`catalogue has no entry ${k}`);
    return [k, source[k]];
  }));
}

/** Every entry of `source` below one of `parents` (`Proxy.Mode` for parent `Proxy`). */
export function below(
  source: Record<string, FieldInfo>,
  parents: readonly string[],
): Record<string, FieldInfo> {
  return Object.fromEntries(
    Object.entries(source).filter(([k]) =>
      parents.some((p) => k.startsWith(`${p}.`) || k.startsWith(`${p}[]`))
    ),
  );
}

/** Spec of {@link defineBrowserType}. */
export interface BrowserTypeSpec<M extends Message> {
  /** Wire name, e.g. `Chrome`. */
  wireName: string;
  /** How the console names the type. */
  label: string;
  /** One line: what a policy of this type manages. */
  description: string;
  /** The content message (json_name = the browser's policy key). */
  schema: GenMessage<M>;
  /** Member name of `Policy.typed_content` in protobuf-es. */
  typedContentCase: string;
  /** Groups, per-setting metadata and cross-field checks. */
  catalogue: BrowserCatalogue;
}

/** Builds a browser type from its message and catalogue. */
export function defineBrowserType<M extends Message & { additional: Record<string, unknown> }>(
  spec: BrowserTypeSpec<M>,
): BrowserTypeDef<M> {
  const { catalogue } = spec;
  const compiled = compile(catalogue);
  const base = defineType<M>({
    wireName: spec.wireName,
    label: spec.label,
    description: spec.description,
    schema: spec.schema,
    typedContentCase: spec.typedContentCase,
    merge: "priority_merge",
    names: "json",
    check: (message, issues) => checkBrowserPolicy(spec.schema, message, { catalogue, compiled }, issues),
  });
  const rules: BrowserRules = { enums: {}, urls: {} };
  for (const [path, info] of Object.entries(catalogue.fields)) {
    if (info.enum) rules.enums[path] = info.enum.map((o) => o.value);
    if (info.format === "url" || info.format === "search_url") {
      rules.urls[path] = info.schemes ?? ["http", "https"];
    }
  }
  return {
    ...base,
    groups: catalogue.groups,
    fieldInfo: catalogue.fields,
    rules,
    mergeRule: (key) =>
      (Object.hasOwn(catalogue.fields, key) ? catalogue.fields[key].merge : undefined) ?? "replace",
  };
}

type Segment = string; // an object key, or "[]" for an array element

interface CompiledRule {
  pattern: Segment[];
  info: FieldInfo;
}

function parsePattern(pattern: string): Segment[] {
  return pattern.split(".").flatMap((part) => {
    const out: Segment[] = [];
    const base = part.replace(/(\[\])+$/, "");
    if (base) out.push(base);
    for (let i = base.length; i < part.length; i += 2) out.push("[]");
    return out;
  });
}

function compile(catalogue: BrowserCatalogue): CompiledRule[] {
  return Object.entries(catalogue.fields).map(([p, info]) => ({ pattern: parsePattern(p), info }));
}

function matches(pattern: Segment[], segments: Segment[]): boolean {
  return pattern.length === segments.length &&
    pattern.every((p, i) => p === segments[i] || (p === "*" && segments[i] !== "[]"));
}

/** The rule for a value at `segments`; list items fall back to the rule of their list. */
function ruleAt(rules: CompiledRule[], segments: Segment[]): FieldInfo | undefined {
  let path = segments;
  while (true) {
    const rule = rules.find((r) => matches(r.pattern, path));
    if (rule) return rule.info;
    if (path[path.length - 1] !== "[]") return undefined;
    path = path.slice(0, -1);
  }
}

function describeAllowed(info: FieldInfo): string {
  const values = info.enum!.map((o) => JSON.stringify(o.value)).join(", ");
  const numbered = info.enum!.filter((o) => typeof o.value === "number");
  return numbered.length === 0
    ? values
    : `${values} (${numbered.map((o) => `${o.value} = ${o.label}`).join(", ")})`;
}

/**
 * Checks a browser policy message against its catalogue: at least one setting; `additional` keys look like
 * policy names and do not repeat a curated setting; no control characters except in free text; and every
 * value against the enum, range and format of its setting.
 */
export function checkBrowserPolicy<M extends Message & { additional: Record<string, unknown> }>(
  schema: GenMessage<M>,
  message: M,
  type: { catalogue: BrowserCatalogue; compiled?: CompiledRule[] },
  issues: IssueList,
): void {
  const json = messageJson(schema, message) as Record<string, JsonValue>;
  if (!hasSetting(json)) {
    issues.add("", "policy content needs at least one setting");
    return;
  }
  checkAdditionalKeys(schema, Object.keys(message.additional), issues);
  const rules = type.compiled ?? compile(type.catalogue);
  const stack: { value: JsonValue; path: string; segments: Segment[] }[] = [{
    value: json,
    path: "",
    segments: [],
  }];
  while (stack.length > 0) {
    const { value, path, segments } = stack.pop()!;
    const inAdditional = segments[0] === "additional";
    const unsupported = inAdditional
      ? undefined
      : rules.find((r) => matches(r.pattern, segments))?.info.unsupported;
    if (unsupported) {
      issues.add(path, `is ignored by the browser: ${unsupported}`);
      continue;
    }
    if (Array.isArray(value)) {
      value.forEach((v, i) => stack.push({ value: v, path: `${path}[${i}]`, segments: [...segments, "[]"] }));
      continue;
    }
    if (value !== null && typeof value === "object") {
      const keyFormat = inAdditional ? undefined : ruleAt(rules, segments)?.keyFormat;
      for (const [key, v] of Object.entries(value)) {
        const child = joinPath(path, key);
        if (keyFormat) {
          const problem = formatChecker(keyFormat)(key);
          if (problem) issues.add(child, `key ${JSON.stringify(key)} ${problem}`);
        }
        stack.push({ value: v as JsonValue, path: child, segments: [...segments, key] });
      }
      continue;
    }
    if (typeof value === "string") {
      const problem = multiLineText(value);
      if (problem) {
        issues.add(path, problem);
        continue;
      }
    }
    if (inAdditional) continue;
    const info = ruleAt(rules, segments);
    if (info) checkValue(info, value, path, issues);
  }
  type.catalogue.crossCheck?.(json, issues);
}

function checkValue(info: FieldInfo, value: JsonValue, path: string, issues: IssueList): void {
  if (info.enum && info.format !== "comma_list") {
    if (!info.enum.some((o) => o.value === value)) {
      issues.add(path, `must be one of ${describeAllowed(info)}`);
      return;
    }
  }
  if (typeof value === "number") {
    if (info.min !== undefined && value < info.min) {
      issues.add(path, `must be at least ${info.min}${info.unit ? ` ${info.unit}` : ""}`);
    } else if (info.max !== undefined && value > info.max) {
      issues.add(path, `must be at most ${info.max}${info.unit ? ` ${info.unit}` : ""}`);
    }
    return;
  }
  if (typeof value !== "string" || !info.format) return;
  if (value === "" && info.allowEmpty) return;
  const problem = formatChecker(info.format, {
    schemes: info.schemes,
    allowed: info.enum?.map((o) => o.value),
  })(value);
  if (problem) issues.add(path, problem);
}

function checkAdditionalKeys(schema: DescMessage, keys: string[], issues: IssueList): void {
  const curated = new Map<string, string>();
  for (const f of schema.fields) {
    if (f.jsonName === "additional") continue;
    curated.set(f.jsonName.toLowerCase(), f.jsonName);
    curated.set(f.name.toLowerCase(), f.jsonName);
  }
  for (const key of keys) {
    const field = joinPath("additional", key);
    if (!ADDITIONAL_KEY.test(key)) {
      issues.add(
        field,
        "must look like a policy name: a letter, then letters, digits and '_' (at most 128 characters)",
      );
      continue;
    }
    const typed = curated.get(key.toLowerCase());
    if (typed === undefined) continue;
    issues.add(
      field,
      typed === key || schema.fields.some((f) => f.name === key)
        ? `"${key}" is a curated setting; remove it from additional and set the typed field ${typed} instead`
        : `"${key}" differs only in letter case from the curated setting ${typed}; browsers match policy names exactly, so set the typed field ${typed} instead`,
    );
  }
}

/** True when the JSON sets anything: a scalar, or a non-empty list or object that (recursively) sets something. */
export function hasSetting(value: JsonValue): boolean {
  if (Array.isArray(value)) return value.length > 0;
  if (value !== null && typeof value === "object") {
    return Object.values(value).some((v) => hasSetting(v as JsonValue));
  }
  return true;
}

/** Rank of a TLS version name (`tls1` < `tls1.1` < …), for minimum/maximum checks. */
export const TLS_VERSIONS = ["tls1", "tls1.1", "tls1.2", "tls1.3"] as const;

/** Adds an issue when a minimum TLS version is above the maximum. */
export function checkTlsRange(
  json: Readonly<Record<string, JsonValue>>,
  minKey: string,
  maxKey: string,
  issues: IssueList,
): void {
  const min = TLS_VERSIONS.indexOf(json[minKey] as (typeof TLS_VERSIONS)[number]);
  const max = TLS_VERSIONS.indexOf(json[maxKey] as (typeof TLS_VERSIONS)[number]);
  if (min >= 0 && max >= 0 && min > max) {
    issues.add(
      minKey,
      `${json[minKey]} is above ${maxKey} ${json[maxKey]}; lower ${minKey} or raise ${maxKey}`,
    );
  }
}

/** Adds an issue naming `key` when `value` of `when` needs `key` and the policy does not set it. */
export function requireWhen(
  json: Readonly<Record<string, JsonValue>>,
  check: { when: string; is: JsonValue; needs: string; hint: string },
  issues: IssueList,
): void {
  const lookup = (path: string) =>
    path.split(".").reduce<JsonValue | undefined>(
      (node, part) =>
        node !== null && typeof node === "object" && !Array.isArray(node) ? node[part] : undefined,
      json,
    );
  if (lookup(check.when) !== check.is) return;
  const needed = lookup(check.needs);
  if (needed === undefined || needed === "" || (Array.isArray(needed) && needed.length === 0)) {
    issues.add(check.needs, `is required when ${check.when} is ${JSON.stringify(check.is)}: ${check.hint}`);
  }
}
