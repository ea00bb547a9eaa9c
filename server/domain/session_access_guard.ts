/**
 * Lockout guard for SessionAccess: before a SessionAccess policy is released (checked with every node
 * group it is bound to), or a binding of one is enabled, the rules that would then reach the node group
 * (every released SessionAccess policy with an enabled binding to it, plus the policy in question) are
 * compiled with the agent's own compiler, and the
 * week is searched for times at which no account the rules name may log in. Such a change is refused
 * with the accounts and the times, unless the caller gives a reason (the route audits it).
 *
 * Only accounts the rules name count: the server cannot see a node's other accounts. A node in several
 * groups receives the union of their policies; the guard checks one group at a time.
 *
 * @module
 */

import type { Queryable } from "../db/db.ts";
import { sessionAccessType } from "../../shared/policy_types/session_access.ts";
import {
  compileSessionAccess,
  formatWeekMinute,
  lockoutCheck,
  type LockoutReport,
  type PolicyInput,
} from "../../shared/session_access_rules.ts";
import { conflictError, invalidError } from "../core/errors.ts";

/** Wire name of the guarded type. */
export const SESSION_ACCESS_TYPE = "SessionAccess";

/** What the guard found, and whether a reason overrode it. */
export interface GuardOutcome {
  report: LockoutReport;
  /** The reason given to go ahead despite a lockout; undefined when there was none to override. */
  overriddenWith?: string;
}

interface PolicyRow {
  id: string;
  name: string;
  content: string;
}

function parsed(row: PolicyRow): { id: string; name: string; content: PolicyInput } {
  const content = sessionAccessType.parse(row.content, { ignoreUnknownFields: true });
  const issues = sessionAccessType.validate(content);
  if (issues.length) {
    const text = issues.slice(0, 3).map((i) => (i.field ? `${i.field}: ${i.message}` : i.message)).join("; ");
    throw new Error(`policy "${row.name}": ${text}`);
  }
  return { id: row.id, name: row.name, content };
}

/**
 * The lockout report of the SessionAccess rules reaching `nodeGroupId` (or of the policy alone without a
 * group), with the policy `policyId` counted as delivered and `content` (when given) in place of its
 * stored content.
 */
export async function sessionAccessReport(
  q: Queryable,
  options: { policyId?: string; nodeGroupId?: string; content?: string; at?: number },
): Promise<LockoutReport> {
  const rows: PolicyRow[] = [];
  if (options.nodeGroupId) {
    rows.push(
      ...await q.query<PolicyRow>(
        `SELECT p.id, p.name, p.content FROM policies p JOIN policy_bindings b ON b.policy_id = p.id
         WHERE b.node_group_id = $1 AND b.state = 'enabled' AND p.state = 'released' AND p.type = $2
         ORDER BY p.id`,
        [options.nodeGroupId, SESSION_ACCESS_TYPE],
      ),
    );
  }
  if (options.policyId) {
    const own = rows.findIndex((r) => r.id === options.policyId);
    if (own >= 0) rows.splice(own, 1);
    const [row] = await q.query<PolicyRow>("SELECT id, name, content FROM policies WHERE id = $1", [
      options.policyId,
    ]);
    if (row) rows.push({ ...row, content: options.content ?? row.content });
  } else if (options.content !== undefined) {
    rows.push({ id: "preview", name: "this policy", content: options.content });
  }
  let set;
  try {
    set = compileSessionAccess(rows.map(parsed));
  } catch (err) {
    throw invalidError(`SessionAccess rules cannot be compiled: ${(err as Error).message}`);
  }
  return lockoutCheck(set, { at: options.at });
}

/** One line naming the lockout: who is named and when nobody may log in. */
export function describeLockout(report: LockoutReport, where: string): string {
  const who = report.timeline.map((t) => t.subject).join(", ");
  const when = report.lockouts.slice(0, 4).map((r) =>
    `${formatWeekMinute(r.from)}–${formatWeekMinute(r.to)}`
  );
  const more = report.lockouts.length > 4 ? ` and ${report.lockouts.length - 4} more` : "";
  return `${where}: none of the accounts the SessionAccess rules name (${who}) may log in ` +
    `${
      when.join(", ")
    }${more} (${report.viewZone}); check the rules, or confirm with a lockout_reason to go ahead`;
}

/**
 * The release check: releasing delivers nothing by itself (bindings are enabled afterwards), so the
 * policy is checked with each node group it is bound to, as if those bindings were enabled.
 */
export async function guardSessionAccessRelease(
  q: Queryable,
  policyId: string,
  reason?: string,
): Promise<GuardOutcome | undefined> {
  const groups = await q.query<{ id: string; name: string }>(
    `SELECT g.id, g.name FROM policy_bindings b JOIN node_groups g ON g.id = b.node_group_id
     WHERE b.policy_id = $1 ORDER BY g.name`,
    [policyId],
  );
  let outcome: GuardOutcome | undefined;
  for (const group of groups) {
    const report = await sessionAccessReport(q, { policyId, nodeGroupId: group.id });
    if (report.lockouts.length === 0) continue;
    if (!reason?.trim()) {
      throw conflictError(
        describeLockout(report, `releasing this policy would lock node group "${group.name}" out`),
      );
    }
    outcome ??= { report, overriddenWith: reason.trim() };
  }
  return outcome;
}

/**
 * Refuses (conflict) a change that would leave no named account able to log in at some time of the
 * week, unless `reason` is given. Resolves with the report and the reason used, if any.
 */
export async function guardSessionAccess(
  q: Queryable,
  options: { policyId: string; nodeGroupId?: string; nodeGroupName?: string; reason?: string },
): Promise<GuardOutcome> {
  const report = await sessionAccessReport(q, options);
  if (report.lockouts.length === 0) return { report };
  const reason = options.reason?.trim();
  if (!reason) {
    const where = options.nodeGroupId
      ? `enabling this binding would lock node group "${options.nodeGroupName ?? options.nodeGroupId}" out`
      : "this policy would lock its accounts out";
    throw conflictError(describeLockout(report, where));
  }
  return { report, overriddenWith: reason };
}
