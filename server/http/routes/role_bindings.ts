/**
 * Users and user groups both hold roles, and both are managed under the same rule: changing a subject (its
 * profile, members or roles) requires holding every permission it carries, or an account manager could take
 * over a more powerful account. This module is that rule ({@link manageable}), the role-binding routes
 * (`…/:id/role-bindings`) that users and user groups share, and the list of every binding
 * (`/api/v1/role-bindings`), which shows each holder only to callers who may view that kind of holder.
 */
import type { Permission } from "../../../shared/permissions.ts";
import type { ServerContext } from "../../context.ts";
import type { Queryable } from "../../db/db.ts";
import { found } from "../../core/errors.ts";
import { slicePage } from "../../db/pagination.ts";
import { badRequest, conflict, notFound } from "../errors.ts";
import { type JsonSchema, objectSchema, UUID_SCHEMA } from "../json_schema.ts";
import { listQuery, listRequest, pageRoute, pageSchema } from "../pagination.ts";
import { auditResource, body, caller, type RouteSpec, routesTagged, uuidParam } from "../route.ts";
import { rolesRoute } from "./tags.ts";
import type { AuthUser } from "../../auth/rbac.ts";
import { assertHolds, identityTransaction } from "../../auth/rbac.ts";
import {
  checkStepUp,
  STEP_UP_BODY,
  STEP_UP_PROPERTIES,
  STEP_UP_REFUSED,
  takeStepUpProof,
} from "../step_up.ts";
import { identityChange } from "./common.ts";
import {
  type BindingSubject,
  createBinding,
  deleteBinding,
  getBinding,
  hasBinding,
  listAllBindings,
  listBindings,
  ROLE_BINDING_SORT_COLUMNS,
} from "../../auth/role_bindings.ts";
import { getRole, type Role } from "../../auth/roles.ts";
import type { IdentityServices } from "../../auth/services.ts";

/** A kind of subject that holds roles (users, user groups), as the routes managing it see it. */
export interface Subject<T> {
  /** What the subject is called in messages: `user`, `user group`. */
  noun: string;
  find(q: Queryable, id: string): Promise<T | undefined>;
  /** The subject's name in messages and audit rows. */
  nameOf(subject: T): string;
  /** Every permission the subject carries through any binding (any scope). */
  reachable(q: Queryable, id: string): Promise<string[]>;
  /** The subject as the holder of role bindings. */
  holder(id: string): BindingSubject;
}

/**
 * Loads the subject (404) and refuses (403) when it carries permissions the caller does not hold. `verb`
 * completes "you cannot … user "x"", e.g. `change the roles of`.
 */
export async function manageable<T>(
  q: Queryable,
  subject: Subject<T>,
  options: { caller: AuthUser; id: string; verb: string },
): Promise<T> {
  const target = found(await subject.find(q, options.id), `${subject.noun} ${options.id}`);
  assertHolds(
    options.caller,
    await subject.reachable(q, options.id),
    `${options.verb} ${subject.noun} "${subject.nameOf(target)}"`,
  );
  return target;
}

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
    role_id: UUID_SCHEMA,
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

const SCOPE_TYPE_SCHEMA: JsonSchema = { type: "string", enum: ["global", "node_group"] };

const BINDING_PROPERTIES: Record<string, JsonSchema> = {
  id: UUID_SCHEMA,
  role_id: UUID_SCHEMA,
  role_name: { type: "string" },
  user_id: { type: ["string", "null"], format: "uuid", description: "Set when a user holds the binding" },
  user_group_id: {
    type: ["string", "null"],
    format: "uuid",
    description: "Set when a user group holds the binding",
  },
  scope_type: SCOPE_TYPE_SCHEMA,
  scope_id: { type: ["string", "null"], format: "uuid", description: "The node group of a scoped binding" },
  scope_name: { type: ["string", "null"] },
  effective: {
    type: "boolean",
    description: "False for node-group-scoped bindings: they grant nothing in the community edition",
  },
  created_at: { type: "string", format: "date-time" },
};

/** Response schema of one role binding. */
export const ROLE_BINDING_SCHEMA: JsonSchema = objectSchema(BINDING_PROPERTIES);

const LISTED_BINDING_SCHEMA: JsonSchema = objectSchema({
  ...BINDING_PROPERTIES,
  subject: {
    type: "object",
    description: "Who holds the binding",
    required: ["type", "id", "name"],
    properties: {
      type: { type: "string", enum: ["user", "user_group"] },
      id: UUID_SCHEMA,
      name: { type: "string", description: "Username or user group name" },
    },
  },
});

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

/** Where a subject's role-binding routes live and who may use them. */
export interface RoleBindingRoutesOptions<T> {
  subject: Subject<T>;
  /** Path of one subject, with `:id`, e.g. `/api/v1/users/:id`. */
  path: `/api/v1/${string}`;
  tag: string;
  /** Permission to read the subject's bindings. */
  view: Permission;
  /** Permission to change them. */
  edit: Permission;
}

