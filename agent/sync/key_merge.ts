/**
 * Deterministic priority merge of flat key lists (browser policy files), and per-policy
 * read-back of the merged file.
 *
 * Each policy's top-level keys are split into merge units by the key's rule:
 *
 * - `replace` (default): the whole value is one unit; the first policy in priority order sets
 *   it (priority descending, then policy id ascending: equal priorities are settled by the id,
 *   so the outcome never depends on the order the policies arrived in).
 * - `union`: a list; the lists of all policies are joined, duplicates dropped, in priority order.
 * - `per-entry`: an object whose entries are separate `replace` units (one per extension id or
 *   preference name), so two policies can each add their own entries.
 * - `per-member-union`: an object whose list members are `union` units and other members
 *   `replace` units (e.g. `Extensions.Install`).
 *
 * A value of another shape than its rule expects is one `replace` unit. In a `union`, an item
 * whose identity ({@linkcode MergeOptions.itemIdentity}; default: the item itself) was already
 * given by a higher-priority policy is dropped, so two policies force-installing one extension
 * from different update URLs give one entry, the higher-priority one.
 *
 * @module
 */

import type { KeyMergeRule } from "../../shared/policy_types/browser.ts";
import type { CachedPolicy, ItemResult } from "./types.ts";

export type { KeyMergeRule };

/** Options of {@linkcode mergeKeys}. */
export interface MergeOptions {
  /**
   * Identity of a `union` item under top-level key `key` (e.g. the extension id of
   * `"<id>;<update url>"`); undefined means the item's canonical JSON.
   */
  itemIdentity?: (key: string, item: unknown) => string | undefined;
}

/** A policy and its rendered top-level keys. */
export interface KeyedValues {
  policy: CachedPolicy;
  values: Record<string, unknown>;
}

type UnitKind = "replace" | "union";

interface Unit {
  path: string[];
  kind: UnitKind;
  value: unknown;
}

/** The merged outcome of one unit. */
export interface MergedUnit {
  path: string[];
  kind: UnitKind;
  value: unknown;
  /** The policy whose value won (`replace` units) or that gave the first item (`union` units). */
  winner: CachedPolicy;
  /** `union` units: which policy gave the item of each identity. */
  owners?: Map<string, CachedPolicy>;
}

/** Result of {@linkcode mergeKeys}. */
export interface KeyMerge {
  /** The merged object, keys sorted at every level the merge built. */
  merged: Record<string, unknown>;
  /** Merged units keyed by {@linkcode unitId}. */
  units: Map<string, MergedUnit>;
  /** The units each policy asked for, keyed by policy id. */
  wanted: Map<string, Unit[]>;
  /** The identity function the merge used for `union` items. */
  identify: (key: string, item: unknown) => string;
}

/** Stable identifier of a unit path (entry names may contain dots). */
export function unitId(path: readonly string[]): string {
  return JSON.stringify(path);
}

/** How a unit is named in compliance items: `Key` or `Key.entry`. */
export function unitLabel(path: readonly string[]): string {
  return path.join(".");
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** JSON text with object keys sorted, so equal values have equal text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (isPlainObject(value)) {
    return `{${
      Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(",")
    }}`;
  }
  return JSON.stringify(value) ?? "null";
}

function splitUnits(values: Record<string, unknown>, ruleOf: (key: string) => KeyMergeRule): Unit[] {
  const units: Unit[] = [];
  for (const key of Object.keys(values).sort()) {
    const value = values[key];
    const rule = ruleOf(key);
    if (rule === "union" && Array.isArray(value)) {
      units.push({ path: [key], kind: "union", value });
    } else if ((rule === "per-entry" || rule === "per-member-union") && isPlainObject(value)) {
      for (const sub of Object.keys(value).sort()) {
        const kind: UnitKind = rule === "per-member-union" && Array.isArray(value[sub]) ? "union" : "replace";
        units.push({ path: [key, sub], kind, value: value[sub] });
      }
    } else {
      units.push({ path: [key], kind: "replace", value });
    }
  }
  return units;
}

/**
 * Merges `inputs` (any order: they are sorted here by priority descending, then id ascending)
 * by `ruleOf`.
 */
export function mergeKeys(
  inputs: readonly KeyedValues[],
  ruleOf: (key: string) => KeyMergeRule,
  options: MergeOptions = {},
): KeyMerge {
  const ordered = [...inputs].sort((a, b) =>
    b.policy.priority - a.policy.priority ||
    (a.policy.id < b.policy.id ? -1 : a.policy.id > b.policy.id ? 1 : 0)
  );
  const identify = (key: string, item: unknown) => options.itemIdentity?.(key, item) ?? canonicalJson(item);
  const units = new Map<string, MergedUnit>();
  const wanted = new Map<string, Unit[]>();
  for (const { policy, values } of ordered) {
    const own = splitUnits(values, ruleOf);
    wanted.set(policy.id, own);
    for (const unit of own) {
      const id = unitId(unit.path);
      let merged = units.get(id);
      if (!merged) {
        merged = unit.kind === "union"
          ? { path: unit.path, kind: "union", value: [], winner: policy, owners: new Map() }
          : { path: unit.path, kind: unit.kind, value: unit.value, winner: policy };
        units.set(id, merged);
      }
      if (merged.kind !== "union" || unit.kind !== "union") continue; // a higher-priority policy set it
      for (const item of unit.value as unknown[]) {
        const identity = identify(unit.path[0], item);
        if (merged.owners!.has(identity)) continue;
        merged.owners!.set(identity, policy);
        (merged.value as unknown[]).push(item);
      }
    }
  }
  return { merged: rebuild(units), units, wanted, identify };
}

