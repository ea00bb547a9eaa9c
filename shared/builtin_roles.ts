/**
 * Built-in roles. Their permission sets are derived from the catalogue at every start, so a permission added
 * to `shared/permissions.ts` reaches the right built-in roles without a migration. Built-ins cannot be
 * edited or deleted through the API; custom roles cover anything else.
 *
 * | Role | Permissions |
 * |---|---|
 * | Super Admin | every permission |
 * | Org Admin | every permission except creating, editing and deleting roles |
 * | Policy Editor | policy view/create/edit, binding view, node_group view |
 * | Policy Reviewer | policy view/release, binding view, node_group view, compliance view |
 * | Compliance Viewer | compliance view, policy view, node view, node_group view |
 * | Auditor | every `*:view` permission plus audit_log export (never reveals disk-encryption keys) |
 */
import { ALL_PERMISSIONS, type Permission } from "./permissions.ts";

/** Name of the role that holds every permission (and must always have an enabled holder). */
export const SUPER_ADMIN = "Super Admin";

/** A built-in role definition. */
export interface BuiltinRole {
  name: string;
  description: string;
  permissions: (catalogue: readonly Permission[]) => Permission[];
}

const ROLE_MUTATIONS = new Set<string>(["role:create", "role:edit", "role:delete"]);

const only = (...wanted: Permission[]) => (catalogue: readonly Permission[]) =>
  catalogue.filter((p) => wanted.includes(p));

/** Every built-in role, in display order. */
export const BUILTIN_ROLES: readonly BuiltinRole[] = [
  {
    name: SUPER_ADMIN,
    description: "Every permission, including managing roles. At least one enabled user always holds it.",
    permissions: (catalogue) => [...catalogue],
  },
  {
    name: "Org Admin",
    description: "Runs the organisation: everything except defining roles.",
    permissions: (catalogue) => catalogue.filter((p) => !ROLE_MUTATIONS.has(p)),
  },
  {
    name: "Policy Editor",
    description: "Writes policies; cannot release them or change bindings.",
    permissions: only("policy:view", "policy:create", "policy:edit", "binding:view", "node_group:view"),
  },
  {
    name: "Policy Reviewer",
    description: "Reviews and releases policies.",
    permissions: only("policy:view", "policy:release", "binding:view", "node_group:view", "compliance:view"),
  },
  {
    name: "Compliance Viewer",
    description: "Reads compliance results and what they refer to.",
    permissions: only("compliance:view", "policy:view", "node:view", "node_group:view"),
  },
  {
    name: "Auditor",
    description: "Reads everything and exports the audit log; changes nothing.",
    permissions: (catalogue) => catalogue.filter((p) => p.endsWith(":view") || p === "audit_log:export"),
  },
];

/** The permission set of each built-in role for the current catalogue. */
export function builtinRolePermissions(
  catalogue: readonly Permission[] = ALL_PERMISSIONS,
): Map<string, Permission[]> {
  return new Map(BUILTIN_ROLES.map((r) => [r.name, r.permissions(catalogue).sort()]));
}
