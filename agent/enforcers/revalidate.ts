/**
 * The agent re-checks every policy the server sent before anything reaches the node (server data is
 * untrusted): one place splits a type's cached policies into the ones whose content parses and passes the
 * shared registry's checks, and ERROR results naming the problem for the others.
 *
 * @module
 */

import type { PolicyTypeDef } from "../../shared/policy_types/define.ts";
import { PolicyContentError } from "../../shared/policy_types/mod.ts";
import { parsePolicyContent } from "../sync/content.ts";
import type { Logger } from "../log.ts";
import type { CachedPolicy, PolicyResult } from "../sync/types.ts";

/** Policies whose content passed, with their checked message, and results for those that did not. */
export interface Revalidated<T> {
  valid: { policy: CachedPolicy; message: T }[];
  rejected: PolicyResult[];
}

/**
 * `policy`'s content parsed and validated by `def`, the shared registry's checks every enforcer starts from.
 *
 * @throws {PolicyContentError} naming the first problems (at most five).
 */
export function checkedContent<M>(policy: CachedPolicy, def: PolicyTypeDef<M>): M {
  const message = parsePolicyContent(policy, def);
  const issues = def.validate(message);
  if (issues.length) {
    throw new PolicyContentError(
      issues.slice(0, 5).map((i) => (i.field ? `${i.field}: ${i.message}` : i.message)).join("; "),
    );
  }
  return message;
}

/**
 * Runs `check` (usually {@link checkedContent} plus whatever else the enforcer must prove of one policy before
 * using it, such as rendering its file; it names a failure by throwing {@link PolicyContentError}, the message
 * an admin reads after "policy content rejected by the agent: ") (which throws {@link PolicyContentError} for bad content) on every policy of `type`; any other
 * error is a bug and propagates.
 */
export function revalidate<T>(
  type: string,
  policies: readonly CachedPolicy[],
  options: { check: (policy: CachedPolicy) => T; logger: Logger },
): Revalidated<T> {
  const out: Revalidated<T> = { valid: [], rejected: [] };
  for (const policy of policies) {
    try {
      out.valid.push({ policy, message: options.check(policy) });
    } catch (err) {
      if (!(err instanceof PolicyContentError)) throw err;
      options.logger.warn(`${type} policy rejected by the agent`, { policy: policy.id, error: err.message });
      out.rejected.push({
        policyId: policy.id,
        status: "ERROR",
        message: `policy content rejected by the agent: ${err.message}`,
        items: [],
      });
    }
  }
  return out;
}
