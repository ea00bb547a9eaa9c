/**
 * Names for the REST records several modules read, each taken from the generated operations
 * (`shared/api/svc_api.gen.ts`): the server's route declarations are the one description of a shape, so
 * nothing here declares a field of its own.
 */
import type { OperationKey, Operations } from "../../shared/api/svc_api.gen.ts";

export type { OperationKey, Operations };

/** What an operation answers. */
export type Answer<K extends OperationKey> = Operations[K]["response"];

/** The operations that answer a page of a list (`items` and `total`). */
export type ListOperation = {
  [K in OperationKey]: K extends `GET ${string}`
    ? Operations[K]["response"] extends { items: unknown[]; total: number } ? K : never
    : never;
}[OperationKey];

/** One row of a list operation's page. */
export type ListRow<K extends ListOperation> = Answer<K>["items"][number];

/** A policy with its content. */
export type Policy = Answer<"GET /api/v1/policies/all/{id}">;
/** A policy as a list shows it (no content). */
export type PolicyRow = ListRow<"GET /api/v1/policies/all">;
/** The pending revision of a released policy. */
export type PolicyRevision = Answer<"GET /api/v1/policies/all/{id}/revision">;
/** A policy binding. */
export type Binding = ListRow<"GET /api/v1/policy-bindings">;
/** A node group. */
export type NodeGroup = ListRow<"GET /api/v1/node-groups">;
/** A node in a list. */
export type NodeSummary = ListRow<"GET /api/v1/nodes">;
/** The full node record. */
export type NodeDetail = Answer<"GET /api/v1/nodes/{id}">;
/** One reason an online node is Pending (server/domain/node_pending.ts). */
export type PendingReason = NonNullable<NodeDetail["pending_reasons"]>[number];
/** One (node, policy) compliance row. */
export type ComplianceRow = ListRow<"GET /api/v1/compliance">;
/** A console user as the user list shows it. */
export type User = ListRow<"GET /api/v1/users">;
/** A role and its permissions. */
export type Role = ListRow<"GET /api/v1/roles">;
/** A user group as the list shows it. */
export type UserGroup = ListRow<"GET /api/v1/user-groups">;
/** A row of `GET /api/v1/role-bindings`: the binding and who holds it. */
export type ListedRoleBinding = ListRow<"GET /api/v1/role-bindings">;
