/**
 * The curve of the internal CA the server creates (`ca.key_type`), apart from the CA code so that the
 * configuration can name the choices without loading the X.509 toolkit.
 *
 * @module
 */

/**
 * Curves a created CA may use (`ca.key_type`). P-256 by default: agent keys, the server certificates and the
 * preferred TLS curve are P-256 already, so a P-384 CA adds no strength to any chain it signs, while its
 * signature costs ~2.5× the CPU (1.46 against 0.60 ms here) at every enrollment and renewal, and every
 * mTLS handshake verifies it.
 */
export const CA_KEY_TYPES = ["P-256", "P-384"] as const;
/** One of {@linkcode CA_KEY_TYPES}. */
export type CaKeyType = typeof CA_KEY_TYPES[number];
/** The curve of a CA created without `ca.key_type`. */
export const DEFAULT_CA_KEY_TYPE: CaKeyType = "P-256";
