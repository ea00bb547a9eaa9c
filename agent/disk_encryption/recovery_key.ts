/**
 * Recovery keys as a person types them: 32 random bytes in modhex (the alphabet systemd uses for recovery
 * keys: it survives any keyboard layout) as 8 groups of 8 characters, e.g. `cbdefghi-jklnrtuv-…`. The whole
 * string is the LUKS passphrase.
 *
 * @module
 */

const MODHEX = "cbdefghijklnrtuv";

/** A new random recovery key. */
export function generateRecoveryKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  const chars = [...bytes].map((b) => MODHEX[b >> 4] + MODHEX[b & 15]).join("");
  bytes.fill(0);
  return chars.match(/.{8}/g)!.join("-");
}
