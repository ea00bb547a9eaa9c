/**
 * Identity and access: local users, sessions (bearer tokens, rotating refresh tokens), second factors, RBAC.
 * These are rules over the database; they throw `DomainError` and know nothing about HTTP. Their REST face
 * (routes in server/http/routes/, the request hooks in server/http/auth_hooks.ts) is built from
 * {@link Identity.services}. The server creates the audit recorder first (it becomes `ctx.audit`), then the
 * identity:
 *
 * ```ts
 * const audit = createAuditRecorder(base);
 * const ctx = { ...base, audit };
 * const identity = createIdentity(ctx);
 * await identity.start();
 * const app = createApp({ ctx, routes: buildRoutes(ctx, identity), hooks: createRouteHooks(identity.services) });
 * ```
 */
import type { ServerContext } from "../context.ts";
import type { AuditRecorder } from "../audit/event.ts";
import { startRetentionJob } from "../audit/retention.ts";
import { resealLegacyTotpSecrets } from "./mfa.ts";
import { ensureInitialAdmin, initialAdminNotice } from "./initial_admin.ts";
import { seedCatalogue } from "./rbac.ts";
import { createIdentityServices, type IdentityServices } from "./services.ts";
import { purgeExpiredSessions } from "./sessions.ts";

export { createAuditRecorder } from "../audit/recorder.ts";

/** What the server gets from the identity module. */
export interface Identity {
  /** What the identity's routes and request hooks share (token signer, limiters, step-up, …). */
  services: IdentityServices;
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
    services,
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
