/**
 * A small JSON Schema (2020-12 subset) validator for request bodies and query strings. The same schema objects
 * feed the OpenAPI document, so what is documented is what is enforced. Supported keywords: type, properties,
 * required, additionalProperties (false), items, minItems, maxItems, uniqueItems, minLength, maxLength,
 * pattern, enum, minimum, maximum, format (uuid), nullable via `type: [x, "null"]`, description.
 */
import type { FieldError } from "./errors.ts";

/** A JSON Schema object (the subset above). */
export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  enum?: readonly unknown[];
  minimum?: number;
  maximum?: number;
  format?: string;
  description?: string;
  example?: unknown;
  default?: unknown;
  $ref?: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a UUID in its text form (any case), what `format: uuid` accepts. */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** Schema of a UUID string. */
export const UUID_SCHEMA: JsonSchema = { type: "string", format: "uuid" };

/**
 * A request body's schema: an object of exactly these `properties` (any other field is refused), of which the
 * `required` ones must be present.
 */
export function closedObject(properties: Record<string, JsonSchema>, required: string[] = []): JsonSchema {
  return {
    type: "object",
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: false,
    properties,
  };
}

/**
 * An object schema whose properties are all required except those named in `optional`. Response schemas are
 * built with it so that every field the server always sends is declared `required`, and the generated client
 * (shared/api/svc_api.gen.ts) types it as present; a field sent only sometimes is named in `optional`, and
 * one that may be null says so in its type (`type: [x, "null"]`). Request bodies keep spelling out their
 * `required`, which decides what a request must carry.
 */
export function objectSchema(
  properties: Record<string, JsonSchema>,
  options: { optional?: readonly string[]; description?: string } = {},
): JsonSchema {
  const optional = new Set(options.optional ?? []);
  for (const name of optional) {
    if (!(name in properties)) throw new Error(`objectSchema: optional field "${name}" is not a property`);
  }
  return {
    type: "object",
    ...(options.description ? { description: options.description } : {}),
    required: Object.keys(properties).filter((name) => !optional.has(name)),
    properties,
  };
}

function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function typeMatches(expected: string, actual: string): boolean {
  return expected === actual || (expected === "number" && actual === "integer");
}

/**
 * Number of code points of `value` as far as `schema`'s length bounds need it. A string has between half its
 * UTF-16 length and its UTF-16 length in code points, so they are counted only when those bounds leave the
 * answer open, and then without building an array of them: spreading a 1 MiB policy content held the event
 * loop for tens of milliseconds.
 */
function codePointsWithin(value: string, schema: JsonSchema): number {
  const fewest = Math.ceil(value.length / 2);
  if (value.length <= (schema.maxLength ?? Infinity) && fewest >= (schema.minLength ?? 0)) {
    return value.length;
  }
  let pairs = 0;
  for (let i = 0; i < value.length - 1; i++) {
    const unit = value.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = value.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        pairs++;
        i++;
      }
    }
  }
  return value.length - pairs;
}

