/**
 * Whether a Dconf entry fits the GSettings schema installed on this node (the agent's own scan of
 * `/usr/share/glib-2.0/schemas`): a schema that is not installed, or a key it does not have, is INAPPLICABLE; the
 * dconf path is the schema's own (not the id with dots turned into slashes), or the entry's for a relocatable
 * schema; the value is typed with the key's GVariant type (`300` for a `u` key is written `uint32 300`, which
 * GSettings needs) and checked against the key's enum, flags, choices and range, because GSettings silently
 * ignores a dconf value that does not fit.
 *
 * @module
 */

import type { DconfPolicy } from "../../../shared/gen/svc/policy/v1/dconf_pb.ts";
import {
  formatGVariant,
  type GValue,
  GVariantError,
  gvariantNumber,
  parseGVariant,
} from "../../../shared/gvariant.ts";
import type { Schema, SchemaKey } from "../../catalogue.ts";
import type { ComplianceStatusName } from "../../sync/types.ts";

/** Where an entry that fits goes and its typed value; or the item status and why it does not fit. */
export type Fit = { dir: string; value: GValue } | [ComplianceStatusName, string];

/** How `entry` fits the node's schemas; see the module documentation. */
export function fitToSchema(entry: DconfPolicy["entries"][number], schemas: Map<string, Schema>): Fit {
  const schema = schemas.get(entry.schemaId);
  if (!schema) return ["INAPPLICABLE", `schema ${entry.schemaId} is not installed on this node`];
  let dir = schema.path;
  if (schema.relocatable) {
    if (!entry.path) {
      return ["ERROR", `schema ${entry.schemaId} is relocatable: give the dconf path of the instance to set`];
    }
    dir = entry.path;
  } else if (entry.path && entry.path !== schema.path) {
    return ["ERROR", `schema ${entry.schemaId} has the fixed path ${schema.path}: leave the path empty`];
  }
  const key = schema.keys.find((k) => k.name === entry.key);
  if (!key) return ["INAPPLICABLE", `schema ${entry.schemaId} on this node has no key ${entry.key}`];
  let value: GValue;
  try {
    value = parseGVariant(entry.value, key.type || undefined);
  } catch (err) {
    if (!(err instanceof GVariantError)) throw err;
    return ["ERROR", `value ${entry.value} does not fit the key's type ${key.type}: ${err.message}`];
  }
  const problem = allowed(value, key);
  return problem ? ["ERROR", `value ${entry.value} ${problem}`] : { dir, value };
}

function inRange(value: GValue, key: SchemaKey): string | undefined {
  const n = gvariantNumber(value);
  if (n === undefined) return undefined;
  const bound = (text: string) => {
    if (!text) return undefined;
    try {
      return gvariantNumber(parseGVariant(text, key.type));
    } catch {
      return undefined;
    }
  };
  const min = bound(key.rangeMin);
  const max = bound(key.rangeMax);
  if ((min !== undefined && n < min) || (max !== undefined && n > max)) {
    return `${formatGVariant(value)} is outside the key's range ${key.rangeMin} to ${key.rangeMax}`;
  }
  return undefined;
}

/** Checks a typed value against the key's enum, flags and choices; undefined when fine. */
function allowed(value: GValue, key: SchemaKey): string | undefined {
  const nicks = key.enumValues.map((e) => e.nick);
  if (key.flags) {
    const bad = (value.value as GValue[]).map((v) => v.value as string).filter((v) => !nicks.includes(v));
    return bad.length
      ? `${bad.map((b) => `'${b}'`).join(", ")} not among the flags ${nicks.join(", ")}`
      : undefined;
  }
  if (nicks.length && !nicks.includes(value.value as string)) {
    return `must be one of ${nicks.map((n) => `'${n}'`).join(", ")}`;
  }
  if (key.choices.length && value.type === "s" && !key.choices.includes(value.value as string)) {
    return `must be one of ${key.choices.map((n) => `'${n}'`).join(", ")}`;
  }
  return inRange(value, key);
}
