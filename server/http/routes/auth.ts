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
import type { Context } from "hono";
import { getCookie } from "hono/cookie";
import { badRequest, HttpError, unauthorized } from "../errors.ts";
import { auditResource, body, caller, type RouteContext, type RouteSpec } from "../route.ts";
import type { AuditEvent } from "../../audit/event.ts";
import { bearerToken } from "../auth_hooks.ts";
import { clearSessionCookies, REFRESH_COOKIE, SESSION_COOKIE, setSessionCookies } from "../cookies.ts";
import { checkPasswordRules, MAX_PASSWORD_LENGTH, verifyPassword } from "../../auth/password.ts";
import { effectivePermissions, identityTransaction } from "../../auth/rbac.ts";
import { factorsOf, hasSecondFactor, useSecondFactor } from "../../auth/mfa.ts";
import { mustEnrol } from "../../auth/mfa_policy.ts";
import {
  consumePendingLogin,
  createPendingLogin,
  failPendingLogin,
  findPendingLogin,
} from "../../auth/pending_logins.ts";
import { createLoginThrottle, createWindowLimiter } from "../../auth/rate_limit.ts";
import { maskCodes } from "../step_up.ts";
import { afterUnit } from "../../db/db.ts";
import { revokeSession, rotateRefreshToken, startSession } from "../../auth/sessions.ts";
import type { IdentityServices } from "../../auth/services.ts";
import { isWellFormedToken } from "../../auth/tokens.ts";
import {
  findUserForLogin,
  getUser,
  passwordHashOf,
  setPassword,
  type User,
  USERNAME_PATTERN,
} from "../../auth/users.ts";
import { ldapAuthenticate, LdapError, parseGroupMap } from "../../auth/ldap.ts";
import { disableLdapUser, syncLdapUser } from "../../auth/ldap_users.ts";
import { relyingPartyOf, startAuthentication, verifyAssertion, WebAuthnError } from "../../auth/webauthn.ts";
import { requestRpId } from "./webauthn.ts";

/** What `/auth/me` (and login) answer. */
export interface MeResponse {
  user: { id: string; username: string; email: string; full_name: string; source: string };
  permissions: string[];
  edition: "community";
  features: { scoped_role_bindings: false; mfa: true; ldap: boolean };
  /** The caller's second factors. */
  second_factor: { totp: boolean; backup_codes_left: number; webauthn: number; enrolment_required: boolean };
  /** When the access token expires (login and refresh only). */
  expires_at?: string;
}

const ME_SCHEMA = {
  type: "object",
  properties: {
    user: {
      type: "object",
      properties: {
        id: { type: "string", format: "uuid" },
        username: { type: "string" },
        email: { type: "string" },
        full_name: { type: "string" },
        source: { type: "string" },
      },
    },
    permissions: { type: "array", items: { type: "string" } },
    edition: { type: "string", enum: ["community"] },
    features: {
      type: "object",
      properties: {
        scoped_role_bindings: { type: "boolean" },
        mfa: { type: "boolean" },
        ldap: { type: "boolean" },
      },
    },
    second_factor: {
      type: "object",
      properties: {
        totp: { type: "boolean" },
        backup_codes_left: { type: "integer" },
        webauthn: { type: "integer" },
        enrolment_required: {
          type: "boolean",
          description:
            "The MFA policy requires a second factor and there is none: enrol before anything else",
        },
      },
    },
    expires_at: { type: "string" },
  },
};

const SECOND_FACTOR_SCHEMA = {
  type: "object",
  properties: {
    second_factor_required: {
      type: "object",
      properties: {
        token: { type: "string", description: "Send to /api/v1/auth/login/second-factor" },
        methods: { type: "array", items: { type: "string", enum: ["totp", "backup_code", "webauthn"] } },
        expires_at: { type: "string", format: "date-time" },
      },
    },
  },
};

const INVALID_CREDENTIALS = "invalid username or password";