/** Validates `value` against `schema`; returns every problem found, each naming its field. */
export function validateJson(schema: JsonSchema, value: unknown, path = ""): FieldError[] {
  const errors: FieldError[] = [];
  const here = path || "(body)";
  const push = (message: string) => errors.push({ field: here, message });
  if (schema.type) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    const actual = typeOf(value);
    if (!types.some((t) => typeMatches(t, actual))) {
      push(
        `must be ${types.filter((t) => t !== "null").join(" or ")}${
          types.includes("null") ? " or null" : ""
        }`,
      );
      return errors;
    }
  }
  if (value === null) return errors;
  if (schema.enum && !schema.enum.some((e) => e === value)) {
    push(`must be one of ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}`);
  }
  if (typeof value === "string") {
    // Whoever validates with a schema (bodies, query strings, bundles) gets the storability check too.
    const unstorable = unstorableReason(value);
    if (unstorable) {
      push(unstorable);
      return errors;
    }
    const length = codePointsWithin(value, schema);
    if (schema.minLength !== undefined && length < schema.minLength) {
      push(schema.minLength === 1 ? "must not be empty" : `must be at least ${schema.minLength} characters`);
    }
    if (schema.maxLength !== undefined && length > schema.maxLength) {
      push(`must be at most ${schema.maxLength} characters`);
    }
    if (schema.pattern && !new RegExp(schema.pattern, "u").test(value)) {
      push(patternMessage(schema.pattern, value));
    }
    if (schema.format === "uuid" && !isUuid(value)) push("must be a UUID");
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) push(`must be at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) push(`must be at most ${schema.maximum}`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) {
      push(`needs at least ${schema.minItems} item${schema.minItems === 1 ? "" : "s"}`);
    }
    if (schema.maxItems !== undefined && value.length > schema.maxItems) {
      push(`allows at most ${schema.maxItems} items`);
    }
    if (schema.uniqueItems && new Set(value.map((v) => JSON.stringify(v))).size !== value.length) {
      push("must not contain duplicates");
    }
    if (schema.items) {
      value.forEach((v, i) => errors.push(...validateJson(schema.items!, v, `${path}[${i}]`)));
    }
  }
  if (typeOf(value) === "object") {
    const obj = value as Record<string, unknown>;
    for (const key of schema.required ?? []) {
      if (obj[key] === undefined) errors.push({ field: join(path, key), message: "is required" });
    }
    for (const [key, v] of Object.entries(obj)) {
      // Own properties only: `constructor`, `toString`… must not find Object.prototype's members.
      const sub = schema.properties && Object.hasOwn(schema.properties, key)
        ? schema.properties[key]
        : undefined;
      if (sub) errors.push(...validateJson(sub, v, join(path, key)));
      else if (schema.additionalProperties === false) {
        errors.push({ field: join(path, key), message: "is not a known field" });
      } else if (typeof schema.additionalProperties === "object") {
        errors.push(...validateJson(schema.additionalProperties, v, join(path, key)));
      }
    }
  }
  return errors;
}

// deno-lint-ignore no-control-regex
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g;

/** What a pattern refusal tells a person: the control character it refused when there is one, else the format. */
function patternMessage(pattern: string, value: string): string {
  const re = new RegExp(pattern, "u");
  const found = value.match(CONTROLS)?.find((ch) => !re.test(ch));
  if (found === undefined) return "has an invalid format";
  const code = found.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0");
  return `must not contain control characters (found U+${code}); remove it or use plain text`;
}

/** Deepest nesting of arrays and objects a request body may have. */
export const MAX_JSON_DEPTH = 32;

/**
 * Why PostgreSQL could not store `value` as text or jsonb (a NUL character, or a UTF-16 surrogate without
 * its pair), or undefined when it can.
 */
export function unstorableReason(value: string): string | undefined {
  if (value.includes("\u0000")) return "must not contain NUL characters (\\u0000)";
  if (!value.isWellFormed()) return "must not contain a lone UTF-16 surrogate (text must be valid Unicode)";
  return undefined;
}

/**
 * Every string in a parsed JSON value (object keys too) that PostgreSQL could not store, and nesting deeper
 * than {@link MAX_JSON_DEPTH}, each naming its field. Runs on every body before its schema, so no route can
 * forget it.
 */
export function unstorableFields(value: unknown, path = "", depth = 0): FieldError[] {
  const here = path || "(body)";
  if (typeof value === "string") {
    const reason = unstorableReason(value);
    return reason ? [{ field: here, message: reason }] : [];
  }
  if (value === null || typeof value !== "object") return [];
  if (depth >= MAX_JSON_DEPTH) {
    return [{ field: here, message: `nests deeper than ${MAX_JSON_DEPTH} levels` }];
  }
  const errors: FieldError[] = [];
  if (Array.isArray(value)) {
    value.forEach((v, i) => errors.push(...unstorableFields(v, `${path}[${i}]`, depth + 1)));
    return errors;
  }
  for (const [key, v] of Object.entries(value)) {
    const reason = unstorableReason(key);
    if (reason) errors.push({ field: join(path, key.slice(0, 100)), message: `field name ${reason}` });
    else errors.push(...unstorableFields(v, join(path, key), depth + 1));
  }
  return errors;
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}
