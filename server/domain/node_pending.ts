/**
 * Why an online node shows Pending (or no policy at all): computed from what the server knows about the
 * node — its groups and when it joined them, the bindings and policies of those groups, when its stream
 * opened, what and when its agent last reported, and its agent's version. Each reason names the fix.
 *
 * Only nodes that are online (or degraded) are explained: an offline node is pending because it is offline,
 * which its status already says.
 */
import type { Queryable } from "../db/db.ts";
import { agentTooOld, MIN_AGENT_VERSION, unsupportedTypeReason } from "./agent_support.ts";

/** What keeps a node from reporting on the policies that reach it (or from receiving any). */
export type PendingCode =
  | "no_group"
  | "no_enabled_binding"
  | "bound_policies_not_released"
  | "joined_after_connect"
  | "no_heartbeat"
  | "agent_too_old"
  | "type_unsupported"
  | "not_reported_since_connect"
  | "older_version_reported";

/** One reason, for a person: the message says what is wrong and what to do. */
export interface PendingReason {
  code: PendingCode;
  message: string;
  /** Policies concerned (by name), when the reason is about some of them. */
  policies?: string[];
  /** Node groups concerned (by name). */
  groups?: string[];
  /** When the situation began (the stream's opening), for "… since" in the console. */
  since?: Date;
}

interface NodeFacts {
  id: string;
  status: string;
  agent_version: string;
  last_seen: Date | null;
  connected_since: Date | null;
  last_report: Date | null;
}

interface GroupFacts {
  node_id: string;
  name: string;
  joined_at: Date;
  enabled: number;
  enabled_released: number;
  unreleased: string[];
}

interface ReachFacts {
  node_id: string;
  name: string;
  type: string;
  version: number;
  reported_version: number | null;
  status: string | null;
}

function list(names: string[]): string {
  const quoted = names.map((n) => `"${n}"`);
  return quoted.length <= 1 ? quoted.join("") : `${quoted.slice(0, -1).join(", ")} and ${quoted.at(-1)}`;
}

/** The reasons of every online node among `nodeIds` that is Pending or receives no policy (others: none). */
export async function pendingReasons(
  q: Queryable,
  nodeIds: readonly string[],
): Promise<Map<string, PendingReason[]>> {
  const out = new Map<string, PendingReason[]>();
  if (nodeIds.length === 0) return out;
  const ids = [...nodeIds];
  const nodes = await q.query<NodeFacts>(
    `SELECT n.id, n.status, n.agent_version, n.last_seen,
       (SELECT min(s.opened_at) FROM node_streams s WHERE s.node_id = n.id) AS connected_since,
       (SELECT max(r.reported_at) FROM compliance_results r WHERE r.node_id = n.id) AS last_report
     FROM nodes n WHERE n.id = ANY($1::uuid[]) AND n.status IN ('online', 'degraded')`,
    [ids],
  );
  if (nodes.length === 0) return out;
  const online = nodes.map((n) => n.id);
  const groups = await q.query<GroupFacts>(
    `SELECT m.node_id, g.name, m.created_at AS joined_at,
       (SELECT count(*)::int FROM policy_bindings b WHERE b.node_group_id = g.id AND b.state = 'enabled')
         AS enabled,
       (SELECT count(*)::int FROM policy_bindings b JOIN policies p ON p.id = b.policy_id
         WHERE b.node_group_id = g.id AND b.state = 'enabled' AND p.state = 'released') AS enabled_released,
       ARRAY(SELECT p.name FROM policy_bindings b JOIN policies p ON p.id = b.policy_id
         WHERE b.node_group_id = g.id AND b.state = 'enabled' AND p.state <> 'released' ORDER BY p.name)
         AS unreleased
     FROM node_group_members m JOIN node_groups g ON g.id = m.node_group_id
     WHERE m.node_id = ANY($1::uuid[]) ORDER BY g.name`,
    [online],
  );
  const reach = await q.query<ReachFacts>(
    `SELECT pr.node_id, p.name, p.type, p.version, r.policy_version AS reported_version, r.status
       FROM policy_reach pr JOIN policies p ON p.id = pr.policy_id
       LEFT JOIN compliance_results r ON r.node_id = pr.node_id AND r.policy_id = pr.policy_id
      WHERE pr.node_id = ANY($1::uuid[]) ORDER BY p.name`,
    [online],
  );
  for (const node of nodes) {
    const reasons = explain(
      node,
      groups.filter((g) => g.node_id === node.id),
      reach.filter((r) => r.node_id === node.id),
    );
    if (reasons.length) out.set(node.id, reasons);
  }
  return out;
}

