/**
 * The data side of the generated policy forms, free of DOM and Lit so it runs (and is tested) anywhere:
 * labels from json names, allowed values from .proto comments, and immutable edits of protojson values.
 */
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
