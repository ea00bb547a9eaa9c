/**
 * Enum values as an admin reads them. The form shows an enum value by a label ("Drop" for
 * `FIREWALLD_TARGET_DROP`), and so do the messages the console shows: validation problems and compliance
 * messages name the constants (scripts send and read them), and the console puts the form's label in
 * their place, so no proto name reaches a person who works in the form.
 */
import type { DescEnum, DescEnumValue, DescMessage } from "@bufbuild/protobuf";
import { getPolicyType, type ValidationIssue } from "../../../shared/policy_types/mod.ts";

/** The part every value name of `desc` starts with, up to its last `_` (`FIREWALLD_TARGET_`). */
function enumPrefix(desc: DescEnum): string {
  const names = desc.values.map((v) => v.name);
  let prefix = names[0] ?? "";
  for (const n of names) {
    while (!n.startsWith(prefix)) prefix = prefix.slice(0, -1);
  }
  return prefix.slice(0, prefix.lastIndexOf("_") + 1);
}

/** The form's label of enum value `name` of `desc`: `FIREWALLD_TARGET_DROP` → "Drop". */
export function enumValueLabel(desc: DescEnum, name: string): string {
  const prefix = enumPrefix(desc);
  const rest = (name.startsWith(prefix) && name.length > prefix.length ? name.slice(prefix.length) : name)
    .toLowerCase().replaceAll("_", " ");
  return rest.charAt(0).toUpperCase() + rest.slice(1);
}

/**
 * The values of `desc` a person may choose: all but proto3's zero value `…_UNSPECIFIED`, which only means
 * "not set" (the form's "Not managed", or leaving a list empty).
 */
export function choosableEnumValues(desc: DescEnum): DescEnumValue[] {
  return desc.values.filter((v) => !(v.number === 0 && v.name.endsWith("_UNSPECIFIED")));
}

/** A form choice for each choosable value of `desc`: its label, the constant kept as the value only. */
export function enumChoices(desc: DescEnum): Array<{ value: string; label: string; internal: true }> {
  return choosableEnumValues(desc).map((v) => ({
    value: v.name,
    label: enumValueLabel(desc, v.name),
    internal: true,
  }));
}

/** Every enum a message uses, directly or through nested messages. */
export function enumsOf(schema: DescMessage): DescEnum[] {
  const found = new Map<string, DescEnum>();
  const seen = new Set<string>();
  const walk = (m: DescMessage) => {
    if (seen.has(m.typeName)) return;
    seen.add(m.typeName);
    for (const f of m.fields) {
      if (f.enum) found.set(f.enum.typeName, f.enum);
      if (f.message) walk(f.message);
    }
  };
  walk(schema);
  return [...found.values()];
}

/** Constants (`FIREWALLD_TARGET_DROP`) and the short forms hints use after one (`…_PRESENT, _LATEST`). */
const CONSTANT = /\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|(?<![A-Za-z0-9])_[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*\b/g;

/**
 * `message` with each constant of the enums of `schema` replaced by its label: "choose a result such as
 * Auth admin" for "… such as POLKIT_RESULT_AUTH_ADMIN". Words that are no enum value of the type stay as
 * they are.
 */
export function labelEnumConstants(schema: DescMessage, message: string): string {
  const byName = new Map<string, DescEnum>();
  for (const e of enumsOf(schema)) for (const v of e.values) byName.set(v.name, e);
  let last: DescEnum | undefined;
  return message.replace(CONSTANT, (token) => {
    const full = token.startsWith("_") && last ? `${enumPrefix(last)}${token.slice(1)}` : token;
    const desc = byName.get(full);
    if (!desc) return token;
    last = desc;
    return enumValueLabel(desc, full);
  });
}

/** `issues` of a policy of `type` with the labels of the enum constants they name. */
export function labelIssues(type: string, issues: ValidationIssue[]): ValidationIssue[] {
  const def = getPolicyType(type);
  if (!def) return issues;
  return issues.map((i) => ({ ...i, message: labelEnumConstants(def.schema, i.message) }));
}
