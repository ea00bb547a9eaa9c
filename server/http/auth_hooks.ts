/**
 * The route hooks the identity module gives `mountRoutes`: who is calling (session cookie first, then
 * `Authorization: Bearer`), and the audit row for every mutating or denied request.
 */
import { queryOne } from "../db/db.ts";
import { HttpError } from "./errors.ts";
import { CSRF_HEADER, timingSafeEqual } from "./csrf.ts";
import { isUuid } from "./json_schema.ts";
import type { RouteContext, RouteHooks, RouteSpec } from "./route.ts";
import { type AuthUser, effectivePermissionsSql } from "../auth/rbac.ts";
import type { AuditEvent } from "../audit/event.ts";
import { SESSION_COOKIE } from "./cookies.ts";
import type { IdentityServices } from "../auth/services.ts";
import type { AccessClaims } from "../auth/tokens.ts";
import { getCookie } from "hono/cookie";
import { API_TOKEN_PREFIX, authenticateApiToken } from "../auth/api_tokens.ts";
import { mustEnrol } from "../auth/mfa_policy.ts";

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Builds the hooks. */
export function createRouteHooks(s: IdentityServices): RouteHooks {
  return {
    async authenticate(c) {
      c.set("clientIp", s.clientIp(c.req.raw.headers));
      const cookie = getCookie(c, SESSION_COOKIE);
      const bearer = bearerToken(c.req.header("authorization"));
      if (bearer?.startsWith(API_TOKEN_PREFIX)) {
        // A script's API token: it acts as its user with that user's permissions now (see api_tokens.ts).
        const hit = await authenticateApiToken(s.ctx.db, bearer);
        if (!hit) return null;
        c.set("auditDetails", { api_token: hit.tokenName });
        return {
          id: hit.userId,
          username: hit.username,
          permissions: new Set(hit.permissions),
          via: "api_token",
        };
      }
      for (const [token, via] of [[cookie, "cookie"], [bearer, "bearer"]] as const) {
        if (!token) continue;
        const claims = await s.signer.verify(token);
        if (!claims) continue;
        const resolved = await resolveUser(s, claims, via);
        if (!resolved) continue;
        const { source, ...user } = resolved;
        if (via === "cookie" && !SAFE_METHODS.has(c.req.method)) await assertCsrfBound(s, c, claims);
        if (!c.req.path.startsWith("/api/v1/auth/") && (await mustEnrol(s.ctx.db, { ...user, source }))) {
          throw new HttpError(
            403,
            "mfa_enrolment_required",
            "set up a second factor first (Settings → Second factors): the MFA policy requires one for you",
          );
        }
        return user;
      }
      return null;
    },
    async audit(c, route, outcome, status) {
      const event = requestAuditEvent(c, route, outcome, status);
      if (outcome === "success") return await s.ctx.audit.record(event);
      try {
        await s.ctx.audit.record(event);
      } catch (err) {
        // The request changed nothing; its answer (often 503 while the database is away) must still reach
        // the client.
        s.ctx.log.error("audit: could not store a refused request", {
          action: event.action,
          path: c.req.path,
          status,
          error: String(err),
        });
      }
    },
    atomically(fn) {
      return s.ctx.db.unitOfWork(fn);
    },
  };
}

/** The `Authorization: Bearer` token, if any. */
export function bearerToken(header: string | undefined): string | undefined {
  const m = /^Bearer\s+([A-Za-z0-9._~+/-]+=*)\s*$/i.exec(header ?? "");
  return m?.[1];
}

/**
 * Loads the caller for verified claims, or null when the user is gone or disabled, the token predates a
 * revocation, or its session was ended. Permissions are read fresh on every request.
 */
async function resolveUser(
  s: IdentityServices,
  claims: AccessClaims,
  via: AuthUser["via"],
): Promise<(AuthUser & { source: string }) | null> {
  if (!isUuid(claims.userId) || !isUuid(claims.sessionId)) return null;
  const row = await queryOne<{
    id: string;
    username: string;
    source: string;
    enabled: boolean;
    tokens_valid_after: Date | null;
    session_live: boolean;
    permissions: string[];
  }>(
    s.ctx.db,
    `SELECT u.id, u.username, u.source, u.enabled, u.tokens_valid_after,
            EXISTS (SELECT 1 FROM refresh_tokens t
                     WHERE t.family_id = $2 AND t.user_id = u.id AND t.revoked_at IS NULL) AS session_live,
            ${effectivePermissionsSql("u.id")} AS permissions
       FROM users u WHERE u.id = $1`,
    [claims.userId, claims.sessionId],
  );
  if (!row || !row.enabled || !row.session_live) return null;
  if (row.tokens_valid_after && claims.issuedAtMs < row.tokens_valid_after.getTime()) return null;
  return {
    id: row.id,
    username: row.username,
    source: row.source,
    permissions: new Set(row.permissions),
    via,
  };
}

/**
 * Double submit alone trusts any cookie the browser holds, including one planted by a sibling sub-domain.
 * The CSRF token is derived from the session, so only the session's own token passes.
 */
async function assertCsrfBound(s: IdentityServices, c: RouteContext, claims: AccessClaims): Promise<void> {
  const header = c.req.header(CSRF_HEADER) ?? "";
  if (!timingSafeEqual(header, await s.signer.csrfToken(claims.sessionId))) {
    throw new HttpError(
      403,
      "csrf_invalid",
      `invalid CSRF token: ${CSRF_HEADER} does not belong to this session; reload the page or log in again`,
    );
  }
}

const ACTION_BY_METHOD: Record<string, string> = {
  POST: "create",
  PUT: "update",
  PATCH: "update",
  DELETE: "delete",
};

/** The audit event for the outcome of a declared route. */
function requestAuditEvent(
  c: RouteContext,
  route: RouteSpec,
  outcome: AuditEvent["outcome"],
  status: number,
): AuditEvent {
  const user = c.get("user");
  const resource = c.get("auditResource") ?? {};
  const pathId = route.path.includes(":id") ? c.req.param("id") : undefined;
  const body = c.get("body");
  const extra = c.get("auditDetails");
  return {
    action: outcome === "denied"
      ? "access_denied"
      : route.audit?.action ?? ACTION_BY_METHOD[route.method] ?? "read",
    outcome,
    actor: { userId: user?.id, username: user?.username },
    resource: {
      type: route.audit?.resourceType ?? route.tag,
      id: resource.id ?? pathId,
      name: resource.name,
    },
    sourceIp: c.get("clientIp"),
    details: {
      method: route.method,
      path: c.req.path,
      status,
      ...(outcome === "denied" ? { required_permission: route.access } : {}),
      ...(body !== undefined ? { body } : {}),
      ...(extra ?? {}),
    },
  };
}
