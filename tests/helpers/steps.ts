/**
 * The steps of one long end-to-end story (enroll, enforce, restart, revoke…): each step builds on the ones
 * before, so after a failed step the rest are skipped instead of failing for the same cause and hiding it.
 */

/** A step runner for `t`: runs `fn` as a step while every step before it passed. */
export function storySteps(t: Deno.TestContext): (name: string, fn: () => Promise<void>) => Promise<void> {
  let failed = false;
  return async (name, fn) => {
    if (failed) return;
    if (!(await t.step(name, fn))) failed = true;
  };
}
