/**
 * `/api/v1/auth/webauthn/*`: a person's own security keys and passkeys (register with step-up, list, remove
 * with step-up), and `/api/v1/auth/step-up/webauthn/options`, the challenge a step-up answers with a key.
 * The login with a key is in auth_login.ts (it ends in the session the password login starts).
 *
 * @module
 */
import { notFoundError } from "../../core/errors.ts";
import { auditResource, body, caller, type RouteContext, type RouteSpec, uuidParam } from "../route.ts";
import { closedObject, objectSchema } from "../json_schema.ts";
import type { IdentityServices } from "../../auth/services.ts";
import { checkStepUp, maskCodes, STEP_UP_BODY } from "../step_up.ts";
import {
  finishRegistration,
  listCredentials,
  relyingPartyOf,
  removeCredential,
  rpIdFor,
  startAuthentication,
  startRegistration,
} from "../../auth/webauthn.ts";
import { getUser } from "../../auth/users.ts";
import { authRoute as route } from "./tags.ts";

const OPTIONS_SCHEMA = objectSchema({
  token: { type: "string", description: "Names the challenge; send it back with the key's answer" },
  options: { type: "object", description: "PublicKeyCredential creation or request options (JSON form)" },
});

const CREDENTIAL_SCHEMA = objectSchema({
  id: { type: "string", format: "uuid" },
  name: { type: "string" },
  created_at: { type: "string", format: "date-time" },
  last_used_at: { type: ["string", "null"], format: "date-time", description: "Null until first used" },
});

/** The RP ID of the page that asked (its Origin header, when it is one of the configured origins). */
export function requestRpId(s: IdentityServices, c: RouteContext): string {
  return rpIdFor(relyingPartyOf(s.ctx.config), c.req.header("origin"));
}

/** The routes. */
export function webauthnRoutes(s: IdentityServices): RouteSpec[] {
  const { db } = s.ctx;
  const rp = relyingPartyOf(s.ctx.config);
  const asJson = (c: { id: string; name: string; createdAt: Date; lastUsedAt: Date | null }) => ({
    id: c.id,
    name: c.name,
    created_at: c.createdAt.toISOString(),
    last_used_at: c.lastUsedAt?.toISOString() ?? null,
  });
  return [
    route("GET /api/v1/auth/webauthn/credentials", "authenticated", {
      summary: "Your security keys and passkeys",
      responses: {
        "200": {
          description: "Keys, oldest first",
          schema: objectSchema({ items: { type: "array", items: CREDENTIAL_SCHEMA } }),
        },
      },
      handler: async (c) => c.json({ items: (await listCredentials(db, caller(c).id)).map(asJson) }),
    }),
    route("POST /api/v1/auth/webauthn/register/options", "authenticated", {
      summary:
        "Start registering a security key or passkey (step-up): options for navigator.credentials.create",
      audit: { resourceType: "user", action: "mfa.webauthn_start" },
      body: STEP_UP_BODY,
      responses: { "200": { description: "The challenge", schema: OPTIONS_SCHEMA } },
      handler: async (c) => {
        const me = caller(c);
        auditResource(c, { id: me.id, name: me.username });
        await checkStepUp(s.stepUp, db, c);
        const user = await getUser(db, me.id);
        const started = await startRegistration(
          db,
          rp,
          { id: me.id, username: me.username, fullName: user?.full_name },
          requestRpId(s, c),
        );
        c.header("cache-control", "no-store");
        return c.json(started);
      },
    }),
    route("POST /api/v1/auth/webauthn/register", "authenticated", {
      summary: "Finish registering: the key's answer and a name for it",
      audit: { resourceType: "user", action: "mfa.webauthn_register" },
      body: closedObject({
        token: { type: "string", maxLength: 64 },
        name: { type: "string", minLength: 1, maxLength: 100 },
        response: {
          type: "object",
          description: "PublicKeyCredential.toJSON() of navigator.credentials.create",
        },
      }, ["token", "name", "response"]),
      responses: {
        "201": { description: "Registered", schema: CREDENTIAL_SCHEMA },
        "400": { description: "The answer was refused (`webauthn_failed`), or the registration expired" },
        "409": { description: "The key is registered already, or the name is taken" },
      },
      handler: async (c) => {
        const me = caller(c);
        auditResource(c, { id: me.id, name: me.username });
        const input = body<{ token: string; name: string; response: never }>(c);
        maskCodes(c, ["token", "response"]);
        const created = await finishRegistration(db, rp, me.id, input);
        return c.json(asJson(created), 201);
      },
    }),
    route("DELETE /api/v1/auth/webauthn/credentials/:id", "authenticated", {
      summary: "Remove one of your security keys (step-up)",
      audit: { resourceType: "user", action: "mfa.webauthn_remove" },
      body: STEP_UP_BODY,
      responses: { "204": { description: "Removed" }, "404": { description: "No such key of yours" } },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const me = caller(c);
        auditResource(c, { id: me.id, name: me.username });
        await checkStepUp(s.stepUp, db, c);
        if (!(await removeCredential(db, me.id, id))) throw notFoundError("security key");
        return c.body(null, 204);
      },
    }),
    route("POST /api/v1/auth/step-up/webauthn/options", "authenticated", {
      summary: "A challenge for your security key, to send as `webauthn` with a step-up",
      audit: { resourceType: "user", action: "auth.step_up_webauthn_start" },
      responses: { "200": { description: "The challenge", schema: OPTIONS_SCHEMA } },
      handler: async (c) => {
        const me = caller(c);
        const started = await startAuthentication(db, rp, { userId: me.id, rpId: requestRpId(s, c) });
        c.header("cache-control", "no-store");
        return c.json(started);
      },
    }),
  ];
}
