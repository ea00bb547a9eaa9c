/**
 * Lockout guards: policy types whose delivered set can lock people out of a node group's nodes (SessionAccess:
 * nobody named may log in at some time; Privilege: nobody administers them but root). Before a policy of such a
 * type is released (checked with every node group it is bound to, as if those bindings were enabled) or one of
 * its bindings is enabled, its type's guard checks the set the node group would then receive. A lockout is
 * refused (409, naming the node group) unless the caller gives a reason; the route audits the reason.
 *
 * One machinery for every guarded type; a type states only how it checks a set and how a lockout is said.
 *
 * @module
 */

import type { Queryable } from "../db/db.ts";
import { conflictError } from "../core/errors.ts";
import type { LockoutGuard } from "./lockout.ts";
import { privilegeGuard } from "./privilege_guard.ts";
import { sessionAccessGuard } from "./session_access_guard.ts";

const GUARDS: Record<string, LockoutGuard> = {
  SessionAccess: sessionAccessGuard,
  Privilege: privilegeGuard,
};

/**
 * The release check of a policy of `type`: releasing delivers nothing by itself (bindings are enabled afterwards),
 * so it is checked with each node group it is bound to. Resolves the reason that overrode a lockout, if any.
 */
export async function guardRelease(
  q: Queryable,
  options: { type: string; policyId: string; reason?: string },
): Promise<string | undefined> {
  const guard = GUARDS[options.type];
  if (!guard) return undefined;
  const groups = await q.query<{ id: string; name: string }>(
    `SELECT DISTINCT g.id, g.name FROM policy_bindings b JOIN node_groups g ON g.id = b.node_group_id
     WHERE b.policy_id = $1 ORDER BY g.name`,
    [options.policyId],
  );
  let overridden: string | undefined;
  for (const group of groups) {
    const refusal = await guard.check(
      q,
      { policyId: options.policyId, nodeGroupId: group.id },
      `releasing this policy would ${guard.outcome(group.name)}`,
    );
    if (!refusal) continue;
    const reason = options.reason?.trim();
    if (!reason) throw conflictError(refusal);
    overridden = reason;
  }
  return overridden;
}

/** The check of enabling a binding of a policy of `type`. Resolves the reason that overrode a lockout, if any. */
export async function guardBindingEnable(
  q: Queryable,
  options: { type: string; policyId: string; nodeGroupId: string; nodeGroupName: string; reason?: string },
): Promise<string | undefined> {
  const guard = GUARDS[options.type];
  if (!guard) return undefined;
  const refusal = await guard.check(
    q,
    { policyId: options.policyId, nodeGroupId: options.nodeGroupId },
    `enabling this binding would ${guard.outcome(options.nodeGroupName)}`,
  );
  if (!refusal) return undefined;
  const reason = options.reason?.trim();
  if (!reason) throw conflictError(refusal);
  return reason;
}
