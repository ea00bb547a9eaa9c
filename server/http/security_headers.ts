/** Security headers on every HTTP response of the web port. */
import type { MiddlewareHandler } from "hono";

/** Content Security Policy: no inline scripts; styles may be inline (web components set them). */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

/**
 * The headers every response of the web port carries: the app's own answers, its error answers, and the ones
 * the port writes before a request reaches the app (oversized body, malformed request, refused certificate).
 */
export function securityHeaderEntries(path: string): [string, string][] {
  const entries: [string, string][] = [
    ["Content-Security-Policy", CONTENT_SECURITY_POLICY],
    ["X-Frame-Options", "DENY"],
    ["X-Content-Type-Options", "nosniff"],
    ["Strict-Transport-Security", "max-age=63072000; includeSubDomains"],
    ["Referrer-Policy", "strict-origin-when-cross-origin"],
    ["Permissions-Policy", "camera=(), microphone=(), geolocation=()"],
    ["Cross-Origin-Opener-Policy", "same-origin"],
  ];
  if (path.startsWith("/api/")) entries.push(["Cache-Control", "no-store"]);
  return entries;
}

/** Sets {@link securityHeaderEntries} on `headers`. */
export function applySecurityHeaders(headers: Headers, path: string): void {
  for (const [name, value] of securityHeaderEntries(path)) headers.set(name, value);
}

/** Adds the headers after the handler ran (also on errors). */
export function securityHeaders(): MiddlewareHandler {
  return async (c, next) => {
    await next();
    applySecurityHeaders(c.res.headers, c.req.path);
  };
}
