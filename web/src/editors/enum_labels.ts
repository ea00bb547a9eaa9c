/**
 * Enum values as an admin reads them. The form shows an enum value by a label ("Drop" for
 * `FIREWALLD_TARGET_DROP`); validation messages, which the server also returns to scripts that send the
 * constants, name the constant. The console keeps the constant (it is what the JSON view and the API use)
 * and puts the form's label in front of it: "Drop (FIREWALLD_TARGET_DROP)".
 */
import type { DescEnum, DescMessage } from "@bufbuild/protobuf";
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
 * `message` with each constant of the enums of `schema` preceded by its label: "choose a result such as
 * Auth admin (POLKIT_RESULT_AUTH_ADMIN)". Words that are no enum value of the type stay as they are.
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
    return `${enumValueLabel(desc, full)} (${token})`;
  });
}

/** `issues` of a policy of `type` with the labels of the enum constants they name. */
export function labelIssues(type: string, issues: ValidationIssue[]): ValidationIssue[] {
  const def = getPolicyType(type);
  if (!def) return issues;
  return issues.map((i) => ({ ...i, message: labelEnumConstants(def.schema, i.message) }));
}
