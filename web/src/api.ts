/**
 * The one way the UI talks to the server: same-origin `fetch` to `/api/v1/*`.
 *
 * - Mutations echo the `svc_csrf` cookie in `X-CSRF-Token` (double-submit CSRF).
 * - A 401 triggers exactly one `POST /api/v1/auth/refresh` for however many requests fail at the same time,
 *   then each retries once with the re-read CSRF cookie. A request that was sent before a refresh finished
 *   just retries: refreshing again would present an already-rotated refresh token, which the server treats
 *   as theft and answers by revoking the whole session.
 * - A retry that is still 401 (or a failed refresh) fires `session-expired`; the shell then shows the login
 *   screen over the current URL.
 * - Errors become {@link ApiError} with the server's code, message and per-field problems.
 *
 * Calls are named by operation ("METHOD /path" of the generated `Operations`), so the path parameters,
 * query, body and answer are the types the server's route declarations describe.
 */
import type { OperationKey, Operations } from "../../shared/api/svc_api.gen.ts";
import type { Answer } from "./api_types.ts";

export type { Answer };

/** A problem with one request field, as the server reports it. */
export interface FieldError {
  field: string;
  message: string;
}

/** An error answer from the server, or a network failure (status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly fields: FieldError[] = [],
  ) {
    super(message);
    this.name = "ApiError";
  }

  /** The message for one field (matched on the full path or its last segment), if any. */
  fieldMessage(field: string): string | undefined {
    return this.fields.find((f) => f.field === field || f.field.endsWith(`.${field}`))?.message;
  }
}

/** Query values; `undefined` and empty strings are left out. */
type Query = Record<string, string | number | boolean | undefined | null>;

/** Options of one request. */
interface RequestOptions {
  query?: Query;
  /** JSON body. */
  body?: unknown;
  /** A non-JSON body (an import bundle) and its content type. */
  text?: { body: string; contentType: string };
  signal?: AbortSignal;
}

/** The path parameters of an operation: required when its path has any. */
type PathArgs<K extends OperationKey> = Operations[K]["path"] extends Record<string, never>
  ? { path?: undefined }
  : { path: Operations[K]["path"] };

/** The body of an operation: required unless it has none or every field is optional. */
type BodyArgs<K extends OperationKey> = Operations[K]["body"] extends undefined ? { body?: undefined }
  : Operations[K]["body"] extends string ? { body: string; contentType: string }
  // deno-lint-ignore ban-types
  : {} extends Operations[K]["body"] ? { body?: Operations[K]["body"] }
  : { body: Operations[K]["body"] };

/** What one call of an operation takes; query values `undefined`, `null` and `""` are left out. */
export type CallArgs<K extends OperationKey> = PathArgs<K> & BodyArgs<K> & {
  query?: { [P in keyof Operations[K]["query"]]?: Operations[K]["query"][P] | null };
  signal?: AbortSignal;
};

/** The arguments may be left out when nothing in them is required. */
// deno-lint-ignore ban-types
type ArgsParam<K extends OperationKey> = {} extends CallArgs<K> ? [args?: CallArgs<K>] : [args: CallArgs<K>];

/** {@link CallArgs} as the client reads them, whatever the operation. */
interface SentArgs {
  path?: Record<string, string | number | undefined>;
  query?: object;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
}

/** The method and the path of an operation with its parameters filled in. */
function resolve(operation: OperationKey, args: SentArgs | undefined): readonly [string, string] {
  const space = operation.indexOf(" ");
  const path = operation.slice(space + 1).replace(/\{([A-Za-z_]+)\}/g, (_, name: string) => {
    const value = args?.path?.[name];
    // Only reachable when a caller bypasses the types (an id that is undefined at run time).
    if (value === undefined) throw new Error(`${operation}: path parameter ${name} is missing`);
    return encodeURIComponent(String(value));
  });
  return [operation.slice(0, space), path] as const;
}

function toOptions(args: SentArgs | undefined): RequestOptions {
  const { query, body, contentType, signal } = args ?? {};
  return typeof body === "string" && contentType
    ? { query: query as Query, text: { body, contentType }, signal }
    : { query: query as Query, body, signal };
}

