/**
 * Signatures over content with the internal CA's key (a software key or one on a PKCS#11 token), for what agents
 * must be able to check came from this server: the scripts of a released Scripts policy
 * (`server/domain/scripts_policy.ts`). The algorithm is the CA key's own (ECDSA with its curve's hash,
 * RSASSA-PKCS1-v1_5, Ed25519), as agents derive it from the CA certificate (`shared/scripts_signature.ts`).
 *
 * @module
 */

import type { CaCredentials } from "./issue.ts";
import { signingAlgorithm } from "./keys.ts";
import { signWithProvider } from "./pkcs11.ts";

/** A signer of bytes with `ca`'s private key. */
export function caContentSigner(ca: CaCredentials): (data: Uint8Array<ArrayBuffer>) => Promise<Uint8Array> {
  return async (data) =>
    new Uint8Array(
      await signWithProvider(signingAlgorithm(ca.privateKey) as EcdsaParams, ca.privateKey, data),
    );
}