/** `GET`/`POST …/:id/role-bindings` and `DELETE …/:id/role-bindings/:bindingId` for one kind of subject. */
export function roleBindingRoutes<T>(s: IdentityServices, options: RoleBindingRoutesOptions<T>): RouteSpec[] {
  const { db } = s.ctx;
  const { subject } = options;
  const route = routesTagged(options.tag);
  const { noun } = subject;
  const verb = "change the roles of";
  return [
    route(
      `GET ${options.path}/role-bindings`,
      options.view,
      pageRoute(`Roles bound directly to a ${noun}`, {
        items: "role bindings",
        item: ROLE_BINDING_SCHEMA,
        list: async (page, c) => {
          const id = uuidParam(c, "id");
          found(await subject.find(db, id), `${noun} ${id}`);
          return slicePage(await listBindings(db, subject.holder(id)), page);
        },
      }),
    ),
    route(`POST ${options.path}/role-bindings`, options.edit, {
      summary:
        `Bind a role to a ${noun} (global, or one node group: scoped bindings grant nothing in this edition)`,
      audit: { resourceType: "role_binding" },
      body: {
        ...BINDING_BODY_SCHEMA,
        properties: { ...BINDING_BODY_SCHEMA.properties, ...STEP_UP_PROPERTIES },
      },
      responses: {
        "201": { description: "The binding", schema: ROLE_BINDING_SCHEMA },
        "403": {
          description: "Missing permission, escalation, or step-up re-authentication (password, code)",
        },
      },
      async handler(c) {
        const id = uuidParam(c, "id");
        const input = body<BindingBody>(c);
        const holder = subject.holder(id);
        const proof = takeStepUpProof(c);
        const { binding, label } = await identityTransaction(db, async (tx) => {
          const name = subject.nameOf(await manageable(tx, subject, { caller: caller(c), id, verb }));
          const { role, scopeType, scopeId } = await checkBindingInput(tx, caller(c), input);
          const label = `${role.name} → ${name}`;
          auditResource(c, { name: label });
          // Who may hold which permissions is the most dangerous change there is: prove presence again.
          await checkStepUp(s.stepUp, tx, c, proof);
          const wanted = { subject: holder, roleId: role.id, scopeType, scopeId };
          if (await hasBinding(tx, wanted)) {
            throw conflict(`${noun} "${name}" already has role "${role.name}" in this scope`);
          }
          return { binding: await createBinding(tx, wanted), label };
        });
        auditResource(c, { id: binding.id, name: label });
        return c.json(binding, 201);
      },
    }),
    route(`DELETE ${options.path}/role-bindings/:bindingId`, options.edit, {
      summary: `Remove a role binding from a ${noun}`,
      audit: { resourceType: "role_binding" },
      body: STEP_UP_BODY,
      responses: { "204": { description: "Removed" }, "403": STEP_UP_REFUSED },
      handler: identityChange(s, async (tx, id, c, stepUp) => {
        const bindingId = uuidParam(c, "bindingId");
        const holder = subject.holder(id);
        auditResource(c, { id: bindingId });
        const name = subject.nameOf(await manageable(tx, subject, { caller: caller(c), id, verb }));
        const binding = await getBinding(tx, holder, bindingId);
        if (!binding) throw notFound(`role binding ${bindingId} of ${noun} "${name}"`);
        auditResource(c, { id: bindingId, name: `${binding.role_name} → ${name}` });
        await stepUp();
        await deleteBinding(tx, holder, bindingId);
      }),
    }),
  ];
}

/**
 * `GET /api/v1/role-bindings`: every role binding with its role, holder and scope. Reading bindings is
 * reading roles (`role:view`), but a binding also names its holder, so user bindings are listed only to
 * callers with `user:view` and user-group bindings only to callers with `user_group:view`; the others are
 * left out of the rows and the total, exactly as if they did not exist.
 */
export function roleBindingListRoutes(ctx: ServerContext): RouteSpec[] {
  const { db } = ctx;
  return [
    rolesRoute("GET /api/v1/role-bindings", "role:view", {
      summary: "Every role binding with its role, holder and scope; bindings held by users are listed only " +
        "with user:view, those held by user groups only with user_group:view",
      query: {
        ...listQuery(ROLE_BINDING_SORT_COLUMNS),
        subject_type: { type: "string", enum: ["user", "user_group"], description: "Kind of holder" },
        user_id: { ...UUID_SCHEMA, description: "Bindings held directly by this user" },
        user_group_id: { ...UUID_SCHEMA, description: "Bindings held by this user group" },
        role_id: { ...UUID_SCHEMA, description: "Bindings of this role" },
        scope_type: SCOPE_TYPE_SCHEMA,
        scope_id: { ...UUID_SCHEMA, description: "Bindings scoped to this node group" },
        search: { type: "string", maxLength: 200, description: "Substring of the role or holder name" },
      },
      responses: {
        "200": { description: "A page of role bindings", schema: pageSchema(LISTED_BINDING_SCHEMA) },
      },
      async handler(c) {
        const may = caller(c).permissions;
        const uuid = (name: string) => c.req.query(name)?.toLowerCase();
        return c.json(
          await listAllBindings(db, {
            visible: { users: may.has("user:view"), userGroups: may.has("user_group:view") },
            subjectType: c.req.query("subject_type") as "user" | "user_group" | undefined,
            userId: uuid("user_id"),
            userGroupId: uuid("user_group_id"),
            roleId: uuid("role_id"),
            scopeType: c.req.query("scope_type") as "global" | "node_group" | undefined,
            scopeId: uuid("scope_id"),
            search: c.req.query("search"),
          }, listRequest(c)),
        );
      },
    }),
  ];
}
