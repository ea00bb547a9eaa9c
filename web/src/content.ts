/** Policy content as the UI handles it: protojson with json_name keys, parsed by the shared registry. */
import { toJson } from "@bufbuild/protobuf";
import { getPolicyType } from "../../shared/policy_types/mod.ts";

/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };
/** Any JSON value. */
export type JsonValue = string | number | boolean | null | JsonValue[] | JsonObject;

/**
 * Parses stored content into json_name form (what the forms edit and what browser policy files use), or
 * explains why it cannot: then the raw JSON is returned for the JSON view.
 */
export function contentToValue(type: string, content: string): { value: JsonObject; warning?: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(content || "{}");
  } catch {
    return { value: {}, warning: "The stored content is not JSON; the form starts empty." };
  }
  const def = getPolicyType(type);
  if (!def) return { value: (raw ?? {}) as JsonObject };
  try {
    return { value: toJson(def.schema, def.parse(content || "{}") as never) as unknown as JsonObject };
  } catch (err) {
    return {
      value: (raw ?? {}) as JsonObject,
      warning: `The stored content does not match the ${type} message (${
        (err as Error).message
      }); edit it in the JSON view.`,
    };
  }
}

/** The value at a dotted item key (`Homepage.URL`, `ExtensionSettings.<id>`), trying longest names first. */
export function valueAtKey(root: JsonValue, key: string): { found: boolean; value?: JsonValue } {
  const parts = key.split(".");
  const walk = (node: JsonValue, i: number): { found: boolean; value?: JsonValue } => {
    if (i === parts.length) return { found: true, value: node };
    if (node === null || typeof node !== "object" || Array.isArray(node)) return { found: false };
    // Entry names may contain dots (extension ids, preference names): try the longest match first.
    for (let j = parts.length; j > i; j--) {
      const name = parts.slice(i, j).join(".");
      if (Object.hasOwn(node, name)) {
        const r = walk(node[name], j);
        if (r.found) return r;
      }
    }
    return { found: false };
  };
  return walk(root, 0);
}