/** The CSRF cookie and header names (spec: Authentication rules 1–2). */
export const CSRF_COOKIE = "svc_csrf";
export const CSRF_HEADER = "X-CSRF-Token";
const API = "/api/v1";
const REFRESH_PATH = `${API}/auth/refresh`;
const NO_REFRESH = new Set([
  `${API}/auth/login`,
  `${API}/auth/login/second-factor`,
  REFRESH_PATH,
  `${API}/auth/logout`,
]);

/** A step-up re-authentication as the server reads it (`step_up` in the body). */
export interface StepUpProof {
  password: string;
  code?: string;
  backup_code?: string;
  /** A security key's answer to `POST /auth/step-up/webauthn/options`. */
  webauthn?: { token: string; response: Record<string, unknown> };
}

/** Answers that a re-authentication in the same request would turn into success. */
const STEP_UP_CODES = new Set(["reauthentication_required", "second_factor_required"]);

/** Reads one cookie from `document.cookie`. */
export function readCookie(name: string, cookies: string = document.cookie): string | undefined {
  for (const part of cookies.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return undefined;
}

/** Builds `/api/v1/…?query`. */
export function apiUrl(path: string, query?: Query): string {
  const url = path.startsWith("/api/") ? path : `${API}${path.startsWith("/") ? "" : "/"}${path}`;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v === undefined || v === null || v === "") continue;
    params.set(k, String(v));
  }
  const qs = params.toString();
  return qs ? `${url}?${qs}` : url;
}

async function toApiError(res: Response): Promise<ApiError> {
  let code = `http_${res.status}`;
  let message = res.statusText || `request failed with status ${res.status}`;
  let fields: FieldError[] = [];
  try {
    const body = await res.json();
    if (body && typeof body === "object" && body.error && typeof body.error === "object") {
      code = String(body.error.code ?? code);
      message = String(body.error.message ?? message);
      if (Array.isArray(body.error.fields)) {
        fields = body.error.fields.filter((f: unknown) => f && typeof f === "object")
          .map((f: FieldError) => ({ field: String(f.field ?? ""), message: String(f.message ?? "") }));
      }
    }
  } catch {
    // Not JSON (a proxy error page, for instance): the status text is all there is.
  }
  return new ApiError(res.status, code, message, fields);
}

/**
 * The API client. Events: `session-expired` (the person must log in again), `refreshed`, and `activity`
 * whenever the number of requests in flight ({@link ApiClient.active}) changes.
 */
export class ApiClient extends EventTarget {
  #generation = 0;
  #active = 0;
  #refreshing: Promise<boolean> | undefined;
  #refreshCount = 0;

  /** How many refresh calls this client made (shown in diagnostics and read by the browser tests). */
  get refreshCount(): number {
    return this.#refreshCount;
  }

  /** Requests in flight (the shell marks the page busy while there are any). */
  get active(): number {
    return this.#active;
  }

  /** Marks a fresh session (after login): requests in flight before it retry without refreshing. */
  sessionStarted(): void {
    this.#generation++;
  }

  /**
   * Calls one operation and resolves with its answer: parsed JSON, `undefined` for 204, the text of a
   * non-JSON answer. Path parameters are filled in (escaped) from `path`. A step-up demand is answered as
   * `#json` describes.
   */
  call<K extends OperationKey>(operation: K, ...[args]: ArgsParam<K>): Promise<Answer<K>> {
    const [method, path] = resolve(operation, args as SentArgs);
    return this.#json<Answer<K>>(method, path, toOptions(args as SentArgs));
  }

  /**
   * Sends one operation and resolves with the 2xx response itself, for answers read as files (exports); no
   * step-up retry.
   */
  fetch<K extends OperationKey>(operation: K, ...[args]: ArgsParam<K>): Promise<Response> {
    const [method, path] = resolve(operation, args as SentArgs);
    return this.#tracked(method, path, toOptions(args as SentArgs));
  }

  /**
   * Asks the person to re-authenticate when a dangerous action answers `reauthentication_required` or
   * `second_factor_required`; resolves with the proof, or undefined (cancelled). Set by the step-up dialog's
   * module.
   */
  stepUp: ((code: string) => Promise<StepUpProof | undefined>) | undefined;

