/**
 * Dconf: GSettings values written as a keyfile (and locks) into a system dconf database, merged by priority.
 * Every part of an entry ends up in a generated file or on a `gsettings` command line, so each is checked:
 * schema id, path, key, GVariant value (one well-formed value on one line, parsed by the shared `gvariant.ts`; the
 * agent also types it against the installed schema), database and profile names (path components).
 */
import { type DconfPolicy, DconfPolicySchema } from "../gen/svc/policy/v1/dconf_pb.ts";
import { gvariantSyntaxProblem } from "../gvariant.ts";
import { defineType } from "./define.ts";
import {
  dconfKeyName,
  dconfPath,
  gsettingsSchemaId,
  matches,
  MAX_STRING_LENGTH,
  maxLength,
  required,
  singleLine,
} from "./sanitizers.ts";

const DB_NAME = matches(
  /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/,
  "a plain name such as local: letters, digits, '_' and '-'",
);

/** The Dconf policy type. */
export const dconfType = defineType<DconfPolicy>({
  wireName: "Dconf",
  label: "GNOME settings",
  description: "Desktop settings (dconf keys), optionally locked.",
  schema: DconfPolicySchema,
  typedContentCase: "dconfPolicy",
  merge: "priority_merge",
  names: "proto",
  check(message, issues) {
    if (message.entries.length === 0) {
      issues.add("entries", "policy content needs at least one setting: add an entry");
    }
    issues.optional("db_name", message.dbName, DB_NAME);
    issues.optional("profile", message.profile, DB_NAME);
    const seen = new Map<string, number>();
    message.entries.forEach((entry, i) => {
      const at = `entries[${i}]`;
      issues.check(`${at}.schema_id`, entry.schemaId, required, gsettingsSchemaId);
      issues.optional(`${at}.path`, entry.path, dconfPath);
      issues.check(`${at}.key`, entry.key, required, dconfKeyName);
      issues.check(
        `${at}.value`,
        entry.value,
        required,
        maxLength(MAX_STRING_LENGTH),
        singleLine,
        gvariantSyntaxProblem,
      );
      const id = `${entry.schemaId}\u0000${entry.path}\u0000${entry.key}`;
      const first = seen.get(id);
      if (first !== undefined) {
        issues.add(`${at}.key`, `repeats entries[${first}] (same schema, path and key)`);
      } else seen.set(id, i);
    });
  },
});
