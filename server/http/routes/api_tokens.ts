/**
 * `/api/v1/api-tokens` and `/api/v1/service-accounts`: tokens for scripts.
 *
 * Anyone signed in may create, list and revoke their own tokens. Doing so for another user or a service
 * account needs `user:edit` and, as for every way of acting as someone, every permission that account can
 * reach (otherwise a token would be a way around the escalation guard). Service accounts are users with
 * `source = 'service'` and no password; their roles are bound like any user's (`/api/v1/users/{id}/role-bindings`).
 * Creating a token always needs a person: a signed-in session and step-up re-authentication (`password`,
 * plus `code`, `backup_code` or a security key when the caller has a second factor). A token is a standing
 * way to act as its account without a second factor, so a stolen session (or a password alone) must not
 * yield one, and a token cannot mint tokens: a child token would outlive the revocation of its parent.
 * The token's plaintext is in the create response only; audit rows of requests made with a token name the
 * token's user, like a login would.
 */
import { closedObject, type JsonSchema, objectSchema, UUID_SCHEMA } from "../json_schema.ts";
import { auditResource, body, caller, type RouteContext, type RouteSpec, uuidParam } from "../route.ts";
import { notFoundError } from "../../core/errors.ts";
import { OPTIONAL_NAME_PATTERN, VISIBLE_NAME_PATTERN } from "./common.ts";
import {
  type ApiTokenRecord,
  createApiToken,
  createServiceAccount,
  getApiToken,
  listApiTokens,
  MAX_API_TOKEN_DAYS,
  revokeApiToken,
} from "../../auth/api_tokens.ts";
import { assertHolds, reachablePermissionsOfUser } from "../../auth/rbac.ts";
import type { IdentityServices } from "../../auth/services.ts";
import { getUser, USERNAME_PATTERN } from "../../auth/users.ts";
import { checkStepUp, STEP_UP_PROPERTIES, takeStepUpProof } from "../step_up.ts";
import { HttpError } from "../errors.ts";
import { apiTokensRoute as route } from "./tags.ts";

const TOKEN_SCHEMA: JsonSchema = objectSchema({
  id: UUID_SCHEMA,
  name: { type: "string" },
  user_id: UUID_SCHEMA,
  username: { type: "string" },
  hint: { type: "string", description: "First characters of the token, to tell tokens apart" },
  created_by: { type: "string" },
  created_at: { type: "string", format: "date-time" },
  expires_at: { type: "string", format: "date-time" },
  last_used_at: { type: ["string", "null"], format: "date-time" },
  revoked_at: { type: ["string", "null"], format: "date-time" },
});

/** Throws unless the caller may manage tokens of `userId` (self, or `user:edit` plus everything they reach). */
async function assertMayManage(s: IdentityServices, c: RouteContext, userId: string): Promise<void> {
  const me = caller(c);
  if (userId === me.id) return;
  const target = await getUser(s.ctx.db, userId);
  if (!target) throw notFoundError("user");
  assertHolds(me, ["user:edit"], `manage API tokens of ${target.username}`);
  assertHolds(
    me,
    await reachablePermissionsOfUser(s.ctx.db, userId),
    `create a token acting as ${target.username}`,
  );
}

