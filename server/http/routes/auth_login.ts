/**
 * The login steps of `/api/v1/auth/*` (registered by server/http/routes/auth.ts): the password step, the
 * second-factor step with a TOTP or backup code, and the passkey challenge and answer, as a second factor or
 * as a login on their own. Every step is throttled in the database and audited with its outcome.
 */
import { badRequest, HttpError } from "../errors.ts";
import { closedObject, objectSchema } from "../json_schema.ts";
import { body, type RouteSpec } from "../route.ts";
import { MAX_PASSWORD_LENGTH, verifyPassword } from "../../auth/password.ts";
import { factorsOf, hasSecondFactor, useSecondFactor } from "../../auth/mfa.ts";
import {
  consumePendingLogin,
  createPendingLogin,
  failPendingLogin,
  findPendingLogin,
} from "../../auth/pending_logins.ts";
import { maskCodes } from "../step_up.ts";
import { findUserForLogin, getUser, USERNAME_PATTERN } from "../../auth/users.ts";
import { startAuthentication, verifyAssertion, WebAuthnError } from "../../auth/webauthn.ts";
import { requestRpId } from "./webauthn.ts";
import { type AuthKit, rateLimited, refuseCrossSite, SESSION_SCHEMA } from "./auth_kit.ts";
import { authRoute as route } from "./tags.ts";

const SECOND_FACTOR_SCHEMA = objectSchema({
  second_factor_required: objectSchema({
    token: { type: "string", description: "Send to /api/v1/auth/login/second-factor" },
    methods: { type: "array", items: { type: "string", enum: ["totp", "backup_code", "webauthn"] } },
    expires_at: { type: "string", format: "date-time" },
  }),
});

const INVALID_CREDENTIALS = "invalid username or password";

/** The first login step: username and password (local or directory), then a session or a second-factor step. */
export function loginRoute(kit: AuthKit): RouteSpec {
  const { s, ctx, throttle, ldapLogin, authEvent, finishLogin } = kit;
  return route("POST /api/v1/auth/login", "public", {
    summary: "Log in with username and password",
    body: closedObject({
      username: { type: "string", minLength: 1, maxLength: 128 },
      password: { type: "string", minLength: 1, maxLength: MAX_PASSWORD_LENGTH },
    }, ["username", "password"]),
    responses: {
      "200": {
        description:
          "Logged in (sets svc_session, svc_refresh and svc_csrf), or, for a user with a second factor, " +
          "no cookie but `second_factor_required` for the next step",
        // One of two answers, so no field is always there: the session, or only `second_factor_required`.
        schema: {
          type: "object",
          required: [],
          properties: { ...SESSION_SCHEMA.properties, ...SECOND_FACTOR_SCHEMA.properties },
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
  });
}

/** The second login step: a TOTP or backup code for the pending login of the first step. */
export function secondFactorLoginRoute(kit: AuthKit): RouteSpec {
  const { s, ctx, throttle, authEvent, finishLogin } = kit;
  return route("POST /api/v1/auth/login/second-factor", "public", {
    summary: "Second login step: the token from the first step and a TOTP code or a backup code",
    body: closedObject({
      token: { type: "string", maxLength: 64 },
      code: { type: "string", maxLength: 16, description: "6 digits from the authenticator app" },
      backup_code: { type: "string", maxLength: 32, description: "One of the backup codes" },
    }, ["token"]),
    responses: {
      "200": { description: "Logged in; sets svc_session, svc_refresh and svc_csrf", schema: SESSION_SCHEMA },
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
  });
}

/** A passkey challenge: for the pending login of the first step, or for a passkey login without one. */
export function passkeyOptionsRoute(kit: AuthKit): RouteSpec {
  const { s, ctx, passkeyChallenges, rp } = kit;
  return route("POST /api/v1/auth/login/webauthn/options", "public", {
    summary:
      "A challenge for a security key: with the token of the first step (second factor), or without one for a " +
      "passkey login with no username",
    body: closedObject({
      token: { type: "string", maxLength: 64, description: "From second_factor_required" },
    }),
    responses: {
      "200": {
        description: "Options for navigator.credentials.get; `token` (passkey login) names the challenge",
        schema: objectSchema({ token: { type: "string" }, options: { type: "object" } }),
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
  });
}

/** The answer to a passkey challenge: a second factor, or a passkey login on its own. */
export function passkeyLoginRoute(kit: AuthKit): RouteSpec {
  const { s, ctx, throttle, rp, authEvent, finishLogin } = kit;
  return route("POST /api/v1/auth/login/webauthn", "public", {
    summary:
      "Log in with a security key: the second step after the password, or a passkey alone (token from the " +
      "options without a first step)",
    body: closedObject({
      token: { type: "string", maxLength: 64 },
      response: {
        type: "object",
        description: "PublicKeyCredential.toJSON() of navigator.credentials.get",
      },
    }, ["token", "response"]),
    responses: {
      "200": { description: "Logged in; sets svc_session, svc_refresh and svc_csrf", schema: SESSION_SCHEMA },
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
  });
}

/** 401 `login_expired`: the first login step must be done again. */
function loginExpired(): HttpError {
  return new HttpError(
    401,
    "login_expired",
    "this login attempt expired, was used or had too many wrong codes: log in again with your password",
  );
}
