/**
 * Session tokens: the HS256 access JWT (jose), opaque refresh tokens (only their SHA-256 is stored) and the
 * session's CSRF token.
 *
 * Access claims: `sub` (user id), `sid` (session = refresh-token family) and `iat_ms` (issue time in
 * milliseconds, compared with `users.tokens_valid_after`, so a token issued in the same second as a
 * revocation, but before it, is still refused).
 *
 * The CSRF token is derived from the session (HMAC of `sid` under the server key) rather than random: the
 * server can check that a header belongs to the session, so a `svc_csrf` cookie planted by a sibling
 * sub-domain (plain double submit trusts any cookie the browser holds) is refused, and refresh re-issues the
 * same value without trusting the cookie it was sent.
 */
import { errors as joseErrors, jwtVerify, SignJWT } from "jose";
import type { Logger } from "../core/log.ts";

const ISSUER = "svc-server";
const AUDIENCE = "svc-api";

/** What an access token says once verified. */
export interface AccessClaims {
  userId: string;
  sessionId: string;
  /** Issue time in milliseconds. */
  issuedAtMs: number;
  /** Expiry in seconds since the epoch. */
  exp: number;
}

/** Signs and verifies access tokens with the server's HS256 key, and derives CSRF tokens. */
export interface TokenSigner {
  sign(claims: Omit<AccessClaims, "exp">, ttlSeconds: number): Promise<{ token: string; expiresAt: Date }>;
  /** Verifies signature and claims; `allowExpired` is for logout only (revoking an expired session). */
  verify(token: string, options?: { allowExpired?: boolean }): Promise<AccessClaims | undefined>;
  /** The CSRF token of a session. */
  csrfToken(sessionId: string): Promise<string>;
}

/**
 * The signer for `secret` (JWT_SECRET). An empty secret logs a warning and uses a random per-boot key, so
 * sessions do not survive a restart and differ between replicas.
 */
export function createTokenSigner(secret: string, log: Logger): TokenSigner {
  let key: Uint8Array<ArrayBuffer>;
  if (secret === "") {
    log.warn(
      "auth: JWT_SECRET is not set; using a random per-boot key, so sessions end at restart and are not " +
        "shared between replicas (set security.jwt_secret or JWT_SECRET, e.g. from: openssl rand -hex 32)",
    );
    key = crypto.getRandomValues(new Uint8Array(32));
  } else {
    key = new TextEncoder().encode(secret);
  }
  const hmac = crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return {
    async sign(claims, ttlSeconds) {
      const nowSeconds = Math.floor(claims.issuedAtMs / 1000);
      const exp = nowSeconds + ttlSeconds;
      const token = await new SignJWT({ sid: claims.sessionId, iat_ms: claims.issuedAtMs })
        .setProtectedHeader({ alg: "HS256", typ: "JWT" })
        .setSubject(claims.userId)
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setIssuedAt(nowSeconds)
        .setExpirationTime(exp)
        .sign(key);
      return { token, expiresAt: new Date(exp * 1000) };
    },
    async verify(token, options = {}) {
      try {
        const { payload } = await jwtVerify(token, key, {
          algorithms: ["HS256"],
          issuer: ISSUER,
          audience: AUDIENCE,
          requiredClaims: ["sub", "exp", "iat"],
          // The epoch as "now" disables the expiry check: used only to find the session to revoke at logout.
          currentDate: options.allowExpired ? new Date(0) : undefined,
        });
        const { sub, sid, iat_ms: iatMs, exp } = payload as Record<string, unknown>;
        if (typeof sub !== "string" || typeof sid !== "string") return undefined;
        if (typeof iatMs !== "number" || !Number.isFinite(iatMs) || typeof exp !== "number") return undefined;
        return { userId: sub, sessionId: sid, issuedAtMs: iatMs, exp };
      } catch (err) {
        if (err instanceof joseErrors.JOSEError) return undefined;
        throw err;
      }
    },
    async csrfToken(sessionId) {
      const mac = await crypto.subtle.sign(
        "HMAC",
        await hmac,
        new TextEncoder().encode(`svc-csrf:${sessionId}`),
      );
      return base64Url(new Uint8Array(mac));
    },
  };
}

/** A new random token (refresh token): 32 random bytes, base64url. */
export function randomToken(): string {
  return base64Url(crypto.getRandomValues(new Uint8Array(32)));
}

/** SHA-256 hex of a refresh token, as stored in `refresh_tokens.token_hash`. */
export async function hashToken(token: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** True when `value` looks like a token {@link randomToken} produced. */
export function isWellFormedToken(value: string | undefined): value is string {
  return value !== undefined && /^[A-Za-z0-9_-]{43}$/.test(value);
}

function base64Url(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}
