/**
 * What the `/api/v1/auth/*` routes share (server/http/routes/auth.ts registers them, the login steps are in
 * auth_login.ts): the `/auth/me` answer and its schema, the session cookies, the directory login, the login
 * audit, the end of a successful login, and the refusals more than one route gives.
 */
import type { Context } from "hono";
import { HttpError, unauthorized } from "../errors.ts";
import { objectSchema } from "../json_schema.ts";
import type { RouteContext } from "../route.ts";
import type { AuditEvent } from "../../audit/event.ts";
import { setSessionCookies } from "../cookies.ts";
import { effectivePermissions, identityTransaction } from "../../auth/rbac.ts";
import { factorsOf, hasSecondFactor } from "../../auth/mfa.ts";
import { mustEnrol } from "../../auth/mfa_policy.ts";
import { createLoginThrottle, createWindowLimiter } from "../../auth/rate_limit.ts";
import { startSession } from "../../auth/sessions.ts";
import type { IdentityServices } from "../../auth/services.ts";
import { getUser, type User } from "../../auth/users.ts";
import { ldapAuthenticate, LdapError, parseGroupMap } from "../../auth/ldap.ts";
import { disableLdapUser, syncLdapUser } from "../../auth/ldap_users.ts";
import { relyingPartyOf } from "../../auth/webauthn.ts";

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

/** What `/auth/me` answers. */
export const ME_SCHEMA = objectSchema({
  user: objectSchema({
    id: { type: "string", format: "uuid" },
    username: { type: "string" },
    email: { type: "string" },
    full_name: { type: "string" },
    source: { type: "string" },
  }),
  permissions: { type: "array", items: { type: "string" } },
  edition: { type: "string", enum: ["community"] },
  features: objectSchema({
    scoped_role_bindings: { type: "boolean" },
    mfa: { type: "boolean" },
    ldap: { type: "boolean" },
  }),
  second_factor: objectSchema({
    totp: { type: "boolean" },
    backup_codes_left: { type: "integer" },
    webauthn: { type: "integer" },
    enrolment_required: {
      type: "boolean",
      description: "The MFA policy requires a second factor and there is none: enrol before anything else",
    },
  }),
});

/** What login and refresh answer: {@link ME_SCHEMA} and when the access token expires. */
export const SESSION_SCHEMA = objectSchema({
  ...ME_SCHEMA.properties,
  expires_at: { type: "string", format: "date-time" },
});

/**
 * Login and refresh are exempt from the CSRF header (they set the cookie). A browser marks a request made by
 * another site's page `Sec-Fetch-Site: cross-site`; refusing those stops login CSRF (being logged into the
 * attacker's account) and cross-site refresh. Non-browser clients send no such header.
 */
export function refuseCrossSite(c: RouteContext): void {
  if (c.req.header("sec-fetch-site") === "cross-site") {
    throw new HttpError(
      403,
      "cross_site",
      "this request came from another site; open svc directly and try again",
    );
  }
}

/** 429 with `Retry-After`, after too many failed `what` (e.g. `login attempts`). */
export function rateLimited(what: string, waitSeconds: number): HttpError {
  return new HttpError(
    429,
    "rate_limited",
    `too many failed ${what}; try again in ${waitSeconds} seconds`,
    undefined,
    { "Retry-After": String(waitSeconds) },
  );
}

/**
 * Passkey challenges (a passkey login without a first step) one client address may ask for per window: a
 * person needs one per attempt; each stores a pending row until it expires.
 */
export const PASSKEY_CHALLENGE_LIMIT = { max: 30, windowSeconds: 300 } as const;

/**
 * What the auth routes share, built once per server: the session cookies, the `/auth/me` answer, the
 * directory login, the login audit and the end of a successful login, with the limiters they count in.
 */
export function authKit(s: IdentityServices) {
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
  return {
    s,
    ctx,
    security,
    throttle,
    passkeyChallenges,
    rp,
    issueCookies,
    me,
    groupMap,
    ldapLogin,
    authEvent,
    finishLogin,
  };
}

export type AuthKit = ReturnType<typeof authKit>;
