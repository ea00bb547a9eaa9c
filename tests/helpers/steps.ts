/**
 * The steps of one long end-to-end story (enroll, enforce, restart, revoke…): each step builds on the ones
 * before, so after a failed step the rest are skipped instead of failing for the same cause and hiding it.
 */

/** Runs `fn` as a step while every step before it passed; `failed` says whether one did not. */
export interface StoryStep {
  (name: string, fn: () => Promise<void>): Promise<void>;
  readonly failed: boolean;
}

/** A step runner for `t`: runs `fn` as a step while every step before it passed. */
export function storySteps(t: Deno.TestContext): StoryStep {
  let failed = false;
  const step = async (name: string, fn: () => Promise<void>) => {
    if (failed) return;
    if (!(await t.step(name, fn))) failed = true;
  };
  return Object.defineProperty(step, "failed", { get: () => failed }) as StoryStep;
}
