/** Validation shared by the user and user-group role-binding routes. */
import type { Queryable } from "../db/db.ts";
import { badRequest } from "../http/errors.ts";
import type { JsonSchema } from "../http/json_schema.ts";
import type { AuthUser } from "../http/route.ts";
import { assertHolds } from "./rbac.ts";
import { getRole, type Role } from "./roles.ts";

/** Body of `POST …/role-bindings`. */
export interface BindingBody {
  role_id: string;
  scope_type?: "global" | "node_group";
  scope_id?: string | null;
}

/** Schema of {@link BindingBody}. */
export const BINDING_BODY_SCHEMA: JsonSchema = {
  type: "object",
  required: ["role_id"],
  additionalProperties: false,
  properties: {
    role_id: { type: "string", format: "uuid" },
    scope_type: {
      type: "string",
      enum: ["global", "node_group"],
      description:
        "global (default) or node_group; node-group-scoped bindings grant nothing in the community edition",
    },
    scope_id: {
      type: ["string", "null"],
      format: "uuid",
      description: "The node group when scope_type is node_group",
    },
  },
};

/** Checks the role, the scope and the escalation rule; returns the role and the normalised scope. */
export async function checkBindingInput(
  q: Queryable,
  caller: AuthUser,
  input: BindingBody,
): Promise<{ role: Role; scopeType: "global" | "node_group"; scopeId: string | null }> {
  const scopeType = input.scope_type ?? "global";
  const scopeId = input.scope_id ?? null;
  if (scopeType === "global" && scopeId !== null) {
    throw badRequest("scope_id must be omitted when scope_type is global", [
      { field: "scope_id", message: "must be omitted for a global binding" },
    ]);
  }
  if (scopeType === "node_group") {
    if (scopeId === null) {
      throw badRequest("scope_id is required when scope_type is node_group", [
        { field: "scope_id", message: "is required for a node_group binding" },
      ]);
    }
    const rows = await q.query("SELECT 1 FROM node_groups WHERE id = $1", [scopeId]);
    if (rows.length === 0) {
      throw badRequest(`scope_id: no node group with id ${scopeId}`, [
        { field: "scope_id", message: "no node group with this id" },
      ]);
    }
  }
  const role = await getRole(q, input.role_id);
  if (!role) {
    throw badRequest(`role_id: no role with id ${input.role_id}`, [{
      field: "role_id",
      message: "no role with this id",
    }]);
  }
  assertHolds(caller, role.permissions, `grant role "${role.name}"`);
  return { role, scopeType, scopeId };
}
