/**
 * The one error shape every non-2xx REST response carries: `{"error": {"code", "message", "fields"?}}`.
 * Messages are meant for a person and name the thing and the fix; stack traces and SQL never leave the server.
 * {@link toHttpError} is the one place where other errors (domain refusals, database constraint
 * violations) get their HTTP status; the app's error handler and the route audit both use it.
 */
import { DomainError } from "../core/errors.ts";
import { DatabaseUnavailableError, isStorageFull } from "../db/db.ts";

/** Seconds a client is asked to wait before retrying while the database is unreachable. */
export const DATABASE_RETRY_AFTER_SECONDS = 5;
/** Seconds a client is asked to wait before retrying a write refused because the storage is full. */
export const STORAGE_FULL_RETRY_AFTER_SECONDS = 60;

/** A problem with one field of a request, shown next to that field in the UI. */
export interface FieldError {
  /** JSON path of the field, e.g. `content.rules[2].action_ids`. */
  field: string;
  message: string;
}

/** An error that becomes an HTTP response. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly fields?: FieldError[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = "HttpError";
  }
}

/** 400 with per-field problems. */
export function badRequest(message: string, fields?: FieldError[]): HttpError {
  return new HttpError(400, "bad_request", message, fields);
}

/** 404 naming what was looked for. */
export function notFound(what: string): HttpError {
  return new HttpError(404, "not_found", `${what} not found`);
}

/** 409: refused because of the current state (the message says what to do first). */
export function conflict(message: string): HttpError {
  return new HttpError(409, "conflict", message);
}

/** 403 naming the missing permission. */
export function forbidden(message: string): HttpError {
  return new HttpError(403, "forbidden", message);
}

/** 401. */
export function unauthorized(message = "authentication required: log in again"): HttpError {
  return new HttpError(401, "unauthorized", message);
}

/** The JSON body for an error. */
export function errorBody(
  err: HttpError,
): { error: { code: string; message: string; fields?: FieldError[] } } {
  return { error: { code: err.code, message: err.message, ...(err.fields ? { fields: err.fields } : {}) } };
}

const STATUS_BY_KIND: Record<DomainError["kind"], { status: number; code: string }> = {
  not_found: { status: 404, code: "not_found" },
  conflict: { status: 409, code: "conflict" },
  invalid: { status: 422, code: "validation_failed" },
  forbidden: { status: 403, code: "forbidden" },
  bad_request: { status: 400, code: "bad_request" },
  unauthorized: { status: 401, code: "unauthorized" },
  too_many_requests: { status: 429, code: "too_many_requests" },
  unavailable: { status: 503, code: "unavailable" },
};

/**
 * The HTTP form of an error a handler threw: an {@link HttpError} as it is, a domain refusal by its kind
 * (404, 409, 422, 403, 400, 401, 429 or 503 with the domain's message, fields, precise code and
 * `Retry-After`), a database constraint violation as a
 * person-readable 400 or 409, an unreachable database as 503 with `Retry-After`, full storage (database or
 * files) as 507 `storage_full` with `Retry-After`; undefined for anything else (a bug: logged, answered with a
 * bare 500).
 */
export function toHttpError(err: unknown): HttpError | undefined {
  if (err instanceof HttpError) return err;
  if (isStorageFull(err)) return storageFull();
  if (err instanceof DatabaseUnavailableError) {
    return new HttpError(
      503,
      "database_unavailable",
      `the database is unreachable; the server keeps trying to reconnect, retry in ${DATABASE_RETRY_AFTER_SECONDS} seconds`,
      undefined,
      { "Retry-After": String(DATABASE_RETRY_AFTER_SECONDS) },
    );
  }
  if (err instanceof DomainError) {
    const { status, code } = STATUS_BY_KIND[err.kind];
    const wait = err.detail.retryAfterSeconds;
    const headers = wait === undefined ? undefined : { "Retry-After": String(wait) };
    return new HttpError(status, err.detail.code ?? code, err.message, err.fields, headers);
  }
  return fromDatabaseError(err);
}

/** 507: a write was refused because the disk under the database or the data directory is full. */
export function storageFull(): HttpError {
  return new HttpError(
    507,
    "storage_full",
    "the server's storage is full, so the change was not saved; an operator must free space on the disk of " +
      `the database or the data directory (the server log names it); retry in ${STORAGE_FULL_RETRY_AFTER_SECONDS} seconds`,
    undefined,
    { "Retry-After": String(STORAGE_FULL_RETRY_AFTER_SECONDS) },
  );
}

function fromDatabaseError(err: unknown): HttpError | undefined {
  const code = (err as { code?: string })?.code;
  if (code === "23505") return conflict("an item with the same name or key already exists");
  if (code === "23503") return conflict("a referenced item does not exist or is still in use");
  if (code === "22P02") return badRequest("an identifier in the request is not a valid UUID");
  // Last line behind the edge checks: text the database cannot store or that exceeds its limits is the
  // request's fault, and the unit of work has already rolled back whatever the request did.
  if (code === "22021" || code === "22P05") {
    return badRequest(
      "a text value in the request contains a NUL character or invalid Unicode, which cannot be stored; remove it",
    );
  }
  if (code === "22001" || code === "54000") {
    return badRequest("a value in the request is too long to store; shorten it");
  }
  if (code === "23514") {
    return badRequest("a value in the request is not allowed (it failed a database check)");
  }
  // Only reached when the unit of work already ran again and lost every time: the request was fine, so
  // tell the client to send it again rather than call it a server bug.
  if (code === "40001" || code === "40P01") {
    return new HttpError(
      503,
      "conflict_retry",
      "the change collided with concurrent changes to the same items several times; send it again",
      undefined,
      { "Retry-After": "1" },
    );
  }
  return undefined;
}
