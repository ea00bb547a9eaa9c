/**
 * Identity and access: local users, sessions (cookies, bearer tokens, rotating refresh tokens), RBAC, and
 * the audit routes. The server creates the audit recorder first (it becomes `ctx.audit`), then the identity:
 *
 * ```ts
 * const audit = createAuditRecorder(base);
 * const ctx = { ...base, audit };
 * const identity = createIdentity(ctx);
 * await identity.start();
 * const app = createApp({ ctx, routes: [...identity.routes, ...others], hooks: identity.hooks });
 * ```
 */
import type { ServerContext } from "../context.ts";
import type { AuditRecorder } from "../audit/event.ts";
import type { RouteHooks, RouteSpec } from "../http/route.ts";
import { auditLogRoutes } from "../audit/routes.ts";
import { startRetentionJob } from "../audit/retention.ts";
import { authRoutes } from "./auth_routes.ts";
import { apiTokenRoutes } from "./api_token_routes.ts";
import { mfaRoutes } from "./mfa_routes.ts";
import { resealLegacyTotpSecrets } from "./mfa.ts";
import { webauthnRoutes } from "./webauthn_routes.ts";
import { mfaPolicyRoutes } from "./mfa_policy_routes.ts";
import { createRouteHooks } from "./hooks.ts";
import { ensureInitialAdmin, initialAdminNotice } from "./initial_admin.ts";
import { seedCatalogue } from "./rbac.ts";
import { createIdentityServices } from "./services.ts";
import { purgeExpiredSessions } from "./sessions.ts";
import { userRoutes } from "./user_routes.ts";
import { roleRoutes } from "./role_routes.ts";
import { userGroupRoutes } from "./user_group_routes.ts";

export { createAuditRecorder } from "../audit/recorder.ts";

/** What the server gets from the identity module. */
export interface Identity {
  /** authenticate (cookie `svc_session` first, then `Authorization: Bearer`) + audit. */
  hooks: RouteHooks;
  /** All identity and audit routes. */
  routes: RouteSpec[];
  /** The recorder from the context (also `ctx.audit`). */
  audit: AuditRecorder;
  /** Seeds permissions and built-in roles, ensures the initial admin, starts the retention job. */
  start(): Promise<void>;
  /**
   * What the operator must be told about the initial admin once the server answers at `url` (the login on
   * the first start, a reminder on later ones until the password is changed); empty when nothing.
   */
  startupNotice(url: string): Promise<string[]>;
  /** Stops the retention job. */
  stop(): Promise<void>;
}

/** Builds the identity module for a context whose `audit` is already set. */
export function createIdentity(ctx: ServerContext): Identity {
  const services = createIdentityServices(ctx);
  let stopRetention: (() => Promise<void>) | undefined;
  let createdAdmin = false;
  return {
    hooks: createRouteHooks(services),
    routes: [
      ...authRoutes(services),
      ...userRoutes(services),
      ...roleRoutes(services),
      ...userGroupRoutes(services),
      ...auditLogRoutes(ctx),
      ...apiTokenRoutes(services),
      ...mfaRoutes(services),
      ...webauthnRoutes(services),
      ...mfaPolicyRoutes(services),
    ],
    audit: ctx.audit,
    async start() {
      await seedCatalogue(ctx.db);
      const { resealed, unreadable } = await resealLegacyTotpSecrets(ctx.db, services.sealer);
      if (resealed > 0) ctx.log.info("TOTP secrets sealed again under the TOTP key", { count: resealed });
      if (unreadable > 0) {
        ctx.log.warn(
          "TOTP secrets sealed under a former session secret cannot be opened: those users log in with a " +
            "backup code, or an administrator resets their second factors (Settings → Users)",
          { count: unreadable },
        );
      }
      createdAdmin = await ensureInitialAdmin(ctx);
      stopRetention = startRetentionJob({
        db: ctx.db,
        log: ctx.log,
        audit: ctx.audit,
        days: ctx.config.audit.retentionDays,
        alsoRun: () => purgeExpiredSessions(ctx.db),
      });
    },
    startupNotice: (url) => initialAdminNotice(ctx, { created: createdAdmin, url }),
    async stop() {
      await stopRetention?.();
      stopRetention = undefined;
    },
  };
}
