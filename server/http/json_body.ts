/**
 * JSON request bodies and responses that may be large. Parsing and checking a body is a pure function of its
 * text and the route's schema ({@link parseJsonBody}), so it runs on the event loop for ordinary bodies and
 * in an off-loop worker (server/core/offloop.ts) for large ones; {@link isLargeJson} decides the same for
 * answers. A 1 MiB policy body costs the loop ~10 ms to decode and parse, and its answer as much to
 * serialize (every quote of JSON content inside a string is escaped): meanwhile every other request and
 * every agent's stream waits.
 */
import type { FieldError } from "./errors.ts";
import { type JsonSchema, unstorableFields, validateJson } from "./json_schema.ts";
import { defineOffLoopJob } from "../core/offloop.ts";

/**
 * Bodies and answers of at least this many bytes (answers: estimated) are parsed or serialized in a worker.
 * Below it the loop's share stays well under a millisecond, less than a worker's round trip.
 */
export const LARGE_JSON_BYTES = 64 * 1024;

/** A parsed and checked body, or the refusal naming what is wrong. */
export type ParsedBody =
  | { ok: true; value: unknown }
  | { ok: false; message: string; fields?: FieldError[] };

/**
 * Parses `text` as JSON, refuses strings PostgreSQL cannot store (anywhere in the body, whatever the schema
 * declares), then validates against `schema`.
 */
export function parseJsonBody(text: string, schema: JsonSchema): ParsedBody {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, message: "request body is not valid JSON" };
  }
  const unstorable = unstorableFields(value);
  if (unstorable.length > 0) return { ok: false, message: summarizeFields(unstorable), fields: unstorable };
  const errors = validateJson(schema, value);
  if (errors.length > 0) return { ok: false, message: summarizeFields(errors), fields: errors };
  return { ok: true, value };
}

/** "field: problem (and N more)": the message of a 400 listing field errors. */
export function summarizeFields(errors: FieldError[]): string {
  const first = errors[0];
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : "";
  return `${first.field}: ${first.message}${more}`;
}

/** Most values {@link isLargeJson} looks at before calling a value large without finishing the walk. */
const MAX_WALKED_VALUES = 20_000;

/**
 * Whether `value` serializes to at least `bytes` bytes, estimated without serializing: string lengths plus a
 * few bytes per value. The walk stops at the threshold, or after {@link MAX_WALKED_VALUES} values (a value
 * with that many members is large whatever they hold), so it costs the loop little for any answer.
 */
export function isLargeJson(value: unknown, bytes = LARGE_JSON_BYTES): boolean {
  let size = 0;
  let walked = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (++walked > MAX_WALKED_VALUES) return true;
    if (typeof next === "string") size += next.length + 2;
    else if (Array.isArray(next)) {
      size += 2;
      for (const item of next) pending.push(item);
    } else if (next !== null && typeof next === "object") {
      size += 2;
      for (const [key, member] of Object.entries(next)) {
        size += key.length + 4;
        pending.push(member);
      }
    } else size += 8;
    if (size >= bytes) return true;
  }
  return false;
}

/** A large request body (UTF-8) parsed and checked against its route's schema in an off-loop worker. */
export const parseJsonBodyOffLoop: (input: { bytes: Uint8Array; schema: JsonSchema }) => Promise<ParsedBody> =
  defineOffLoopJob(
    "body",
    (job: { bytes: Uint8Array; schema: JsonSchema }) =>
      parseJsonBody(new TextDecoder().decode(job.bytes), job.schema),
  );

/** A large answer serialized as JSON in an off-loop worker, returned as UTF-8 (moved back, not copied). */
export const stringifyOffLoop: (input: { value: unknown }) => Promise<Uint8Array<ArrayBuffer>> =
  defineOffLoopJob(
    "stringify",
    (job: { value: unknown }) => new TextEncoder().encode(JSON.stringify(job.value)),
  );
