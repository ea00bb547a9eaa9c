/**
 * `/api/v1/auth/*`: login, refresh, logout, the current user, and changing one's own password.
 *
 * Login is one or two steps. `POST /api/v1/auth/login` checks the password; a user without a second factor
 * gets the session cookies at once. A user with one gets no cookie but `second_factor_required` (an opaque single-use
 * token good for 5 minutes and 5 wrong codes, and the methods they may use), then
 * `POST /api/v1/auth/login/second-factor` with that token and a TOTP code or a backup code starts the
 * session. Both steps are throttled in the database and audited with their outcome.
 *
 * Scripts use the same double submit as the browser: `POST /api/v1/auth/login` with a cookie jar, then send
 * the `svc_csrf` cookie value in `X-CSRF-Token` on every POST/PUT/PATCH/DELETE. A client that prefers
 * `Authorization: Bearer` takes the `svc_session` cookie value as the token and still echoes `svc_csrf`.
 */
import { getCookie } from "hono/cookie";
import { badRequest, HttpError, unauthorized } from "../errors.ts";
import { auditResource, body, caller, type RouteSpec } from "../route.ts";
import { bearerToken } from "../auth_hooks.ts";
import { clearSessionCookies, REFRESH_COOKIE, SESSION_COOKIE } from "../cookies.ts";
import { checkPasswordRules, MAX_PASSWORD_LENGTH, verifyPassword } from "../../auth/password.ts";
import { identityTransaction } from "../../auth/rbac.ts";
import { afterUnit } from "../../db/db.ts";
import { revokeSession, rotateRefreshToken, startSession } from "../../auth/sessions.ts";
import type { IdentityServices } from "../../auth/services.ts";
import { isWellFormedToken } from "../../auth/tokens.ts";
import { getUser, passwordHashOf, setPassword } from "../../auth/users.ts";
import {
  type AuthKit,
  authKit,
  ME_SCHEMA,
  rateLimited,
  refuseCrossSite,
  SESSION_SCHEMA,
} from "./auth_kit.ts";
import { loginRoute, passkeyLoginRoute, passkeyOptionsRoute, secondFactorLoginRoute } from "./auth_login.ts";
import { authRoute as route } from "./tags.ts";
import { closedObject } from "../json_schema.ts";

/** The auth routes: the login steps (password, second factor, passkey), then the session's own routes. */
export function authRoutes(s: IdentityServices): RouteSpec[] {
  const kit = authKit(s);
  return [
    loginRoute(kit),
    secondFactorLoginRoute(kit),
    passkeyOptionsRoute(kit),
    passkeyLoginRoute(kit),
    refreshRoute(kit),
    logoutRoute(kit),
    meRoute(kit),
    changePasswordRoute(kit),
  ];
}

/** A new access token from the refresh token (rotating it), keeping the session alive. */
function refreshRoute(kit: AuthKit): RouteSpec {
  const { s, ctx, security, issueCookies, me, authEvent } = kit;
  return route("POST /api/v1/auth/refresh", "public", {
    summary: "Exchange the refresh cookie for a new session (the refresh token rotates)",
    responses: {
      "200": { description: "New svc_session, svc_refresh and svc_csrf cookies", schema: SESSION_SCHEMA },
      "401": { description: "No, expired or revoked refresh token; a replayed one ends the whole session" },
    },
    async handler(c) {
      refuseCrossSite(c);
      c.set("clientIp", s.clientIp(c.req.raw.headers));
      const presented = getCookie(c, REFRESH_COOKIE);
      if (!isWellFormedToken(presented)) {
        clearSessionCookies(c);
        throw unauthorized("no valid refresh token: log in again");
      }
      const result = await ctx.db.transaction((tx) =>
        rotateRefreshToken(tx, { token: presented, ttlSeconds: security.refreshTokenTtlSeconds })
      );
      if (result.kind === "reused") {
        const user = await getUser(ctx.db, result.userId);
        await authEvent(c, {
          action: "auth.refresh_reuse",
          outcome: "denied",
          actor: { userId: result.userId, username: user?.username },
          resource: { type: "session", id: result.familyId, name: user?.username },
          details: { reason: "a refresh token was presented twice; the session was revoked" },
        });
      }
      if (result.kind !== "rotated") {
        clearSessionCookies(c);
        throw unauthorized("the session has ended: log in again");
      }
      const { issued } = result;
      const expiresAt = await issueCookies(c, {
        userId: issued.userId,
        sessionId: issued.familyId,
        refresh: issued.token,
      });
      return c.json({ ...(await me(issued.userId)), expires_at: expiresAt.toISOString() });
    },
  });
}

