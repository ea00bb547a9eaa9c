/** Removes secrets from audit details before any sink sees them. */

/** Key fragments that mark a secret (matched case-insensitively, ignoring `_` and `-`). */
const SECRET_KEY_PARTS = [
  "password",
  "passwd",
  "token",
  "secret",
  "credential",
  "passphrase",
  "privatekey",
  "apikey",
  "jwt",
];

/**
 * Whole keys that are secrets although the words are too common to match inside other keys: a one-time `code`
 * (TOTP), a `backup_code`, a `recovery_key` — but not `status_code`, `backup_codes: 9` or `totp: true`.
 */
const SECRET_KEYS = new Set(["code", "otp", "totpcode", "backupcode", "recoverykey"]);

/** What replaces a secret value. */
export const REDACTED = "[REDACTED]";

/** Longest string kept in details; longer ones are cut (an audit row is not a copy of the request). */
const MAX_STRING = 4096;
/** Deepest nesting kept. */
const MAX_DEPTH = 12;

/** True when a key names a secret (`new_password`, `apiKey`, `private-key`, `X-Auth-Token`, `code`, …). */
export function isSecretKey(key: string): boolean {
  const k = key.toLowerCase().replace(/[_\-\s]/g, "");
  return SECRET_KEYS.has(k) || SECRET_KEY_PARTS.some((part) => k.includes(part));
}

/** A deep copy of `value` with every secret-keyed value replaced by {@link REDACTED}. */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > MAX_DEPTH) return "[TRUNCATED]";
  if (typeof value === "string") return value.length > MAX_STRING ? `${value.slice(0, MAX_STRING)}…` : value;
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  if (value !== null && typeof value === "object" && !(value instanceof Date)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      out[k] = isSecretKey(k) && v !== null && v !== undefined && v !== "" ? REDACTED : redact(v, depth + 1);
    }
    return out;
  }
  return value;
}
