/**
 * `/api/v1/settings/mfa`: the MFA policy (see `mfa_policy.ts`). Changing it needs `settings:edit` and the
 * editor's step-up re-authentication (switching it off weakens every account).
 *
 * @module
 */
import { badRequest } from "../errors.ts";
import { closedObject, objectSchema } from "../json_schema.ts";
import { auditResource, body, caller, type RouteSpec } from "../route.ts";
import { isPermission } from "../../../shared/permissions.ts";
import { getMfaPolicy, MFA_POLICY_KEY, type MfaPolicy, setMfaPolicy } from "../../auth/mfa_policy.ts";
import type { IdentityServices } from "../../auth/services.ts";
import { checkStepUp, STEP_UP_PROPERTIES } from "../step_up.ts";
import { settingsRoute as route } from "./tags.ts";

const POLICY_PROPERTIES = {
  mode: {
    type: "string",
    enum: ["off", "all", "permissions"],
    description: "off; all = everyone with a password; permissions = whoever holds one of `permissions`",
  },
  permissions: { type: "array", maxItems: 200, items: { type: "string", maxLength: 100 } },
  include_ldap: { type: "boolean", description: "Directory (LDAP) users are covered too" },
} as const;

/** The routes. */
export function mfaPolicyRoutes(s: IdentityServices): RouteSpec[] {
  const { db } = s.ctx;
  return [
    route("GET /api/v1/settings/mfa", "settings:view", {
      summary: "The MFA policy: who must have a second factor",
      responses: {
        "200": { description: "The policy", schema: objectSchema(POLICY_PROPERTIES) },
      },
      handler: async (c) => c.json(await getMfaPolicy(db)),
    }),
    route("PUT /api/v1/settings/mfa", "settings:edit", {
      summary: "Replace the MFA policy (step-up required)",
      audit: { resourceType: "settings", action: "settings.mfa_policy" },
      body: closedObject({ ...POLICY_PROPERTIES, ...STEP_UP_PROPERTIES }, ["mode"]),
      responses: { "200": { description: "The stored policy", schema: objectSchema(POLICY_PROPERTIES) } },
      handler: async (c) => {
        const me = caller(c);
        auditResource(c, { name: MFA_POLICY_KEY });
        const input = body<Partial<MfaPolicy> & { mode: MfaPolicy["mode"] }>(c);
        const permissions = [...new Set(input.permissions ?? [])].sort();
        const unknown = permissions.filter((p) => !isPermission(p));
        if (unknown.length > 0) {
          throw badRequest(
            `permissions: ${unknown.join(", ")} is not a permission; pick from the catalogue`,
            [
              { field: "permissions", message: `unknown: ${unknown.join(", ")}` },
            ],
          );
        }
        if (input.mode === "permissions" && permissions.length === 0) {
          throw badRequest("permissions: choose at least one permission, or use mode all or off", [
            { field: "permissions", message: "needs at least one permission with mode permissions" },
          ]);
        }
        await checkStepUp(s.stepUp, db, c);
        const policy: MfaPolicy = {
          mode: input.mode,
          permissions: input.mode === "permissions" ? permissions : [],
          include_ldap: input.include_ldap ?? false,
        };
        await setMfaPolicy(db, policy, me.username);
        c.set("auditDetails", { policy });
        return c.json(policy);
      },
    }),
  ];
}
