/**
 * Step-up re-authentication: an already signed-in user proves again, inside the request, that they are
 * present before a dangerous action (revealing a recovery key, changing someone's roles or role bindings,
 * creating a token that acts as someone else). The proof is the account password (argon2id, as at login)
 * and, when the user has a second factor, a fresh TOTP code, a backup code or a security key's assertion,
 * each used up as at login (a code accepted at login cannot be replayed here, and the other way round).
 *
 * Failures are limited in the database (replicas share the counts) per account from one client address and
 * per account from anywhere, so a stolen session cannot be used to guess the password or the code, on one
 * replica or spread over several. Nothing is counted per address alone: offices share one NAT address, and a
 * user with no role must not be able to lock the administrators behind it out of step-up by failing on
 * purpose. A thief guessing from one address is stopped there first, while the owner elsewhere still passes
 * until the account's own (larger) allowance is used up.
 *
 * @module
 */
import type { ServerConfig } from "../config/config.ts";
import { afterUnit, type Db, type Queryable, queryOne } from "../db/db.ts";
import { DomainError } from "../core/errors.ts";
import { factorsOf, hasSecondFactor, type SecretSealer, useSecondFactor } from "./mfa.ts";
import { verifyPassword } from "./password.ts";
import { createWindowLimiter } from "./rate_limit.ts";
import { ldapAuthenticate, LdapError } from "./ldap.ts";
import { type RelyingParty, usePasskeyLogin, WebAuthnError } from "./webauthn.ts";

/** What the caller sends to re-authenticate. */
export interface StepUpProof {
  password?: string;
  /** A 6-digit TOTP code (needed when the user has a second factor). */
  code?: string;
  /** A backup code, instead of `code`. */
  backupCode?: string;
  /**
   * A security key's assertion instead of a code: the token and challenge of
   * `POST /api/v1/auth/step-up/webauthn/options` and the answer of `navigator.credentials.get`.
   */
  webauthn?: { token: string; response: unknown };
}

/**
 * Failed step-ups allowed in one window of `windowSeconds`: per account from one client address, and per
 * account from every address together.
 */
export const STEP_UP_LIMIT = { perAccountAndAddress: 5, perAccount: 10, windowSeconds: 300 } as const;

/** The step-up checker (its failure counts are in the database, shared by every replica). */
export interface StepUp {
  /**
   * Resolves when `proof` re-authenticates `userId`; throws 403 `reauthentication_required` without a
   * password, 403 `second_factor_required` without a code when the user has a second factor, 403
   * `reauthentication_failed` for a wrong password or code, 429 after too many failures. `q` is the
   * database handle or a transaction; a failure is counted once the request's unit of work has ended (a
   * refused request rolls back what it wrote, and the count must stay).
   */
  check(q: Queryable, userId: string, proof: StepUpProof, clientIp: string): Promise<void>;
}

/**
 * Creates a checker. `sealer` opens TOTP secrets (from `createSecretSealer(config.security.jwtSecret)`);
 * `directory` (`config.ldap`) checks the password of directory users; failures are limited as
 * {@link STEP_UP_LIMIT} says.
 */
export function createStepUp(
  db: Db,
  sealer: SecretSealer,
  options: { directory?: ServerConfig["ldap"]; relyingParty?: RelyingParty } = {},
): StepUp {
  const { windowSeconds } = STEP_UP_LIMIT;
  const fromAddress = createWindowLimiter(db, { max: STEP_UP_LIMIT.perAccountAndAddress, windowSeconds });
  const fromAnywhere = createWindowLimiter(db, { max: STEP_UP_LIMIT.perAccount, windowSeconds });
  const passwordOk = async (q: Queryable, userId: string, password: string): Promise<boolean> => {
    const user = await queryOne<{ username: string; source: string; password_hash: string }>(
      q,
      "SELECT username, source, password_hash FROM users WHERE id = $1",
      [userId],
    );
    if (user?.source !== "ldap") return await verifyPassword(password, user?.password_hash);
    if (!options.directory?.url) return false;
    try {
      await ldapAuthenticate(options.directory, user.username, password);
      return true;
    } catch (err) {
      if (!(err instanceof LdapError)) throw err;
      if (err.kind === "unreachable" || err.kind === "bad_bind") {
        throw new DomainError(
          "unavailable",
          "the user directory cannot check your password right now; try again later",
          undefined,
          { code: "directory_unavailable" },
        );
      }
      return false;
    }
  };
  const webauthnOk = async (
    q: Queryable,
    userId: string,
    proof: { token: string; response: unknown },
  ): Promise<boolean> => {
    if (!options.relyingParty || typeof proof.token !== "string") return false;
    try {
      await usePasskeyLogin(q, options.relyingParty, proof.token, proof.response as never, userId);
      return true;
    } catch (err) {
      if (err instanceof WebAuthnError) return false;
      throw err;
    }
  };
  return {
    async check(q, userId, proof, clientIp) {
      if (!proof.password) {
        throw new DomainError(
          "forbidden",
          "this action needs fresh re-authentication: send your current password in the request",
          undefined,
          { code: "reauthentication_required" },
        );
      }
      const addressKey = [`stepup-user-ip:${userId}:${clientIp}`];
      const accountKey = [`stepup-user:${userId}`];
      const refuse = async (message: string): Promise<never> => {
        await afterUnit(async () => {
          await fromAddress.fail(db, addressKey);
          await fromAnywhere.fail(db, accountKey);
        });
        throw new DomainError("forbidden", message, undefined, { code: "reauthentication_failed" });
      };
      const wait = Math.max(
        await fromAddress.retryAfter(q, addressKey),
        await fromAnywhere.retryAfter(q, accountKey),
      );
      if (wait > 0) {
        throw new DomainError(
          "too_many_requests",
          `too many failed re-authentications of your account; try again in ${wait} seconds`,
          undefined,
          { code: "too_many_attempts", retryAfterSeconds: wait },
        );
      }
      if (!(await passwordOk(q, userId, proof.password))) {
        await refuse("re-authentication failed: the password is wrong");
      }
      if (hasSecondFactor(await factorsOf(q, userId))) {
        if (!proof.code && !proof.backupCode && !proof.webauthn) {
          throw new DomainError(
            "forbidden",
            "this action needs your second factor too: send code (6 digits from your authenticator app), " +
              "backup_code or webauthn (a security key's answer)",
            undefined,
            { code: "second_factor_required" },
          );
        }
        const passed = proof.webauthn
          ? await webauthnOk(q, userId, proof.webauthn)
          : await useSecondFactor(q, sealer, userId, { code: proof.code, backupCode: proof.backupCode });
        if (!passed) {
          await refuse(
            "re-authentication failed: the code is wrong or was already used; wait for the next one",
          );
        }
      }
      await fromAddress.reset(q, addressKey[0]);
      await fromAnywhere.reset(q, accountKey[0]);
    },
  };
}