function explain(node: NodeFacts, groups: GroupFacts[], reach: ReachFacts[]): PendingReason[] {
  const reasons: PendingReason[] = [];
  const connected = node.connected_since;
  // Groups joined after the stream opened are not in what the agent received (spec: Events 2).
  const late = connected ? groups.filter((g) => g.joined_at > connected) : [];
  if (late.length) {
    reasons.push({
      code: "joined_after_connect",
      groups: late.map((g) => g.name),
      since: connected ?? undefined,
      message: `The node joined ${list(late.map((g) => g.name))} after its agent connected; it receives ` +
        "the policies of a new group when its stream next opens (restart svc-agent on the node to do it now).",
    });
  }
  const waiting = reach.filter((r) =>
    r.reported_version === null || r.reported_version < r.version || r.status === "unknown"
  );
  if (reach.length === 0) {
    if (groups.length === 0) {
      reasons.push({
        code: "no_group",
        message: "The node is in no node group, so no policy can reach it: add it to a group.",
      });
    } else if (groups.every((g) => g.enabled === 0)) {
      reasons.push({
        code: "no_enabled_binding",
        groups: groups.map((g) => g.name),
        message: `No enabled binding reaches its group${groups.length === 1 ? "" : "s"} ` +
          `${list(groups.map((g) => g.name))}: bind a released policy to one and enable the binding.`,
      });
    } else if (groups.every((g) => g.enabled_released === 0) && late.length < groups.length) {
      const names = [...new Set(groups.flatMap((g) => g.unreleased))];
      reasons.push({
        code: "bound_policies_not_released",
        policies: names,
        message: `The polic${names.length === 1 ? "y" : "ies"} bound to its groups (${list(names)}) ` +
          `${names.length === 1 ? "is" : "are"} not released; only released policies reach nodes.`,
      });
    }
    return reasons;
  }
  if (waiting.length === 0) return reasons;
  if (!node.last_seen) {
    reasons.push({
      code: "no_heartbeat",
      message:
        "No heartbeat has arrived from the agent yet, so its version and facts are unknown; it sends " +
        "one when it connects — check that svc-agent runs on the node.",
    });
  }
  if (agentTooOld(node.agent_version)) {
    reasons.push({
      code: "agent_too_old",
      message:
        `The agent is version ${node.agent_version}, older than ${MIN_AGENT_VERSION}, the oldest this ` +
        "server supports: upgrade svc-agent on the node.",
    });
  }
  const unsupported = waiting.map((r) => ({ r, why: unsupportedTypeReason(r.type, node.agent_version) }))
    .filter((x) => x.why);
  if (unsupported.length) {
    reasons.push({
      code: "type_unsupported",
      policies: unsupported.map((x) => x.r.name),
      message: `The agent does not enforce ${list(unsupported.map((x) => x.r.name))}: ` +
        `${[...new Set(unsupported.map((x) => x.why))].join("; ")}.`,
    });
  }
  const quiet = connected && (!node.last_report || node.last_report < connected);
  if (quiet) {
    reasons.push({
      code: "not_reported_since_connect",
      since: connected,
      policies: waiting.map((r) => r.name),
      message: "The agent has not reported compliance since it connected; it reports after its first " +
        "complete sync. If this lasts, read the agent's log on the node (journalctl -u svc-agent).",
    });
  } else {
    const older = waiting.filter((r) => r.reported_version !== null && r.reported_version < r.version);
    if (older.length) {
      reasons.push({
        code: "older_version_reported",
        policies: older.map((r) => r.name),
        message: older.map((r) =>
          `The agent last reported version ${r.reported_version} of "${r.name}"; it has not applied ` +
          `version ${r.version} yet.`
        ).join(" "),
      });
    }
  }
  return reasons;
}