/**
 * Login and refresh are exempt from the CSRF header (they set the cookie). A browser marks a request made by
 * another site's page `Sec-Fetch-Site: cross-site`; refusing those stops login CSRF (being logged into the
 * attacker's account) and cross-site refresh. Non-browser clients send no such header.
 */
function refuseCrossSite(c: RouteContext): void {
  if (c.req.header("sec-fetch-site") === "cross-site") {
    throw new HttpError(
      403,
      "cross_site",
      "this request came from another site; open svc directly and try again",
    );
  }
}

/**
 * Passkey challenges (a passkey login without a first step) one client address may ask for per window: a
 * person needs one per attempt; each stores a pending row until it expires.
 */
export const PASSKEY_CHALLENGE_LIMIT = { max: 30, windowSeconds: 300 } as const;

/** The auth routes. */
export function authRoutes(s: IdentityServices): RouteSpec[] {
  const { ctx } = s;
  const security = ctx.config.security;
  const throttle = createLoginThrottle(ctx.db);
  const passkeyChallenges = createWindowLimiter(ctx.db, PASSKEY_CHALLENGE_LIMIT);
  const rp = relyingPartyOf(ctx.config);

  /** Signs an access token for a session and sets the three cookies (the CSRF token is the session's). */
  const issueCookies = async (
    c: Context,
    options: { userId: string; sessionId: string; refresh: string; notBeforeMs?: number },
  ): Promise<Date> => {
    const { token, expiresAt } = await s.signer.sign({
      userId: options.userId,
      sessionId: options.sessionId,
      issuedAtMs: Math.max(Date.now(), options.notBeforeMs ?? 0),
    }, security.accessTokenTtlSeconds);
    setSessionCookies(c, {
      access: token,
      refresh: options.refresh,
      csrf: await s.signer.csrfToken(options.sessionId),
      refreshTtlSeconds: security.refreshTokenTtlSeconds,
    });
    return expiresAt;
  };

  const me = async (userId: string): Promise<MeResponse> => {
    const user = await getUser(ctx.db, userId);
    if (!user) throw unauthorized();
    const factors = await factorsOf(ctx.db, userId);
    const permissions = await effectivePermissions(ctx.db, userId);
    return {
      user: {
        id: user.id,
        username: user.username,
        email: user.email,
        full_name: user.full_name,
        source: user.source,
      },
      permissions,
      edition: "community",
      features: { scoped_role_bindings: false, mfa: true, ldap: ctx.config.ldap.url !== "" },
      second_factor: {
        totp: factors.totp,
        backup_codes_left: factors.backupCodesLeft,
        webauthn: factors.webauthn,
        enrolment_required: !hasSecondFactor(factors) &&
          (await mustEnrol(ctx.db, { id: user.id, source: user.source, permissions: new Set(permissions) })),
      },
    };
  };

  const groupMap = parseGroupMap(ctx.config.ldap.groupMap);

  /**
   * A directory login: the svc user on success (created or refreshed), else the failure kind. A directory
   * that cannot be used is a 503 for the person and an error naming the fix in the log.
   */
  const ldapLogin = async (
    username: string,
    password: string,
  ): Promise<{ user?: User; failure?: string }> => {
    try {
      const identity = await ldapAuthenticate(ctx.config.ldap, username, password);
      const user = await identityTransaction(ctx.db, (tx) => syncLdapUser(tx, identity, groupMap, ctx.log));
      if (!user) {
        ctx.log.warn("ldap: a local account has this username; the directory user cannot log in", {
          username,
        });
        return { failure: "ldap_name_taken_by_local_user" };
      }
      return { user };
    } catch (err) {
      if (!(err instanceof LdapError)) throw err;
      if (err.kind === "unreachable" || err.kind === "bad_bind") {
        ctx.log.error(err.message, { kind: err.kind });
        throw new HttpError(
          503,
          "directory_unavailable",
          "the user directory cannot be used right now; try again later or ask an administrator",
        );
      }
      if (err.kind === "ambiguous" || err.kind === "refused_username") ctx.log.error(err.message);
      if (err.kind === "not_found" && (await disableLdapUser(ctx.db, username))) {
        ctx.log.info("ldap: the directory no longer has this user; disabled in svc", { username });
      }
      return { failure: `ldap_${err.kind}` };
    }
  };

  const authEvent = (c: RouteContext, event: Omit<AuditEvent, "sourceIp">): Promise<void> =>
    ctx.audit.record({ ...event, sourceIp: c.get("clientIp") });

  /** Starts the session of a fully authenticated user, audits the login, answers like `/auth/me`. */
  const finishLogin = async (
    c: RouteContext,
    user: { id: string; username: string },
    details: { method: string },
  ): Promise<Response> => {
    const session = await startSession(ctx.db, {
      userId: user.id,
      ttlSeconds: security.refreshTokenTtlSeconds,
    });
    const expiresAt = await issueCookies(c, {
      userId: user.id,
      sessionId: session.familyId,
      refresh: session.token,
    });
    await authEvent(c, {
      action: "auth.login",
      outcome: "success",
      actor: { userId: user.id, username: user.username },
      resource: { type: "user", id: user.id, name: user.username },
      ...(details.method === "password" ? {} : { details: { second_factor: details.method } }),
    });
    return c.json({ ...(await me(user.id)), expires_at: expiresAt.toISOString() });
  };

  return [
    {
      method: "POST",
      path: "/api/v1/auth/login",
      summary: "Log in with username and password",
      tag: "auth",
      access: "public",
      body: {
        type: "object",
        required: ["username", "password"],
        additionalProperties: false,
        properties: {
          username: { type: "string", minLength: 1, maxLength: 128 },
          password: { type: "string", minLength: 1, maxLength: MAX_PASSWORD_LENGTH },
        },
      },
      responses: {
        "200": {
          description:
            "Logged in (sets svc_session, svc_refresh and svc_csrf), or, for a user with a second factor, " +
            "no cookie but `second_factor_required` for the next step",
          schema: {
            ...ME_SCHEMA,
            properties: { ...ME_SCHEMA.properties, ...SECOND_FACTOR_SCHEMA.properties },
          },
        },
        "401": { description: "Wrong username or password (the same answer for both)" },
        "429": {
          description:
            "Too many unsuccessful attempts from this address, or for this account from this address; see Retry-After",
        },
      },
      async handler(c) {
        refuseCrossSite(c);
        const { username, password } = body<{ username: string; password: string }>(c);
        const ip = s.clientIp(c.req.raw.headers);
        c.set("clientIp", ip);
        const verdict = await throttle.attempt(username, ip);
        if (!verdict.allowed) {
          ctx.log.warn("auth: login throttled", {
            ip,
            reason: verdict.reason,
            retry_after: verdict.retryAfterSeconds,
          });
          throw rateLimited("login attempts", verdict.retryAfterSeconds);
        }
        const wellFormed = new RegExp(USERNAME_PATTERN).test(username);
        let user = wellFormed ? await findUserForLogin(ctx.db, username) : undefined;
        let ok: boolean;
        let ldapFailure: string | undefined;
        if (ctx.config.ldap.url && wellFormed && (!user || user.source === "ldap")) {
          // Directory users: the directory checks the password; svc keeps the row in sync.
          const outcome = await ldapLogin(username, password);
          ok = outcome.user !== undefined && outcome.user.enabled;
          ldapFailure = outcome.failure;
          if (outcome.user) user = { ...outcome.user, password_hash: "" };
        } else {
          const usable = user && user.enabled && user.source === "local" ? user.password_hash : undefined;
          ok = await verifyPassword(password, usable);
        }
        await verdict.settle(ok && user !== undefined);
        if (!ok || !user) {
          await authEvent(c, {
            action: "auth.login",
            outcome: "failure",
            actor: { username },
            resource: { type: "user", id: user?.id, name: username },
            details: {
              reason: ldapFailure ?? (!user ? "unknown_user" : !user.enabled ? "disabled" : "wrong_password"),
            },
          });
          throw new HttpError(401, "invalid_credentials", INVALID_CREDENTIALS);
        }
        const factors = await factorsOf(ctx.db, user.id);
        if (hasSecondFactor(factors)) {
          const pending = await createPendingLogin(ctx.db, { userId: user.id, purpose: "second_factor" });
          await authEvent(c, {
            action: "auth.login_password",
            outcome: "success",
            actor: { userId: user.id, username: user.username },
            resource: { type: "user", id: user.id, name: user.username },
            details: { next: "second_factor" },
          });
          c.header("cache-control", "no-store");
          return c.json({
            second_factor_required: {
              token: pending.token,
              methods: [
                ...(factors.totp ? ["totp"] : []),
                ...(factors.totp || factors.backupCodesLeft > 0 ? ["backup_code"] : []),
                ...(factors.webauthn > 0 ? ["webauthn"] : []),
              ],
              expires_at: pending.expiresAt.toISOString(),
            },
          });
        }
        return await finishLogin(c, user, { method: "password" });
      },
    },
    {
      method: "POST",
      path: "/api/v1/auth/login/second-factor",
      summary: "Second login step: the token from the first step and a TOTP code or a backup code",
      tag: "auth",
      access: "public",
      body: {
        type: "object",
        required: ["token"],
        additionalProperties: false,
        properties: {
          token: { type: "string", maxLength: 64 },
          code: { type: "string", maxLength: 16, description: "6 digits from the authenticator app" },
          backup_code: { type: "string", maxLength: 32, description: "One of the backup codes" },
        },
      },
      responses: {
        "200": { description: "Logged in; sets svc_session, svc_refresh and svc_csrf", schema: ME_SCHEMA },
        "400": { description: "Neither code nor backup_code" },
        "401": {
          description:
            "Wrong or already used code (`invalid_code`), or the first step expired or was used (`login_expired`)",
        },
        "429": { description: "Too many wrong codes for this account from this address; see Retry-After" },
      },
      async handler(c) {
        refuseCrossSite(c);
        const input = body<{ token: string; code?: string; backup_code?: string }>(c);
        maskCodes(c, ["code", "backup_code", "token"]);
        const ip = s.clientIp(c.req.raw.headers);
        c.set("clientIp", ip);
        if (!input.code && !input.backup_code) {
          throw badRequest("send code (6 digits from your authenticator app) or backup_code", [
            { field: "code", message: "is required (or backup_code)" },
          ]);
        }
        const pending = await findPendingLogin(ctx.db, input.token, "second_factor");
        const user = pending?.userId ? await getUser(ctx.db, pending.userId) : undefined;
        if (!pending || !user || !user.enabled) {
          await authEvent(c, {
            action: "auth.login_second_factor",
            outcome: "failure",
            actor: { userId: user?.id, username: user?.username },
            resource: { type: "user", id: user?.id, name: user?.username },
            details: { reason: !pending ? "expired_or_used" : "disabled" },
          });
          throw loginExpired();
        }
        // Counted with the password attempts' machinery under its own account key (user ids hold no ':', and
        // usernames cannot), so replicas share the count.
        const verdict = await throttle.attempt(`second-factor:${user.id}`, ip);
        if (!verdict.allowed) throw rateLimited("codes", verdict.retryAfterSeconds);
        const method = await useSecondFactor(ctx.db, s.sealer, user.id, {
          code: input.code,
          backupCode: input.backup_code,
        });
        await verdict.settle(method !== undefined);
        if (!method) {
          const left = await failPendingLogin(ctx.db, pending.id);
          await authEvent(c, {
            action: "auth.login_second_factor",
            outcome: "failure",
            actor: { userId: user.id, username: user.username },
            resource: { type: "user", id: user.id, name: user.username },
            details: { reason: input.code ? "wrong_or_reused_code" : "wrong_backup_code", tries_left: left },
          });
          if (left === 0) throw loginExpired();
          throw new HttpError(
            401,
            "invalid_code",
            input.code
              ? "the code is wrong or was already used: type the code the app shows now (a used code works once)"
              : "the backup code is wrong or was already used",
          );
        }
        if (!(await consumePendingLogin(ctx.db, pending.id))) throw loginExpired();
        return await finishLogin(c, user, { method });
      },
    },
    {
      method: "POST",
      path: "/api/v1/auth/login/webauthn/options",
      summary:
        "A challenge for a security key: with the token of the first step (second factor), or without one for a " +
        "passkey login with no username",
      tag: "auth",
      access: "public",
      body: {
        type: "object",
        additionalProperties: false,
        properties: { token: { type: "string", maxLength: 64, description: "From second_factor_required" } },
      },
      responses: {
        "200": {
          description: "Options for navigator.credentials.get; `token` (passkey login) names the challenge",
          schema: { type: "object", properties: { token: { type: "string" }, options: { type: "object" } } },
        },
        "401": { description: "The first step expired or was used (`login_expired`)" },
        "429": { description: "Too many passkey challenges for this address (no token); see Retry-After" },
      },
      async handler(c) {
        refuseCrossSite(c);
        const input = body<{ token?: string }>(c);
        maskCodes(c, ["token"]);
        c.set("clientIp", s.clientIp(c.req.raw.headers));
        c.header("cache-control", "no-store");
        const rpId = requestRpId(s, c);
        if (input.token === undefined) {
          // Anyone may ask, and each answer stores a challenge: so many per address, counted in the database.
          const wait = await passkeyChallenges.take(ctx.db, `passkey-options:${c.get("clientIp")}`);
          if (wait > 0) {
            throw new HttpError(
              429,
              "rate_limited",
              `too many passkey sign-in attempts from this address; try again in ${wait} seconds`,
              undefined,
              { "Retry-After": String(wait) },
            );
          }
          return c.json(await startAuthentication(ctx.db, rp, { rpId }));
        }
        const pending = await findPendingLogin(ctx.db, input.token, "second_factor");
        if (!pending?.userId || (await factorsOf(ctx.db, pending.userId)).webauthn === 0) {
          throw loginExpired();
        }
        const started = await startAuthentication(ctx.db, rp, {
          userId: pending.userId,
          pendingId: pending.id,
          rpId,
        });
        return c.json({ options: started.options });
      },
    },
    {
      method: "POST",
      path: "/api/v1/auth/login/webauthn",
      summary:
        "Log in with a security key: the second step after the password, or a passkey alone (token from the " +
        "options without a first step)",
      tag: "auth",
      access: "public",
      body: {
        type: "object",
        required: ["token", "response"],
        additionalProperties: false,
        properties: {
          token: { type: "string", maxLength: 64 },
          response: {
            type: "object",
            description: "PublicKeyCredential.toJSON() of navigator.credentials.get",
          },
        },
      },
      responses: {
        "200": { description: "Logged in; sets svc_session, svc_refresh and svc_csrf", schema: ME_SCHEMA },
        "401": {
          description:
            "The key's answer was refused (`invalid_assertion`), or the challenge expired or was used",
        },
        "429": {
          description: "Too many refused answers for this account from this address; see Retry-After",
        },
      },
      async handler(c) {
        refuseCrossSite(c);
        const input = body<{ token: string; response: { id?: unknown } }>(c);
        maskCodes(c, ["token", "response"]);
        const ip = s.clientIp(c.req.raw.headers);
        c.set("clientIp", ip);
        const second = await findPendingLogin(ctx.db, input.token, "second_factor");
        const pending = second ?? (await findPendingLogin(ctx.db, input.token, "webauthn_login"));
        const kind = second ? "second_factor" : "passkey";
        const failure = async (reason: string, user?: { id: string; username: string }) =>
          await authEvent(c, {
            action: "auth.login_webauthn",
            outcome: "failure",
            actor: { userId: user?.id, username: user?.username },
            resource: { type: "user", id: user?.id, name: user?.username },
            details: { reason, step: kind },
          });
        if (!pending?.challenge || (kind === "passkey" && pending.userId)) {
          await failure("expired_or_used");
          throw loginExpired();
        }
        const bound = pending.userId ? await getUser(ctx.db, pending.userId) : undefined;
        // The account key: the user of the first step, else the credential named (a passkey login has no
        // user until the signature checks out); ids hold no ':' and usernames cannot.
        const credential = typeof input.response?.id === "string" ? input.response.id.slice(0, 200) : "";
        const verdict = await throttle.attempt(
          bound ? `second-factor:${bound.id}` : `passkey:${credential}`,
          ip,
        );
        if (!verdict.allowed) throw rateLimited("security key attempts", verdict.retryAfterSeconds);
        // A passkey login's challenge works once, whatever the outcome; a first step survives a few tries.
        if (kind === "passkey" && !(await consumePendingLogin(ctx.db, pending.id))) {
          await verdict.settle(false);
          await failure("expired_or_used");
          throw loginExpired();
        }
        let found: { userId: string; name: string } | undefined;
        let reason = "";
        try {
          found = await verifyAssertion(ctx.db, rp, {
            challenge: pending.challenge,
            userId: bound?.id,
            response: input.response as never,
          });
        } catch (err) {
          if (!(err instanceof WebAuthnError)) throw err;
          reason = err.reason;
        }
        const user = found ? await getUser(ctx.db, found.userId) : bound;
        const ok = found !== undefined && user !== undefined && user.enabled;
        await verdict.settle(ok);
        if (!ok || !user) {
          if (kind === "second_factor") await failPendingLogin(ctx.db, pending.id);
          await failure(reason || "disabled", user);
          throw new HttpError(
            401,
            "invalid_assertion",
            "the security key's answer was refused: use a key registered for this account and try again",
          );
        }
        if (kind === "second_factor" && !(await consumePendingLogin(ctx.db, pending.id))) {
          throw loginExpired();
        }
        return await finishLogin(c, user, { method: kind === "passkey" ? "passkey" : "webauthn" });
      },
    },
    {
      method: "POST",
      path: "/api/v1/auth/refresh",
      summary: "Exchange the refresh cookie for a new session (the refresh token rotates)",
      tag: "auth",
      access: "public",
      responses: {
        "200": { description: "New svc_session, svc_refresh and svc_csrf cookies", schema: ME_SCHEMA },
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
    },
    {
      method: "POST",
      path: "/api/v1/auth/logout",
      summary: "End the current session and clear the cookies",
      tag: "auth",
      // Public so an expired session can still be ended; the CSRF check still applies.
      access: "public",
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
    },
    {
      method: "GET",
      path: "/api/v1/auth/me",
      summary: "The current user, their permissions and the edition's features",
      tag: "auth",
      access: "authenticated",
      responses: { "200": { description: "Current user", schema: ME_SCHEMA } },
      async handler(c) {
        return c.json(await me(caller(c).id));
      },
    },
    {
      method: "PUT",
      path: "/api/v1/auth/password",
      summary: "Change your own password (the current one is required); other sessions end",
      tag: "auth",
      access: "authenticated",
      audit: { resourceType: "user", action: "user.password_change" },
      body: {
        type: "object",
        required: ["current_password", "new_password"],
        additionalProperties: false,
        properties: {
          current_password: { type: "string", minLength: 1, maxLength: MAX_PASSWORD_LENGTH },
          new_password: { type: "string", minLength: 1, maxLength: MAX_PASSWORD_LENGTH },
        },
      },
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
    },
  ];
}

/** 401 `login_expired`: the first login step must be done again. */
function loginExpired(): HttpError {
  return new HttpError(
    401,
    "login_expired",
    "this login attempt expired, was used or had too many wrong codes: log in again with your password",
  );
}

/** 429 with `Retry-After`, after too many failed `what` (e.g. `login attempts`). */
function rateLimited(what: string, waitSeconds: number): HttpError {
  return new HttpError(
    429,
    "rate_limited",
    `too many failed ${what}; try again in ${waitSeconds} seconds`,
    undefined,
    { "Retry-After": String(waitSeconds) },
  );
}
