/** Errors and issue records of policy content handling. */

/** One problem found in policy content; `field` is a path such as `rules[2].action_ids` (empty: whole content). */
export interface ValidationIssue {
  field: string;
  message: string;
}

/**
 * Content that cannot be used at all: too large, too deep, not JSON, or not the type's message. `field` is
 * set when the problem sits at a known path (a string that is too long or contains NUL).
 */
export class PolicyContentError extends Error {
  constructor(message: string, readonly field = "") {
    super(message);
    this.name = "PolicyContentError";
  }
}
