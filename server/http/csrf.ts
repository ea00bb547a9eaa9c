/**
 * Double-submit CSRF check: every POST, PUT, PATCH and DELETE under `/api/` must carry `X-CSRF-Token`
 * equal to the `svc_csrf` cookie. Login and refresh are exempt because they are what sets the cookie.
 * Bearer-token clients are not exempt: a script logs in, keeps the cookie jar and echoes the cookie.
 */
import type { MiddlewareHandler } from "hono";
import { getCookie } from "hono/cookie";
import { HttpError } from "./errors.ts";

/** Cookie holding the CSRF token (readable by scripts). */
export const CSRF_COOKIE = "svc_csrf";
/** Header that must echo it. */
export const CSRF_HEADER = "X-CSRF-Token";

// The second login step is a login too: no cookie yet; its single-use token from the first step stands in.
const EXEMPT = new Set([
  "/api/v1/auth/login",
  "/api/v1/auth/login/second-factor",
  "/api/v1/auth/login/webauthn/options",
  "/api/v1/auth/login/webauthn",
  "/api/v1/auth/refresh",
]);
const SAFE = new Set(["GET", "HEAD", "OPTIONS"]);

/** Constant-time string comparison. */
export function timingSafeEqual(a: string, b: string): boolean {
  const ea = new TextEncoder().encode(a);
  const eb = new TextEncoder().encode(b);
  let diff = ea.length ^ eb.length;
  for (let i = 0; i < Math.max(ea.length, eb.length); i++) diff |= (ea[i] ?? 0) ^ (eb[i] ?? 0);
  return diff === 0;
}

/** The CSRF middleware. */
export function csrfProtection(): MiddlewareHandler {
  return async (c, next) => {
    if (SAFE.has(c.req.method) || !c.req.path.startsWith("/api/") || EXEMPT.has(c.req.path)) {
      return await next();
    }
    const cookie = getCookie(c, CSRF_COOKIE);
    const header = c.req.header(CSRF_HEADER);
    if (!cookie || !header) {
      throw new HttpError(
        403,
        "csrf_missing",
        `missing CSRF token: send the ${CSRF_COOKIE} cookie value in the ${CSRF_HEADER} header`,
      );
    }
    if (!timingSafeEqual(cookie, header)) {
      throw new HttpError(
        403,
        "csrf_invalid",
        `invalid CSRF token: ${CSRF_HEADER} must equal the ${CSRF_COOKIE} cookie`,
      );
    }
    await next();
  };
}
