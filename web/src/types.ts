/** Shapes of the REST records as the UI reads them (JSON: dates are ISO strings). */
import type { Operations } from "../../shared/api/svc_api.gen.ts";

/** A policy (list rows omit `content`). */
export interface Policy {
  id: string;
  name: string;
  description: string;
  type: string;
  content?: string;
  version: number;
  state: "draft" | "released" | "archived";
  deprecated: boolean;
  deprecated_at: string | null;
  deprecation_message: string;
  replacement_policy_id: string | null;
  created_by: string;
  created_at: string;
  updated_at: string;
  bindings_count: number;
  enabled_bindings_count: number;
  /** A revision of this released policy is being prepared. */
  revision_pending?: boolean;
}

/** The pending revision of a released policy. */
export interface PolicyRevision {
  policy_id: string;
  base_version: number;
  description: string;
  content: string;
  created_by: string;
  created_at: string;
  updated_at: string;
}

/** A policy binding. */
export interface Binding {
  id: string;
  policy_id: string;
  policy_name: string;
  policy_type: string;
  policy_state: string;
  node_group_id: string;
  node_group_name: string;
  state: "enabled" | "disabled";
  priority: number;
  node_count: number;
  created_at: string;
  updated_at: string;
}

/** A node group. */
export interface NodeGroup {
  id: string;
  name: string;
  description: string;
  node_count: number;
  bindings_count: number;
  enabled_bindings_count: number;
  created_at: string;
  updated_at: string;
}

/** A member of a node group. */
export interface NodeGroupMember {
  node_id: string;
  name: string;
  fqdn: string;
  status: string;
  added_at: string;
}

/** A node in a list. */
export interface NodeSummary {
  id: string;
  name: string;
  status: string;
  status_reason: string;
  fqdn: string;
  ip_address: string;
  os_name: string;
  os_version: string;
  desktop_environments: string[];
  agent_version: string;
  last_seen: string | null;
  cert_not_after: string | null;
  groups: { id: string; name: string }[];
  created_at: string;
  /** When the node's current connection was opened (null while it has none). */
  connected_since?: string | null;
  /** In list rows: the worst compliance status over the policies that reach the node, with counts. */
  compliance_rollup?: {
    worst: "error" | "non_compliant" | "unknown" | "compliant" | "inapplicable" | "none";
    total: number;
    problems: number;
    unknown: number;
  };
  /** Why this online node is Pending or receives no policy, each with the fix (empty otherwise). */
  pending_reasons?: PendingReason[];
}

/** One reason an online node is Pending (server/domain/node_pending.ts), as the API answers it. */
export type PendingReason = NonNullable<
  Operations["GET /api/v1/nodes/{id}"]["response"]["pending_reasons"]
>[number];

/** Counts per compliance status. */
export interface StatusCounts {
  compliant: number;
  non_compliant: number;
  inapplicable: number;
  error: number;
  unknown: number;
  total: number;
}

/** The full node record. */
export interface NodeDetail extends NodeSummary {
  machine_id: string;
  gnome_version: string;
  agent_healthy: boolean;
  agent_health_message: string;
  cert_serial: string | null;
  cert_revoked: boolean;
  notes: string;
  updated_at: string;
  connected: boolean;
  compliance: StatusCounts;
}

/** Per-item compliance result. */
export interface ComplianceItem {
  schema_id: string;
  key: string;
  status: string;
  message: string;
}

/** One (node, policy) compliance row. */
export interface ComplianceRow {
  node_id: string;
  node_name: string;
  policy_id: string;
  policy_name: string;
  policy_type: string;
  reported_version: number | null;
  policy_version: number;
  status: string;
  message: string;
  items: ComplianceItem[];
  reported_at: string | null;
}

/** Fleet compliance summary. */
export interface FleetSummary {
  results: StatusCounts;
  score: number | null;
  nodes: { total: number; compliant: number; non_compliant: number; without_policies: number };
}

/** Counts per key plus their total. */
export type Counts<K extends string> = Record<K, number> & { total: number };

/**
 * `GET /api/v1/dashboard/summary`: a section is absent when the person lacks its permission (nodes and
 * certificates: node:view; compliance: compliance:view; policies: policy:view; bindings: binding:view).
 */
export interface DashboardSummary {
  nodes?: Counts<"online" | "degraded" | "offline" | "unknown">;
  /** Every node's certificate in one bucket. */
  certificates?: Counts<
    "expired" | "within_7_days" | "within_30_days" | "within_90_days" | "later" | "none" | "revoked"
  >;
  compliance?: FleetSummary;
  policies?: {
    total: number;
    by_state: Record<"draft" | "released" | "archived", number>;
    by_type: Array<
      { type: string; total: number; by_state: Record<"draft" | "released" | "archived", number> }
    >;
  };
  bindings?: Counts<"enabled" | "disabled">;
}

/** An audit log entry. */
export interface AuditEntry {
  id: number | string;
  created_at: string;
  user_id: string | null;
  username: string;
  node_id?: string | null;
  action: string;
  resource_type: string;
  resource_id: string;
  resource_name: string;
  outcome: string;
  source_ip: string;
  details: Record<string, unknown>;
  /** Current names of the ids the entry mentions that still exist (resolved by the server). */
  names?: Record<string, { type: string; name: string }>;
}

/** A console user. */
export interface User {
  id: string;
  username: string;
  email: string;
  full_name: string;
  source: string;
  enabled: boolean;
  created_at?: string;
}

/** A role and its permissions. */
export interface Role {
  id: string;
  name: string;
  description: string;
  builtin: boolean;
  permissions: string[];
}

/** A user group. */
export interface UserGroup {
  id: string;
  name: string;
  description: string;
  member_count?: number;
  members?: { id: string; username: string }[];
}

/** A role binding. */
export interface RoleBinding {
  id: string;
  role_id: string;
  role_name: string;
  user_id: string | null;
  user_group_id: string | null;
  scope_type: "global" | "node_group";
  scope_id: string | null;
  scope_name: string | null;
  /** False for node-group-scoped bindings: they grant nothing in the community edition. */
  effective: boolean;
  created_at: string;
}

/** A row of `GET /api/v1/role-bindings`: the binding and who holds it. */
export interface ListedRoleBinding extends RoleBinding {
  subject: { type: "user" | "user_group"; id: string; name: string };
}
