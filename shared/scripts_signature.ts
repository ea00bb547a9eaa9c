/**
 * The signature over a released Scripts policy: what is signed, and how a node checks it.
 *
 * The server signs, at release, with its CA's private key (`server/domain/scripts_release.ts`): the policy's id
 * and version and every script's name, trigger, interpreter, body, timeout and run-again counter, as one text
 * ({@link scriptsSignedText}). The agent verifies with the CA certificate it pinned at enrollment (the issuing
 * CA, first in the file) before any script is written or run ({@link verifyScriptsSignature}): content changed
 * after release (in the database, in transit, in the agent's cache), content of another policy or version, and
 * content never released carry no valid signature and run nowhere.
 *
 * The algorithm follows from the CA's key, never from the signed data: ECDSA with the curve's hash (P-256
 * SHA-256, P-384 SHA-384, P-521 SHA-512, signatures r‖s as WebCrypto makes them), RSASSA-PKCS1-v1_5 with
 * SHA-256, or Ed25519.
 *
 * @module
 */

import type { Script, ScriptsPolicy } from "./gen/svc/policy/v1/scripts_pb.ts";

/** What a signature is checked against: the policy as the node received it. */
export interface SignedPolicyRef {
  id: string;
  version: number;
}

/** The exact bytes signed for `scripts` of the policy `ref`. */
export function scriptsSignedText(ref: SignedPolicyRef, scripts: readonly Script[]): Uint8Array<ArrayBuffer> {
  const payload = {
    policy: ref.id,
    version: ref.version,
    scripts: scripts.map((s) => ({
      name: s.name,
      trigger: s.trigger,
      interpreter: s.interpreter,
      body: s.body,
      timeout_seconds: s.timeoutSeconds,
      run_again: s.runAgain,
    })),
  };
  return new TextEncoder().encode(`svc Scripts signature v1\n${JSON.stringify(payload)}`);
}

const HASH_BY_CURVE: Record<string, string> = { "P-256": "SHA-256", "P-384": "SHA-384", "P-521": "SHA-512" };

/** The parameters a public key of `algorithm` is imported and verifies with. */
export function verifyParams(
  algorithm: KeyAlgorithm,
): { importParams: EcKeyImportParams | RsaHashedImportParams | Algorithm; params: EcdsaParams | Algorithm } {
  if (algorithm.name === "ECDSA") {
    const curve = (algorithm as EcKeyAlgorithm).namedCurve;
    const hash = HASH_BY_CURVE[curve];
    if (!hash) throw new Error(`the CA key's curve ${curve} is not supported`);
    return { importParams: { name: "ECDSA", namedCurve: curve }, params: { name: "ECDSA", hash } };
  }
  if (
    algorithm.name === "RSASSA-PKCS1-v1_5" || algorithm.name === "RSA-PSS" || algorithm.name === "RSA-OAEP"
  ) {
    return {
      importParams: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
      params: { name: "RSASSA-PKCS1-v1_5" },
    };
  }
  if (algorithm.name === "Ed25519") return { importParams: { name: "Ed25519" }, params: { name: "Ed25519" } };
  throw new Error(`the CA key's algorithm ${algorithm.name} is not supported`);
}

function fromBase64(text: string): Uint8Array<ArrayBuffer> | undefined {
  try {
    const raw = atob(text.replace(/\s+/g, ""));
    return Uint8Array.from(raw, (c) => c.charCodeAt(0));
  } catch {
    return undefined;
  }
}

/**
 * Checks the server's signature on `content` as the policy `ref` against the issuing CA of `caPem` (the agent's
 * pinned `ca.crt`). Resolves undefined when it verifies, otherwise what is wrong, for the compliance message.
 */
export async function verifyScriptsSignature(
  caPem: string,
  ref: SignedPolicyRef,
  content: ScriptsPolicy,
): Promise<string | undefined> {
  const signature = content.signature;
  if (!signature?.value) return "the scripts carry no signature of the server (was the policy released?)";
  if (signature.policyVersion !== ref.version) {
    return `the signature is for version ${signature.policyVersion}, the policy arrived as version ${ref.version}`;
  }
  const bytes = fromBase64(signature.value);
  if (!bytes) return "the signature is not base64";
  const { x509 } = await import("./pki/csr.ts");
  let key: CryptoKey;
  let params: EcdsaParams | Algorithm;
  try {
    const block = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/.exec(caPem);
    if (!block) throw new Error("no certificate in it");
    const cert = new x509.X509Certificate(block[0]);
    const chosen = verifyParams(cert.publicKey.algorithm);
    params = chosen.params;
    key = await cert.publicKey.export(chosen.importParams, ["verify"]);
  } catch (err) {
    return `the CA certificate cannot check signatures: ${(err as Error).message}`;
  }
  const ok = await crypto.subtle.verify(params, key, bytes, scriptsSignedText(ref, content.scripts))
    .catch(() => false);
  return ok ? undefined : "the signature does not verify against the server's CA: the scripts were changed " +
    "after release or were not signed by this server";
}
