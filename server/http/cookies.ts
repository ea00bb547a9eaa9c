/**
 * The three session cookies. `svc_session` (access JWT) and `svc_refresh` (refresh token, sent only to the
 * refresh endpoint) are httpOnly; `svc_csrf` is readable by scripts for double submit. All are Secure and
 * SameSite=Strict.
 */
import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { CSRF_COOKIE } from "./csrf.ts";

/** Access-token cookie. */
export const SESSION_COOKIE = "svc_session";
/** Refresh-token cookie. */
export const REFRESH_COOKIE = "svc_refresh";
/** Path the refresh cookie is limited to. */
export const REFRESH_PATH = "/api/v1/auth/refresh";

/** Sets all three cookies after login, refresh or a password change. */
export function setSessionCookies(
  c: Context,
  values: {
    access: string;
    refresh: string;
    csrf: string;
    refreshTtlSeconds: number;
  },
): void {
  const base = { secure: true, sameSite: "Strict" as const };
  // The cookie outlives the token inside it (whose `exp` is what counts): an expired session cookie still
  // tells logout which session to revoke, and a 401 on it sends the client to refresh.
  setCookie(c, SESSION_COOKIE, values.access, {
    ...base,
    httpOnly: true,
    path: "/",
    maxAge: values.refreshTtlSeconds,
  });
  setCookie(c, REFRESH_COOKIE, values.refresh, {
    ...base,
    httpOnly: true,
    path: REFRESH_PATH,
    maxAge: values.refreshTtlSeconds,
  });
  setCookie(c, CSRF_COOKIE, values.csrf, {
    ...base,
    httpOnly: false,
    path: "/",
    maxAge: values.refreshTtlSeconds,
  });
}

/** Expires all three cookies. */
export function clearSessionCookies(c: Context): void {
  const base = { secure: true, sameSite: "Strict" as const };
  deleteCookie(c, SESSION_COOKIE, { ...base, path: "/" });
  deleteCookie(c, REFRESH_COOKIE, { ...base, path: REFRESH_PATH });
  deleteCookie(c, CSRF_COOKIE, { ...base, path: "/" });
}

/** Reads a cookie. */
export function readCookie(c: Context, name: string): string | undefined {
  return getCookie(c, name);
}
