/**
 * Step-up re-authentication: an already signed-in user proves again, inside the request, that they are
 * present before a sensitive action (revealing a recovery key). Today the proof is the account password,
 * checked with the same argon2id verification as the login; a second factor joins {@link StepUpProof} and
 * {@link checkStepUp} once MFA exists, and every caller gets it.
 *
 * Failures are limited like logins (per account and per client address), so a stolen session cannot be
 * used to guess the password.
 *
 * @module
 */
import type { Queryable } from "../db/db.ts";
import { HttpError } from "../http/errors.ts";
import { verifyPassword } from "./password.ts";
import { createLoginLimiter, type LoginLimiter } from "./rate_limit.ts";
import { passwordHashOf } from "./users.ts";

/** What the caller sends to re-authenticate. */
export interface StepUpProof {
  password?: string;
}

/** The step-up checker of one server process (its failure limiter is per process, like the login's). */
export interface StepUp {
  /**
   * Resolves when `proof` re-authenticates `userId`; throws 403 `reauthentication_required` without a
   * proof, 403 `reauthentication_failed` for a wrong one, 429 after too many failures.
   */
  check(q: Queryable, userId: string, proof: StepUpProof, clientIp: string): Promise<void>;
}

/** Creates a checker; `limiter` defaults to 5 failures per 5 minutes per account and per address. */
export function createStepUp(
  limiter: LoginLimiter = createLoginLimiter({ maxFailures: 5, windowMs: 300_000 }),
): StepUp {
  return {
    async check(q, userId, proof, clientIp) {
      if (!proof.password) {
        throw new HttpError(
          403,
          "reauthentication_required",
          "this action needs fresh re-authentication: send your current password in the request",
        );
      }
      const keys = [`stepup-ip:${clientIp}`, `stepup-user:${userId}`];
      const wait = limiter.retryAfter(keys);
      if (wait > 0) {
        throw new HttpError(
          429,
          "too_many_attempts",
          `too many failed re-authentications; try again in ${wait} seconds`,
          undefined,
          { "retry-after": String(wait) },
        );
      }
      if (!(await verifyPassword(proof.password, await passwordHashOf(q, userId)))) {
        limiter.fail(keys);
        throw new HttpError(
          403,
          "reauthentication_failed",
          "re-authentication failed: the password is wrong",
        );
      }
      limiter.reset(keys[1]);
    },
  };
}
