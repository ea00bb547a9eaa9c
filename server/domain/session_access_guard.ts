/**
 * Lockout guard for SessionAccess (the machinery is `lockout_guards.ts`): the rules that would reach a node
 * group (every released SessionAccess policy with an enabled binding to it, plus the policy in question) are
 * compiled with the agent's own compiler, and the week is searched for times at which no account the rules name
 * may log in. Such a change is refused with the accounts and the times, unless the caller gives a reason.
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
import { invalidError } from "../core/errors.ts";
import { LOCKOUT_HINT, type LockoutGuard } from "./lockout.ts";

/** Wire name of the guarded type. */
export const SESSION_ACCESS_TYPE = "SessionAccess";

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
    `${when.join(", ")}${more} (${report.viewZone}); ${LOCKOUT_HINT}`;
}

/** The SessionAccess lockout guard (see `lockout_guards.ts`): some time of the week at which nobody named may log in. */
export const sessionAccessGuard: LockoutGuard = {
  async check(q, options, where) {
    const report = await sessionAccessReport(q, options);
    return report.lockouts.length === 0 ? undefined : describeLockout(report, where);
  },
  outcome: (groupName) => `lock node group "${groupName}" out`,
};
