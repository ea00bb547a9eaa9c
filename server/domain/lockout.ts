/**
 * What a lockout guard of one policy type is (see `lockout_guards.ts` for the machinery that runs them): how it
 * checks a node group's set and how it words a lockout.
 *
 * @module
 */

import type { Queryable } from "../db/db.ts";

/** How one type's lockout is found and said. */
export interface LockoutGuard {
  /**
   * Checks the set of the type's policies reaching `nodeGroupId`, with `policyId` counted as delivered. Resolves
   * the refusal (one sentence starting with `where`, ending with the hint about `lockout_reason`), or undefined
   * when nobody is locked out.
   */
  check(
    q: Queryable,
    options: { policyId: string; nodeGroupId: string },
    where: string,
  ): Promise<string | undefined>;
  /** The lockout as a phrase about a group: `lock node group "lab" out`. */
  outcome(groupName: string): string;
}

/** The closing words of every refusal; the console looks for `lockout_reason` to ask for one. */
export const LOCKOUT_HINT = "check the rules, or confirm with a lockout_reason to go ahead";
