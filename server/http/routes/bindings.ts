/** REST routes for policy bindings (policy ↔ node group, state, priority). */
import type { ServerContext } from "../../context.ts";
import {
  BINDING_SORT_COLUMNS,
  BINDING_STATES,
  type BindingState,
  createBinding,
  deleteBinding,
  getBinding,
  listBindings,
  MAX_PRIORITY,
  MIN_PRIORITY,
  updateBinding,
} from "../../domain/bindings.ts";
import { closedObject, type JsonSchema, objectSchema, UUID_SCHEMA } from "../json_schema.ts";
import { listQuery, listRequest, pageSchema } from "../pagination.ts";
import { auditResource, body, type RouteSpec } from "../route.ts";
import { changeById, DATE_TIME, LOCKOUT_REASON, noContent, readById } from "./common.ts";
import { bindingsRoute as route } from "./tags.ts";

const PRIORITY: JsonSchema = {
  type: "integer",
  minimum: MIN_PRIORITY,
  maximum: MAX_PRIORITY,
  description: "Higher wins when several bindings deliver policies of one type",
};

const BINDING_SCHEMA: JsonSchema = objectSchema({
  id: UUID_SCHEMA,
  policy_id: UUID_SCHEMA,
  policy_name: { type: "string" },
  policy_type: { type: "string" },
  policy_state: { type: "string" },
  node_group_id: UUID_SCHEMA,
  node_group_name: { type: "string" },
  state: { type: "string", enum: BINDING_STATES },
  priority: { type: "integer" },
  node_count: { type: "integer" },
  created_at: DATE_TIME,
  updated_at: DATE_TIME,
});

/** A binding's name in the audit log. */
function bindingName(binding: { policy_name: string; node_group_name: string }): string {
  return `${binding.policy_name} → ${binding.node_group_name}`;
}

/** Routes of the binding area. */
export function bindingRoutes({ db }: ServerContext): RouteSpec[] {
  return [
    route("GET /api/v1/policy-bindings", "binding:view", {
      summary: "List bindings (highest priority first by default)",
      query: {
        ...listQuery(BINDING_SORT_COLUMNS),
        policy_id: UUID_SCHEMA,
        node_group_id: UUID_SCHEMA,
        state: { type: "string", enum: BINDING_STATES },
      },
      responses: { "200": { description: "A page of bindings", schema: pageSchema(BINDING_SCHEMA) } },
      handler: async (c) =>
        c.json(
          await listBindings(db, {
            policyId: c.req.query("policy_id")?.toLowerCase(),
            nodeGroupId: c.req.query("node_group_id")?.toLowerCase(),
            state: c.req.query("state") as BindingState | undefined,
          }, listRequest(c)),
        ),
    }),
    route("POST /api/v1/policy-bindings", "binding:create", {
      summary: "Bind a policy to a node group; a new binding always starts disabled",
      audit: { resourceType: "binding" },
      body: closedObject({ policy_id: UUID_SCHEMA, node_group_id: UUID_SCHEMA, priority: PRIORITY }, [
        "policy_id",
        "node_group_id",
      ]),
      responses: { "201": { description: "The binding", schema: BINDING_SCHEMA } },
      handler: async (c) => {
        const input = body<{ policy_id: string; node_group_id: string; priority?: number }>(c);
        const binding = await db.transaction((tx) =>
          createBinding(tx, {
            policyId: input.policy_id.toLowerCase(),
            nodeGroupId: input.node_group_id.toLowerCase(),
            priority: input.priority,
          })
        );
        auditResource(c, { id: binding.id, name: bindingName(binding) });
        return c.json(binding, 201);
      },
    }),
    route("GET /api/v1/policy-bindings/:id", "binding:view", {
      summary: "Read a binding",
      responses: { "200": { description: "The binding", schema: BINDING_SCHEMA } },
      handler: readById(db, getBinding),
    }),
    route("PUT /api/v1/policy-bindings/:id", "binding:edit", {
      summary: "Enable or disable a binding (enabling needs a released policy) or change its priority",
      audit: { resourceType: "binding" },
      body: closedObject({
        state: { type: "string", enum: BINDING_STATES },
        priority: PRIORITY,
        lockout_reason: LOCKOUT_REASON,
      }),
      responses: { "200": { description: "The binding", schema: BINDING_SCHEMA } },
      handler: changeById(
        db,
        (tx, id, c) => {
          const input = body<{ state?: BindingState; priority?: number; lockout_reason?: string }>(c);
          return updateBinding(tx, id, {
            state: input.state,
            priority: input.priority,
            lockoutReason: input.lockout_reason,
            onLockoutOverride: (reason) => c.set("auditDetails", { lockout_override: reason }),
          });
        },
        { auditName: bindingName, track: { read: getBinding, fields: ["state", "priority"] } },
      ),
    }),
    route("DELETE /api/v1/policy-bindings/:id", "binding:delete", {
      summary: "Delete a binding",
      audit: { resourceType: "binding" },
      responses: { "204": { description: "Deleted" } },
      handler: changeById(db, deleteBinding, { respond: noContent, auditName: bindingName }),
    }),
  ];
}
