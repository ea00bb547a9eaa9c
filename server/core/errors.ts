/**
 * The refusal every floor of the server throws: domain rules, identity, the hub, the off-loop jobs. None of
 * them knows about HTTP; they throw a {@link DomainError} whose `kind` says what went wrong, and the HTTP app
 * maps the kind to a status code in one place (`toHttpError` in server/http/errors.ts); the gRPC services
 * map it themselves. It lives on the ground floor because the off-loop worker pool (server/core/offloop.ts)
 * carries it back from a worker thread, below every layer that throws it.
 */

/** One problem with one field, e.g. `{field: "content.rules[2].action_ids", message: "…"}`. */
export interface DomainFieldError {
  field: string;
  message: string;
}

/**
 * What kind of failure: `not_found` (the named thing does not exist), `conflict` (refused because of the
 * current state; the message says what to do first), `invalid` (content or a value does not validate),
 * `forbidden` (the caller lacks a permission the request turned out to need, or must prove again who they
 * are), `bad_request` (a value the caller sent is wrong, e.g. a one-time code), `unauthorized` (the caller is
 * not signed in), `too_many_requests` (a limit was reached; {@link DomainErrorDetail.retryAfterSeconds}
 * says when to try again), `unavailable` (something the server relies on, such as the user directory, does
 * not answer).
 */
export type DomainErrorKind =
  | "not_found"
  | "conflict"
  | "invalid"
  | "forbidden"
  | "bad_request"
  | "unauthorized"
  | "too_many_requests"
  | "unavailable";

/**
 * What a refusal may add for the caller: a `code` more precise than the kind (the REST body's `error.code`,
 * e.g. `reauthentication_required`; the kind's own code when absent), and for `too_many_requests` or
 * `unavailable` the seconds after which a retry may pass (the REST answer's `Retry-After`).
 */
export interface DomainErrorDetail {
  code?: string;
  retryAfterSeconds?: number;
}

/** A refusal meant for a person: the message names the thing and the fix. */
export class DomainError extends Error {
  constructor(
    readonly kind: DomainErrorKind,
    message: string,
    readonly fields?: DomainFieldError[],
    readonly detail: DomainErrorDetail = {},
  ) {
    super(message);
    this.name = "DomainError";
  }
}

/** `<what> not found`. */
export function notFoundError(what: string): DomainError {
  return new DomainError("not_found", `${what} not found`);
}

/**
 * `value` when it is there, else a `not_found` error for `what` (e.g. `` `policy ${id}` ``): the one way a
 * lookup that must succeed says so.
 */
export function found<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw notFoundError(what);
  return value;
}

/** A refusal because of the current state. */
export function conflictError(message: string): DomainError {
  return new DomainError("conflict", message);
}

/** A refusal because the caller lacks a permission the request turned out to need. */
export function forbiddenError(message: string): DomainError {
  return new DomainError("forbidden", message);
}

/** A validation failure; the message summarises the first field problem. */
export function invalidError(message: string, fields?: DomainFieldError[]): DomainError {
  return new DomainError("invalid", message, fields);
}

/** Builds an `invalid` error from field problems (at least one), prefixing each field with `prefix`. */
export function fieldsError(fields: readonly DomainFieldError[], prefix = ""): DomainError {
  const named = fields.map((f) => ({
    field: prefix && f.field ? `${prefix}.${f.field}` : prefix || f.field,
    message: f.message,
  }));
  const first = named[0];
  const more = named.length > 1 ? ` (and ${named.length - 1} more)` : "";
  return new DomainError("invalid", `${first.field ? `${first.field}: ` : ""}${first.message}${more}`, named);
}