function rebuild(units: Map<string, MergedUnit>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const sorted = [...units.values()].sort((a, b) => (unitId(a.path) < unitId(b.path) ? -1 : 1));
  for (const unit of sorted) {
    if (unit.path.length === 1) {
      out[unit.path[0]] = unit.value;
    } else {
      const [key, sub] = unit.path;
      const parent = isPlainObject(out[key]) ? out[key] as Record<string, unknown> : (out[key] = {});
      (parent as Record<string, unknown>)[sub] = unit.value;
    }
  }
  return out;
}

function lookupPath(object: unknown, path: readonly string[]): { found: boolean; value?: unknown } {
  let node = object;
  for (const part of path) {
    if (!isPlainObject(node) || !Object.hasOwn(node, part)) return { found: false };
    node = node[part];
  }
  return { found: true, value: node };
}

function shortJson(value: unknown): string {
  const text = JSON.stringify(value) ?? "null";
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}

function describePolicy(policy: CachedPolicy): string {
  return `"${policy.name}" (${policy.id}, priority ${policy.priority})`;
}

/** Options of {@linkcode readBackItems}. */
export interface ReadBackOptions {
  /**
   * Lets the caller refine each item with what it knows about the target (a key the browser
   * does not know, a key another file overrides); `path` is the unit's path.
   */
  adjust?: (path: readonly string[], item: ItemResult) => ItemResult;
}

/**
 * Compares what `policy` asked for with `actual` (the policies object read back from the file)
 * and returns one item per unit. `schemaId` names the file.
 */
export function readBackItems(
  merge: KeyMerge,
  policy: CachedPolicy,
  actual: Record<string, unknown>,
  schemaId: string,
  options: ReadBackOptions = {},
): ItemResult[] {
  const items: ItemResult[] = [];
  for (const unit of merge.wanted.get(policy.id) ?? []) {
    const item = (unit.kind === "union" ? unionItem : replaceItem)({ merge, policy, actual, schemaId }, unit);
    items.push(options.adjust ? options.adjust(unit.path, item) : item);
  }
  return items;
}

/** What each unit of one policy's read-back is checked against. */
interface ReadBackContext {
  merge: KeyMerge;
  policy: CachedPolicy;
  actual: Record<string, unknown>;
  schemaId: string;
}

function replaceItem({ merge, policy, actual, schemaId }: ReadBackContext, unit: Unit): ItemResult {
  const key = unitLabel(unit.path);
  const merged = merge.units.get(unitId(unit.path));
  const found = lookupPath(actual, unit.path);
  if (found.found && canonicalJson(found.value) === canonicalJson(unit.value)) {
    return { schemaId, key, status: "COMPLIANT", message: `set to ${shortJson(unit.value)}` };
  }
  if (merged && merged.winner.id !== policy.id) {
    return {
      schemaId,
      key,
      status: "INAPPLICABLE",
      message: `overridden by higher-priority policy ${describePolicy(merged.winner)}`,
    };
  }
  return {
    schemaId,
    key,
    status: "NON_COMPLIANT",
    message: found.found
      ? `expected ${shortJson(unit.value)}, found ${shortJson(found.value)}`
      : `expected ${shortJson(unit.value)}, but the key is missing`,
  };
}

function unionItem({ merge, policy, actual, schemaId }: ReadBackContext, unit: Unit): ItemResult {
  const key = unitLabel(unit.path);
  const owners = merge.units.get(unitId(unit.path))?.owners;
  const found = lookupPath(actual, unit.path);
  const present = new Set(found.found && Array.isArray(found.value) ? found.value.map(canonicalJson) : []);
  const missing: unknown[] = [];
  const replacedBy = new Map<string, CachedPolicy>();
  const asked = unit.value as unknown[];
  for (const item of asked) {
    if (present.has(canonicalJson(item))) continue;
    const owner = owners?.get(merge.identify(unit.path[0], item));
    if (owner && owner.id !== policy.id) replacedBy.set(owner.id, owner);
    else missing.push(item);
  }
  if (missing.length > 0) {
    return {
      schemaId,
      key,
      status: "NON_COMPLIANT",
      message: `missing ${missing.length} entr${missing.length === 1 ? "y" : "ies"}: ${shortJson(missing)}`,
    };
  }
  const replaced = [...replacedBy.values()];
  const applied = asked.filter((item) => present.has(canonicalJson(item))).length;
  if (applied === 0 && replaced.length > 0) {
    return {
      schemaId,
      key,
      status: "INAPPLICABLE",
      message: `every entry is given differently by higher-priority policy ${describePolicy(replaced[0])}`,
    };
  }
  return {
    schemaId,
    key,
    status: "COMPLIANT",
    message: replaced.length === 0
      ? `all ${asked.length} entries present`
      : `${applied} of ${asked.length} entries present; the others are given differently by higher-priority policy ${
        replaced.map(describePolicy).join(", ")
      }`,
  };
}
