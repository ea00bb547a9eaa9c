/**
 * Password hashing with argon2id (`argon2.ts`), run in an off-loop worker so that no login holds up other
 * requests, and the password rules.
 */
import { DomainError } from "../core/errors.ts";
import { argon2idHashOffLoop, argon2idVerifyOffLoop } from "./argon2.ts";

/** Shortest password the server accepts. */
export const MIN_PASSWORD_LENGTH = 12;
/** Longest password the server hashes (bounds the work an unauthenticated caller can ask for). */
export const MAX_PASSWORD_LENGTH = 1024;

/** Hashes a password into the PHC string form (`$argon2id$v=19$m=…`). */
export async function hashPassword(password: string): Promise<string> {
  return await argon2idHashOffLoop({ password });
}

/** A valid hash of a random password: verifying against it costs the same time as a real check. */
let dummyHash: Promise<string> | undefined;

/**
 * Checks `password` against a stored hash. With no hash (unknown user, disabled user, account without a
 * local password) a dummy hash is checked instead, so the answer takes the same time either way.
 */
export async function verifyPassword(password: string, hash: string | undefined): Promise<boolean> {
  if (password.length > MAX_PASSWORD_LENGTH) return false;
  if (!hash || !hash.startsWith("$argon2id$")) {
    dummyHash ??= hashPassword(crypto.randomUUID());
    await argon2idVerifyOffLoop({ password, hash: await dummyHash });
    return false;
  }
  return await argon2idVerifyOffLoop({ password, hash });
}

/** Throws a 400 naming `field` when the password breaks the rules. */
export function checkPasswordRules(password: string, field = "password"): void {
  const length = [...password].length;
  if (length < MIN_PASSWORD_LENGTH) {
    throw badPassword(`${field} must be at least ${MIN_PASSWORD_LENGTH} characters long`, [
      { field, message: `must be at least ${MIN_PASSWORD_LENGTH} characters long` },
    ]);
  }
  if (length > MAX_PASSWORD_LENGTH) {
    throw badPassword(`${field} must be at most ${MAX_PASSWORD_LENGTH} characters long`, [
      { field, message: `must be at most ${MAX_PASSWORD_LENGTH} characters long` },
    ]);
  }
  if (password.trim() === "") {
    throw badPassword(`${field} must not be only whitespace`, [{
      field,
      message: "must not be only whitespace",
    }]);
  }
}

/** A random password for the initial admin: 24 characters from an unambiguous alphabet (~137 bits). */
export function generatePassword(length = 24): string {
  const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
  const out: string[] = [];
  // Rejection sampling keeps every character equally likely.
  const limit = 256 - (256 % alphabet.length);
  while (out.length < length) {
    for (const b of crypto.getRandomValues(new Uint8Array(length * 2))) {
      if (b < limit && out.length < length) out.push(alphabet[b % alphabet.length]);
    }
  }
  return out.join("");
}

/** 400 `bad_request` naming the password field and what is wrong with it. */
function badPassword(message: string, fields: { field: string; message: string }[]): DomainError {
  return new DomainError("bad_request", message, fields);
}
