/**
 * Checks of agent-supplied values. Agents are authenticated but their data is still untrusted: it ends up
 * in the database, the web UI and audit logs. A bad value is refused with INVALID_ARGUMENT naming the field
 * and the rule, and nothing of the request is stored.
 */
import * as grpc from "@grpc/grpc-js";
import { GrpcError } from "../../shared/grpc/adapter.ts";

/** INVALID_ARGUMENT `<field>: <problem>`. */
export function invalid(field: string, problem: string): GrpcError {
  return new GrpcError(grpc.status.INVALID_ARGUMENT, `${field}: ${problem}`);
}

// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
// deno-lint-ignore no-control-regex
const CONTROL_EXCEPT_NEWLINE = /[\u0000-\u0008\u000b-\u001f\u007f]/;

/** Options of {@link checkText}. */
export interface TextRule {
  /** Maximum length in characters. */
  max: number;
  /** Allow line breaks and tabs (messages); single-line values refuse every control character. */
  multiline?: boolean;
  /** Refuse the empty string. */
  required?: boolean;
}

/** Returns `value` when it satisfies `rule`; throws INVALID_ARGUMENT naming `field` otherwise. */
export function checkText(field: string, value: string, rule: TextRule): string {
  if (rule.required && value.trim() === "") throw invalid(field, "is required");
  if (value.length > rule.max) throw invalid(field, `is longer than ${rule.max} characters`);
  if ((rule.multiline ? CONTROL_EXCEPT_NEWLINE : CONTROL).test(value)) {
    throw invalid(field, "contains control characters");
  }
  return value;
}

/** Throws INVALID_ARGUMENT when a list is longer than `max`. */
export function checkCount(field: string, list: readonly unknown[], max: number): void {
  if (list.length > max) throw invalid(field, `has ${list.length} entries; at most ${max} are accepted`);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Returns the lower-cased UUID or throws INVALID_ARGUMENT naming `field`. */
export function checkUuid(field: string, value: string): string {
  if (!UUID.test(value)) throw invalid(field, `"${value.slice(0, 64)}" is not an id (a UUID is expected)`);
  return value.toLowerCase();
}