/** Ends the session and clears its cookies. */
function logoutRoute(kit: AuthKit): RouteSpec {
  const { s, ctx, authEvent } = kit;
  // Public so an expired session can still be ended; the CSRF check still applies.
  return route("POST /api/v1/auth/logout", "public", {
    summary: "End the current session and clear the cookies",
    responses: { "204": { description: "Session revoked (when there was one) and cookies cleared" } },
    async handler(c) {
      c.set("clientIp", s.clientIp(c.req.raw.headers));
      const token = getCookie(c, SESSION_COOKIE) ?? bearerToken(c.req.header("authorization"));
      const claims = token ? await s.signer.verify(token, { allowExpired: true }) : undefined;
      if (claims) {
        await revokeSession(ctx.db, claims.sessionId);
        const user = await getUser(ctx.db, claims.userId);
        await authEvent(c, {
          action: "auth.logout",
          outcome: "success",
          actor: { userId: user?.id, username: user?.username },
          resource: { type: "user", id: claims.userId, name: user?.username },
        });
      }
      clearSessionCookies(c);
      return c.body(null, 204);
    },
  });
}

/** The signed-in user, permissions and second-factor state. */
function meRoute(kit: AuthKit): RouteSpec {
  const { me } = kit;
  return route("GET /api/v1/auth/me", "authenticated", {
    summary: "The current user, their permissions and the edition's features",
    responses: { "200": { description: "Current user", schema: ME_SCHEMA } },
    async handler(c) {
      return c.json(await me(caller(c).id));
    },
  });
}

/** Changes one's own password (the current one proves it), ending the other sessions. */
function changePasswordRoute(kit: AuthKit): RouteSpec {
  const { s, ctx, security, issueCookies } = kit;
  return route("PUT /api/v1/auth/password", "authenticated", {
    summary: "Change your own password (the current one is required); other sessions end",
    audit: { resourceType: "user", action: "user.password_change" },
    body: closedObject({
      current_password: { type: "string", minLength: 1, maxLength: MAX_PASSWORD_LENGTH },
      new_password: { type: "string", minLength: 1, maxLength: MAX_PASSWORD_LENGTH },
    }, ["current_password", "new_password"]),
    responses: {
      "204": { description: "Changed; this client receives a fresh session, every other session ends" },
      "400": { description: "The new password breaks the rules" },
      "403": { description: "The current password is wrong" },
    },
    async handler(c) {
      const user = caller(c);
      auditResource(c, { id: user.id, name: user.username });
      const input = body<{ current_password: string; new_password: string }>(c);
      const keys = [`user:${user.username.toLowerCase()}`];
      const wait = await s.limiter.retryAfter(ctx.db, keys);
      if (wait > 0) throw rateLimited("attempts", wait);
      const hash = await passwordHashOf(ctx.db, user.id);
      if (!(await verifyPassword(input.current_password, hash))) {
        // The refusal rolls this request's unit of work back; the count is kept after it.
        await afterUnit(() => s.limiter.fail(ctx.db, keys));
        throw new HttpError(403, "wrong_password", "current_password is not your current password", [
          { field: "current_password", message: "is not your current password" },
        ]);
      }
      checkPasswordRules(input.new_password, "new_password");
      if (input.new_password === input.current_password) {
        throw badRequest("new_password must differ from the current password", [
          { field: "new_password", message: "must differ from the current password" },
        ]);
      }
      const cutoff = await identityTransaction(
        ctx.db,
        (tx) => setPassword(tx, user.id, input.new_password),
      );
      const session = await startSession(ctx.db, {
        userId: user.id,
        ttlSeconds: security.refreshTokenTtlSeconds,
      });
      await issueCookies(c, {
        userId: user.id,
        sessionId: session.familyId,
        refresh: session.token,
        notBeforeMs: cutoff,
      });
      return c.body(null, 204);
    },
  });
}