  /**
   * Sends a request and parses a JSON answer; throws {@link ApiError} outside 2xx. A step-up demand opens the
   * step-up dialog and repeats the request with the proof as `step_up` (the one place every route reads it,
   * also where the body has a `password` of its own), again while the server asks for more (the second
   * factor after the password).
   */
  async #json<T>(method: string, path: string, options: RequestOptions): Promise<T> {
    let res: Response | undefined;
    let attempt = options;
    for (let asked = 0; !res; asked++) {
      try {
        res = await this.#tracked(method, path, attempt);
      } catch (err) {
        const wanted = asked < 3 && err instanceof ApiError && STEP_UP_CODES.has(err.code) && this.stepUp;
        const proof = wanted ? await this.stepUp!((err as ApiError).code) : undefined;
        if (!proof) throw err;
        const body = options.body && typeof options.body === "object" ? options.body : {};
        attempt = { ...options, body: { ...body, step_up: proof } };
      }
    }
    if (res.status === 204) return undefined as T;
    const type = res.headers.get("content-type") ?? "";
    if (!type.includes("json")) return (await res.text()) as T;
    return await res.json() as T;
  }

  /** Sends a request with CSRF and refresh handling; resolves with a 2xx response, throws otherwise. */
  async #tracked(method: string, path: string, options: RequestOptions): Promise<Response> {
    this.#setActive(+1);
    try {
      return await this.#request(method, path, options);
    } finally {
      this.#setActive(-1);
    }
  }

  #setActive(delta: number): void {
    this.#active += delta;
    this.dispatchEvent(new Event("activity"));
  }

  async #request(method: string, path: string, options: RequestOptions): Promise<Response> {
    const url = apiUrl(path, options.query);
    const pathname = url.split("?")[0];
    const sentAt = this.#generation;
    let res = await this.#send(method, url, options);
    if (res.status === 401 && !NO_REFRESH.has(pathname)) {
      const refreshed = await this.#refreshAfter(sentAt);
      if (refreshed) {
        // Release the refused response before asking again (its stream would stay open otherwise).
        await res.body?.cancel();
        res = await this.#send(method, url, options);
      }
      if (res.status === 401) {
        this.dispatchEvent(new Event("session-expired"));
        throw await toApiError(res);
      }
    }
    if (!res.ok) throw await toApiError(res);
    return res;
  }

  async #send(method: string, url: string, options: RequestOptions): Promise<Response> {
    const headers = new Headers({ Accept: "application/json" });
    if (method !== "GET" && method !== "HEAD") {
      const token = readCookie(CSRF_COOKIE);
      if (token) headers.set(CSRF_HEADER, token);
    }
    let body: BodyInit | undefined;
    if (options.text) {
      headers.set("Content-Type", options.text.contentType);
      body = options.text.body;
    } else if (options.body !== undefined) {
      headers.set("Content-Type", "application/json");
      body = JSON.stringify(options.body);
    }
    try {
      return await fetch(url, { method, headers, body, credentials: "same-origin", signal: options.signal });
    } catch (err) {
      if ((err as Error).name === "AbortError") throw err;
      throw new ApiError(0, "network", "cannot reach the server; check your connection and try again");
    }
  }

  /** One refresh for every request that failed with the session it was sent with. */
  #refreshAfter(sentAt: number): Promise<boolean> {
    if (sentAt !== this.#generation) return Promise.resolve(true);
    if (!this.#refreshing) {
      this.#refreshing = (async () => {
        this.#refreshCount++;
        try {
          const res = await this.#send("POST", REFRESH_PATH, {});
          // Only the status and the cookies matter; the body is not read.
          await res.body?.cancel();
          if (!res.ok) return false;
          this.#generation++;
          this.dispatchEvent(new Event("refreshed"));
          return true;
        } catch {
          return false;
        } finally {
          this.#refreshing = undefined;
        }
      })();
    }
    return this.#refreshing;
  }
}

/** The client the whole app shares. */
export const api: ApiClient = new ApiClient();
