/**
 * Names for the REST records several modules read, each taken from the generated operations
 * (`shared/api/svc_api.gen.ts`): the server's route declarations are the one description of a shape, so
 * nothing here declares a field of its own.
 */
import type { OperationKey, Operations } from "../../shared/api/svc_api.gen.ts";

export type { OperationKey, Operations };

/**
 * An answer with every field present. Interim: most response schemas do not list their `required` fields yet,
 * so the generated types mark fields optional that the server always sends; the UI was written against the
 * answers as sent. Once the schemas declare `required`, this becomes the generated type itself.
 */
export type Described<T> = T extends ReadonlyArray<infer U> ? Described<U>[]
  : T extends Record<string, unknown> ? { [P in keyof T]-?: Described<T[P]> }
  : T;

/** What an operation answers. */
export type Answer<K extends OperationKey> = Described<Operations[K]["response"]>;

/** The operations that answer a page of a list (`items` and `total`). */
export type ListOperation = {
  [K in OperationKey]: K extends `GET ${string}`
    ? Operations[K]["response"] extends { items: unknown[]; total: number } ? K : never
    : never;
}[OperationKey];

/** One row of a described list operation's page. */
type Row<K extends ListOperation> = Answer<K>["items"][number];

/** A policy with its content. */
export type Policy = Answer<"GET /api/v1/policies/all/{id}">;
/** A policy as a list shows it (no content). */
export type PolicyRow = Row<"GET /api/v1/policies/all">;
/** The pending revision of a released policy. */
export type PolicyRevision = Answer<"GET /api/v1/policies/all/{id}/revision">;
/** A policy binding. */
export type Binding = Row<"GET /api/v1/policy-bindings">;
/** A node group. */
export type NodeGroup = Row<"GET /api/v1/node-groups">;
/** A node in a list. */
export type NodeSummary = Row<"GET /api/v1/nodes">;
/** The full node record. */
export type NodeDetail = Answer<"GET /api/v1/nodes/{id}">;
/** One reason an online node is Pending (server/domain/node_pending.ts). */
export type PendingReason = NonNullable<NodeDetail["pending_reasons"]>[number];
/** One (node, policy) compliance row. */
export type ComplianceRow = Row<"GET /api/v1/compliance">;
/** A console user. */
export type User = Answer<"GET /api/v1/users/{id}">;
/** A role and its permissions. */
export type Role = Answer<"GET /api/v1/roles/{id}">;
/** A user group. */
export type UserGroup = Answer<"GET /api/v1/user-groups/{id}">;
/** A row of `GET /api/v1/role-bindings`: the binding and who holds it. */
export type ListedRoleBinding = Row<"GET /api/v1/role-bindings">;

/**
 * The lists whose answer the server still describes as an open object, with the record each row is (the
 * single-item read's). Goes away once those routes declare their answers.
 */
interface UndescribedRows {
  "GET /api/v1/users": User;
  "GET /api/v1/roles": Role;
  "GET /api/v1/user-groups": UserGroup;
  "GET /api/v1/user-groups/{id}/members": User;
}

/** An operation that answers a page of a list, described or not yet. */
export type AnyListOperation = ListOperation | keyof UndescribedRows;

/** The page a list operation answers (an undescribed one paged like every offset-paged list). */
export type ListAnswer<K extends AnyListOperation> = K extends ListOperation ? Answer<K>
  : K extends keyof UndescribedRows
    ? Omit<Answer<"GET /api/v1/node-groups">, "items"> & { items: UndescribedRows[K][] }
  : never;

/** One row of a list operation's page. */
export type ListRow<K extends AnyListOperation> = ListAnswer<K>["items"][number];
