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
 * A value of another shape than its rule expects is one `replace` unit.
 *
 * @module
 */

import type { CachedPolicy, ItemResult } from "./types.ts";

/** How a top-level key merges; see the module documentation. */
export type KeyMergeRule = "replace" | "union" | "per-entry" | "per-member-union";

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
  /** The policy whose value won (`replace` units). */
  winner: CachedPolicy;
}

/** Result of {@linkcode mergeKeys}. */
export interface KeyMerge {
  /** The merged object, keys sorted at every level the merge built. */
  merged: Record<string, unknown>;
  /** Merged units keyed by {@linkcode unitId}. */
  units: Map<string, MergedUnit>;
  /** The units each policy asked for, keyed by policy id. */
  wanted: Map<string, Unit[]>;
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
export function mergeKeys(inputs: readonly KeyedValues[], ruleOf: (key: string) => KeyMergeRule): KeyMerge {
  const ordered = [...inputs].sort((a, b) =>
    b.policy.priority - a.policy.priority ||
    (a.policy.id < b.policy.id ? -1 : a.policy.id > b.policy.id ? 1 : 0)
  );
  const units = new Map<string, MergedUnit>();
  const wanted = new Map<string, Unit[]>();
  const seen = new Map<string, Set<string>>();
  for (const { policy, values } of ordered) {
    const own = splitUnits(values, ruleOf);
    wanted.set(policy.id, own);
    for (const unit of own) {
      const id = unitId(unit.path);
      const existing = units.get(id);
      if (!existing) {
        units.set(id, {
          path: unit.path,
          kind: unit.kind,
          value: unit.kind === "union" ? [...dedupe(unit.value as unknown[], seen, id)] : unit.value,
          winner: policy,
        });
      } else if (existing.kind === "union" && unit.kind === "union") {
        (existing.value as unknown[]).push(...dedupe(unit.value as unknown[], seen, id));
      }
      // Otherwise a higher-priority policy already set this unit.
    }
  }
  return { merged: rebuild(units), units, wanted };
}

function* dedupe(items: unknown[], seen: Map<string, Set<string>>, id: string): Generator<unknown> {
  let set = seen.get(id);
  if (!set) seen.set(id, set = new Set());
  for (const item of items) {
    const text = canonicalJson(item);
    if (set.has(text)) continue;
    set.add(text);
    yield item;
  }
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

/**
 * Compares what `policy` asked for with `actual` (the policies object read back from the file)
 * and returns one item per unit. `schemaId` names the file.
 */
export function readBackItems(
  merge: KeyMerge,
  policy: CachedPolicy,
  actual: Record<string, unknown>,
  schemaId: string,
): ItemResult[] {
  const items: ItemResult[] = [];
  for (const unit of merge.wanted.get(policy.id) ?? []) {
    const key = unitLabel(unit.path);
    const merged = merge.units.get(unitId(unit.path));
    const found = lookupPath(actual, unit.path);
    if (unit.kind === "union") {
      const present = new Set(
        found.found && Array.isArray(found.value) ? found.value.map(canonicalJson) : [],
      );
      const missing = (unit.value as unknown[]).filter((v) => !present.has(canonicalJson(v)));
      items.push(
        missing.length === 0
          ? {
            schemaId,
            key,
            status: "COMPLIANT",
            message: `all ${(unit.value as unknown[]).length} entries present`,
          }
          : {
            schemaId,
            key,
            status: "NON_COMPLIANT",
            message: `missing ${missing.length} entr${missing.length === 1 ? "y" : "ies"}: ${
              shortJson(missing)
            }`,
          },
      );
      continue;
    }
    if (found.found && canonicalJson(found.value) === canonicalJson(unit.value)) {
      items.push({ schemaId, key, status: "COMPLIANT", message: `set to ${shortJson(unit.value)}` });
    } else if (merged && merged.winner.id !== policy.id) {
      items.push({
        schemaId,
        key,
        status: "INAPPLICABLE",
        message: `overridden by higher-priority policy ${describePolicy(merged.winner)}`,
      });
    } else {
      items.push({
        schemaId,
        key,
        status: "NON_COMPLIANT",
        message: found.found
          ? `expected ${shortJson(unit.value)}, found ${shortJson(found.value)}`
          : `expected ${shortJson(unit.value)}, but the key is missing`,
      });
    }
  }
  return items;
}
