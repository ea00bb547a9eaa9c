/**
 * `/api/v1/auth/mfa/*`: a person's own second factors (set up an authenticator app, confirm it, remove it,
 * new backup codes), and `/api/v1/users/{id}/mfa/reset` for administrators.
 *
 * Setting up, removing and regenerating need step-up re-authentication (password, plus the current second
 * factor when there is one), so a borrowed session cannot swap the factor for the attacker's. Resetting
 * someone else's factors needs `user:edit`, every permission the target can reach (the escalation guard of
 * all user management) and the administrator's own step-up; it ends the target's sessions.
 *
 * @module
 */
import { HttpError } from "../errors.ts";
import { closedObject, objectSchema } from "../json_schema.ts";
import { auditResource, body, caller, type RouteSpec, uuidParam } from "../route.ts";
import { authRoute as route, usersRoute } from "./tags.ts";
import { notFoundError } from "../../core/errors.ts";
import {
  confirmTotp,
  factorsOf,
  removeFactors,
  replaceBackupCodes,
  startTotpEnrolment,
} from "../../auth/mfa.ts";
import { mfaRequiredFor } from "../../auth/mfa_policy.ts";
import { assertHolds, identityTransaction, reachablePermissionsOfUser } from "../../auth/rbac.ts";
import type { IdentityServices } from "../../auth/services.ts";
import { revokeAllSessions } from "../../auth/sessions.ts";
import { checkStepUp, maskCodes, STEP_UP_BODY } from "../step_up.ts";
import { base32Encode, otpauthUri } from "../../auth/totp.ts";
import { getUser } from "../../auth/users.ts";

const BACKUP_CODES_SCHEMA = objectSchema({
  backup_codes: {
    type: "array",
    items: { type: "string" },
    description: "Ten single-use codes, shown this once; each replaces a code from the app one time",
  },
});

/** The routes. */
export function mfaRoutes(s: IdentityServices): RouteSpec[] {
  const { db } = s.ctx;
  return [
    route("GET /api/v1/auth/mfa", "authenticated", {
      summary: "Your second factors and whether the MFA policy requires one of you",
      responses: {
        "200": {
          description: "Factors",
          schema: objectSchema({
            totp: { type: "boolean" },
            totp_pending: { type: "boolean" },
            backup_codes_left: { type: "integer" },
            webauthn: { type: "integer" },
            required: { type: "boolean" },
            available: {
              type: "boolean",
              description: "Always true: TOTP secrets have a key of their own (kept for older clients)",
            },
          }),
        },
      },
      handler: async (c) => {
        const me = caller(c);
        const f = await factorsOf(db, me.id);
        return c.json({
          totp: f.totp,
          totp_pending: f.totpPending,
          backup_codes_left: f.backupCodesLeft,
          webauthn: f.webauthn,
          required: await mfaRequiredFor(db, me.id),
          // Always true since TOTP secrets have a key of their own; kept for clients that read it.
          available: true,
        });
      },
    }),
    route("POST /api/v1/auth/mfa/totp", "authenticated", {
      summary:
        "Start setting up an authenticator app: a new secret and its otpauth URI (confirm with a code)",
      audit: { resourceType: "user", action: "mfa.totp_start" },
      body: STEP_UP_BODY,
      responses: {
        "200": {
          description: "The secret (base32) and the otpauth URI to show as a QR code",
          schema: objectSchema({ secret: { type: "string" }, otpauth_uri: { type: "string" } }),
        },
        "409": { description: "An authenticator is already set up, or the server has no JWT secret" },
      },
      handler: async (c) => {
        const me = caller(c);
        auditResource(c, { id: me.id, name: me.username });
        await checkStepUp(s.stepUp, db, c);
        const secret = await startTotpEnrolment(db, s.sealer, me.id);
        c.header("cache-control", "no-store");
        return c.json({ secret: base32Encode(secret), otpauth_uri: otpauthUri(secret, me.username) });
      },
    }),
    route("POST /api/v1/auth/mfa/totp/confirm", "authenticated", {
      summary: "Finish setting up the authenticator app with a code it shows; answers the backup codes once",
      audit: { resourceType: "user", action: "mfa.totp_enrol" },
      body: closedObject({ code: { type: "string", maxLength: 16 } }, ["code"]),
      responses: {
        "200": { description: "Set up; the backup codes", schema: BACKUP_CODES_SCHEMA },
        "400": { description: "The code does not match" },
        "409": { description: "No setup was started" },
      },
      handler: async (c) => {
        const me = caller(c);
        auditResource(c, { id: me.id, name: me.username });
        const { code } = body<{ code: string }>(c);
        maskCodes(c, ["code"]);
        const codes = await db.transaction((tx) => confirmTotp(tx, s.sealer, me.id, code.trim()));
        c.header("cache-control", "no-store");
        return c.json({ backup_codes: codes });
      },
    }),
    route("DELETE /api/v1/auth/mfa/totp", "authenticated", {
      summary: "Remove your authenticator app and backup codes (step-up with a code or backup code)",
      audit: { resourceType: "user", action: "mfa.totp_remove" },
      body: STEP_UP_BODY,
      responses: { "204": { description: "Removed" } },
      handler: async (c) => {
        const me = caller(c);
        auditResource(c, { id: me.id, name: me.username });
        await checkStepUp(s.stepUp, db, c);
        await removeFactors(db, me.id, { webauthn: false });
        return c.body(null, 204);
      },
    }),
    route("POST /api/v1/auth/mfa/backup-codes", "authenticated", {
      summary: "New backup codes (the old ones stop working; step-up required)",
      audit: { resourceType: "user", action: "mfa.backup_codes" },
      body: STEP_UP_BODY,
      responses: { "200": { description: "The new codes", schema: BACKUP_CODES_SCHEMA } },
      handler: async (c) => {
        const me = caller(c);
        auditResource(c, { id: me.id, name: me.username });
        await checkStepUp(s.stepUp, db, c);
        if (!(await factorsOf(db, me.id)).totp) {
          throw new HttpError(
            409,
            "no_second_factor",
            "set up an authenticator app first; backup codes come with it",
          );
        }
        const codes = await db.transaction((tx) => replaceBackupCodes(tx, me.id));
        c.header("cache-control", "no-store");
        return c.json({ backup_codes: codes });
      },
    }),
    usersRoute("POST /api/v1/users/:id/mfa/reset", "user:edit", {
      summary:
        "Remove every second factor of a user (lost phone); their sessions end. Needs user:edit, every permission " +
        "they can reach, and your own step-up",
      audit: { resourceType: "user", action: "mfa.reset" },
      body: STEP_UP_BODY,
      responses: { "204": { description: "Reset; the user logs in with the password and enrols again" } },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const me = caller(c);
        const target = await getUser(db, id);
        if (!target) throw notFoundError("user");
        auditResource(c, { id, name: target.username });
        if (id !== me.id) {
          assertHolds(
            me,
            await reachablePermissionsOfUser(db, id),
            `reset the second factors of ${target.username}`,
          );
        }
        await checkStepUp(s.stepUp, db, c);
        const before = await factorsOf(db, id);
        await identityTransaction(db, async (tx) => {
          await removeFactors(tx, id, { webauthn: true });
          await revokeAllSessions(tx, id);
        });
        c.set("auditDetails", {
          removed: { totp: before.totp, backup_codes: before.backupCodesLeft, webauthn: before.webauthn },
        });
        return c.body(null, 204);
      },
    }),
  ];
}
