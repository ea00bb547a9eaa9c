/**
 * The one error shape every non-2xx REST response carries: `{"error": {"code", "message", "fields"?}}`.
 * Messages are meant for a person and name the thing and the fix; stack traces and SQL never leave the server.
 */

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

/** 422: the request is well-formed but its content does not validate (e.g. policy content). */
export function unprocessable(message: string, fields?: FieldError[]): HttpError {
  return new HttpError(422, "validation_failed", message, fields);
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

/** Maps a database constraint violation to a person-readable HttpError, or returns undefined. */
export function fromDatabaseError(err: unknown): HttpError | undefined {
  const code = (err as { code?: string })?.code;
  if (code === "23505") return conflict("an item with the same name or key already exists");
  if (code === "23503") return conflict("a referenced item does not exist or is still in use");
  if (code === "22P02") return badRequest("an identifier in the request is not a valid UUID");
  if (code === "23514") {
    return badRequest("a value in the request is not allowed (it failed a database check)");
  }
  return undefined;
}
