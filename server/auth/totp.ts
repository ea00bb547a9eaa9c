/**
 * Time-based one-time passwords (RFC 6238 over RFC 4226 HOTP) on WebCrypto HMAC-SHA1, the variant every
 * authenticator app implements: 30-second steps, 6 digits, base32 secrets in an `otpauth://` URI.
 *
 * Pure functions; storing secrets and refusing replays is `mfa.ts`'s job.
 *
 * @module
 */

/** Seconds per time step. */
export const TOTP_STEP_SECONDS = 30;
/** Digits of a code. */
export const TOTP_DIGITS = 6;
/** Steps before and after the current one that still match (clock drift, slow typing). */
export const TOTP_DRIFT_STEPS = 1;

const BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/** RFC 4648 base32 without padding (how authenticator apps want the secret). */
export function base32Encode(bytes: Uint8Array): string {
  let out = "";
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(buffer >>> (bits - 5)) & 31];
      bits -= 5;
    }
    buffer &= (1 << bits) - 1;
  }
  if (bits > 0) out += BASE32[(buffer << (5 - bits)) & 31];
  return out;
}

/** Decodes base32 (case, spaces and padding ignored); throws on any other character. */
export function base32Decode(text: string): Uint8Array<ArrayBuffer> {
  const clean = text.replace(/[\s=]/g, "").toUpperCase();
  const out: number[] = [];
  let buffer = 0;
  let bits = 0;
  for (const ch of clean) {
    const value = BASE32.indexOf(ch);
    if (value < 0) throw new Error(`base32: "${ch}" is not a base32 character`);
    buffer = (buffer << 5) | value;
    bits += 5;
    if (bits >= 8) {
      out.push((buffer >>> (bits - 8)) & 255);
      bits -= 8;
    }
    buffer &= (1 << bits) - 1;
  }
  return new Uint8Array(out);
}

/** A new random 160-bit secret (the HMAC-SHA1 block size RFC 4226 recommends). */
export function newTotpSecret(): Uint8Array<ArrayBuffer> {
  return crypto.getRandomValues(new Uint8Array(20));
}

/** HOTP (RFC 4226) of `counter` with HMAC-SHA1, `digits` long. */
export async function hotp(
  secret: Uint8Array<ArrayBuffer>,
  counter: number,
  digits: number = TOTP_DIGITS,
): Promise<string> {
  const key = await crypto.subtle.importKey("raw", secret, { name: "HMAC", hash: "SHA-1" }, false, ["sign"]);
  const message = new Uint8Array(8);
  // Counters beyond 2^32 (year 2106 with 30 s steps, and the RFC's year-2603 vector) need both halves.
  new DataView(message.buffer).setUint32(0, Math.floor(counter / 2 ** 32));
  new DataView(message.buffer).setUint32(4, counter >>> 0);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, message));
  const offset = mac[mac.length - 1] & 0x0f;
  const binary = ((mac[offset] & 0x7f) << 24) | (mac[offset + 1] << 16) | (mac[offset + 2] << 8) |
    mac[offset + 3];
  return String(binary % 10 ** digits).padStart(digits, "0");
}

/** The time step containing `atMs`. */
export function totpStep(atMs: number): number {
  return Math.floor(atMs / 1000 / TOTP_STEP_SECONDS);
}

/** The TOTP code at `atMs`. */
export async function totp(
  secret: Uint8Array<ArrayBuffer>,
  atMs: number,
  digits: number = TOTP_DIGITS,
): Promise<string> {
  return await hotp(secret, totpStep(atMs), digits);
}

/**
 * The time step whose code `code` is, searching the current step and {@link TOTP_DRIFT_STEPS} either side,
 * newest first; undefined when none matches. The caller refuses steps at or before the last one used.
 */
export async function matchTotpStep(
  secret: Uint8Array<ArrayBuffer>,
  code: string,
  atMs: number,
): Promise<number | undefined> {
  if (!new RegExp(`^[0-9]{${TOTP_DIGITS}}$`).test(code)) return undefined;
  const now = totpStep(atMs);
  let found: number | undefined;
  // Every candidate is computed and compared, so the time taken does not tell which step matched.
  for (let step = now + TOTP_DRIFT_STEPS; step >= now - TOTP_DRIFT_STEPS; step--) {
    const expected = await hotp(secret, step);
    let diff = 0;
    for (let i = 0; i < expected.length; i++) diff |= expected.charCodeAt(i) ^ code.charCodeAt(i);
    if (diff === 0 && found === undefined) found = step;
  }
  return found;
}

/** The `otpauth://totp/` URI an authenticator app scans (issuer `svc`, label `svc:<username>`). */
export function otpauthUri(secret: Uint8Array, username: string, issuer = "svc"): string {
  const label = `${encodeURIComponent(issuer)}:${encodeURIComponent(username)}`;
  const params = new URLSearchParams({
    secret: base32Encode(secret),
    issuer,
    algorithm: "SHA1",
    digits: String(TOTP_DIGITS),
    period: String(TOTP_STEP_SECONDS),
  });
  return `otpauth://totp/${label}?${params}`;
}