/** The routes. */
export function apiTokenRoutes(s: IdentityServices): RouteSpec[] {
  const { db } = s.ctx;
  return [
    route("GET /api/v1/api-tokens", "authenticated", {
      summary: "List API tokens: your own, or everyone's with user:view (user_id narrows to one user)",
      query: { user_id: { ...UUID_SCHEMA, description: "Only this user's tokens" } },
      responses: {
        "200": { description: "Tokens, newest first", schema: { type: "array", items: TOKEN_SCHEMA } },
      },
      handler: async (c) => {
        const me = caller(c);
        const wanted = c.req.query("user_id");
        const everyone = me.permissions.has("user:view");
        if (wanted && wanted !== me.id && !everyone) {
          assertHolds(me, ["user:view"], "list other users' API tokens");
        }
        return c.json(await listApiTokens(db, wanted ?? (everyone ? undefined : me.id)));
      },
    }),
    route("POST /api/v1/api-tokens", "authenticated", {
      summary:
        "Create an API token (shown once) for yourself, or for another user or service account with user:edit; " +
        "needs a signed-in session and step-up re-authentication (an API token cannot create tokens)",
      audit: { resourceType: "api_token", action: "api_token.create" },
      body: closedObject({
        name: { type: "string", minLength: 1, maxLength: 100, pattern: VISIBLE_NAME_PATTERN },
        expires_in_days: { type: "integer", minimum: 1, maximum: MAX_API_TOKEN_DAYS },
        user_id: { ...UUID_SCHEMA, description: "Whose token (default: yours)" },
        ...STEP_UP_PROPERTIES,
      }, ["name", "expires_in_days"]),
      responses: {
        "201": {
          description: "The token: `token` is its only appearance; send it as Authorization: Bearer",
          schema: objectSchema({ token: { type: "string" }, api_token: TOKEN_SCHEMA }),
        },
      },
      handler: async (c) => {
        const input = body<{ name: string; expires_in_days: number; user_id?: string }>(c);
        const me = caller(c);
        const userId = input.user_id?.toLowerCase() ?? me.id;
        auditResource(c, { name: input.name });
        const proof = takeStepUpProof(c);
        if (me.via === "api_token") {
          throw new HttpError(
            403,
            "api_token_cannot_create_tokens",
            "an API token cannot create API tokens: create tokens from a signed-in session (the web console " +
              "or POST /api/v1/auth/login) with step-up re-authentication",
          );
        }
        await assertMayManage(s, c, userId);
        await checkStepUp(s.stepUp, db, c, proof);
        const { token, record } = await createApiToken(db, {
          userId,
          name: input.name,
          days: input.expires_in_days,
          createdBy: me.username,
        });
        auditResource(c, { id: record.id, name: `${record.username}/${record.name}` });
        c.set("auditDetails", { user: record.username, expires_at: record.expires_at.toISOString() });
        return c.json({ token, api_token: record }, 201);
      },
    }),
    route("DELETE /api/v1/api-tokens/:id", "authenticated", {
      summary: "Revoke an API token (yours, or another user's with user:edit)",
      audit: { resourceType: "api_token", action: "api_token.revoke" },
      responses: { "200": { description: "The revoked token", schema: TOKEN_SCHEMA } },
      handler: async (c) => {
        const id = uuidParam(c, "id");
        const existing: ApiTokenRecord | undefined = await getApiToken(db, id);
        if (!existing) throw notFoundError("API token");
        auditResource(c, { id, name: `${existing.username}/${existing.name}` });
        await assertMayManage(s, c, existing.user_id);
        return c.json(await revokeApiToken(db, id));
      },
    }),
    route("POST /api/v1/service-accounts", "user:create", {
      summary: "Create a service account: a user without a password that acts only through API tokens",
      audit: { resourceType: "user", action: "service_account.create" },
      body: closedObject({
        username: { type: "string", pattern: USERNAME_PATTERN },
        full_name: { type: "string", maxLength: 200, pattern: OPTIONAL_NAME_PATTERN },
      }, ["username"]),
      responses: {
        "201": {
          description: "The service account (a user with source service)",
          schema: objectSchema({
            id: UUID_SCHEMA,
            username: { type: "string" },
            full_name: { type: "string" },
            source: { type: "string", enum: ["service"] },
            enabled: { type: "boolean" },
          }),
        },
      },
      handler: async (c) => {
        const input = body<{ username: string; full_name?: string }>(c);
        auditResource(c, { name: input.username });
        const account = await createServiceAccount(db, {
          username: input.username,
          fullName: input.full_name ?? "",
        });
        auditResource(c, { id: account.id, name: account.username });
        return c.json(account, 201);
      },
    }),
  ];
}
