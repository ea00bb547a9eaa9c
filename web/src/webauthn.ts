/// <reference lib="dom" />
/**
 * The browser half of security keys and passkeys, with the plain WebAuthn API: the server's options (JSON,
 * binary fields base64url) become `navigator.credentials` arguments, and the credential it returns becomes
 * JSON for the server again.
 */
import { api, type StepUpProof } from "./api.ts";

type Json = Record<string, unknown>;

function fromB64url(text: string): ArrayBuffer {
  const b64 = text.replaceAll("-", "+").replaceAll("_", "/");
  const bytes = Uint8Array.from(atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0));
  return bytes.buffer;
}

function toB64url(buffer: ArrayBuffer | null | undefined): string | undefined {
  if (!buffer) return undefined;
  let s = "";
  for (const b of new Uint8Array(buffer)) s += String.fromCharCode(b);
  return btoa(s).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

const descriptors = (list: unknown) =>
  Array.isArray(list)
    ? list.map((c: Json) => ({ ...c, type: "public-key", id: fromB64url(String(c.id)) }))
    : undefined;

/** True when this browser can use security keys at all. */
export function webauthnAvailable(): boolean {
  return typeof (globalThis as { PublicKeyCredential?: unknown }).PublicKeyCredential === "function" &&
    !!navigator.credentials;
}

/** `navigator.credentials.create` for the server's registration options; the credential as JSON. */
export async function createCredential(options: Json): Promise<Json> {
  const user = options.user as Json;
  const cred = await navigator.credentials.create({
    publicKey: {
      ...(options as unknown as PublicKeyCredentialCreationOptions),
      challenge: fromB64url(String(options.challenge)),
      user: { ...(user as unknown as PublicKeyCredentialUserEntity), id: fromB64url(String(user.id)) },
      excludeCredentials: descriptors(options.excludeCredentials) as PublicKeyCredentialDescriptor[],
    },
  }) as PublicKeyCredential | null;
  if (!cred) throw new Error("The security key did not answer.");
  const r = cred.response as AuthenticatorAttestationResponse;
  return {
    id: cred.id,
    rawId: toB64url(cred.rawId),
    type: cred.type,
    response: {
      clientDataJSON: toB64url(r.clientDataJSON),
      attestationObject: toB64url(r.attestationObject),
      transports: typeof r.getTransports === "function" ? r.getTransports() : [],
    },
    clientExtensionResults: cred.getClientExtensionResults(),
    authenticatorAttachment: cred.authenticatorAttachment ?? undefined,
  };
}

/** `navigator.credentials.get` for the server's authentication options; the assertion as JSON. */
export async function getAssertion(options: Json): Promise<Json> {
  const cred = await navigator.credentials.get({
    publicKey: {
      ...(options as unknown as PublicKeyCredentialRequestOptions),
      challenge: fromB64url(String(options.challenge)),
      allowCredentials: descriptors(options.allowCredentials) as PublicKeyCredentialDescriptor[],
    },
  }) as PublicKeyCredential | null;
  if (!cred) throw new Error("The security key did not answer.");
  const r = cred.response as AuthenticatorAssertionResponse;
  return {
    id: cred.id,
    rawId: toB64url(cred.rawId),
    type: cred.type,
    response: {
      clientDataJSON: toB64url(r.clientDataJSON),
      authenticatorData: toB64url(r.authenticatorData),
      signature: toB64url(r.signature),
      userHandle: toB64url(r.userHandle),
    },
    clientExtensionResults: cred.getClientExtensionResults(),
    authenticatorAttachment: cred.authenticatorAttachment ?? undefined,
  };
}

/** A step-up proof made with the person's key: `{ webauthn: { token, response } }`. */
export async function stepUpWithKey(): Promise<{ webauthn: { token: string; response: Json } }> {
  const started = await api.call("POST /api/v1/auth/step-up/webauthn/options");
  return { webauthn: { token: started.token, response: await getAssertion(started.options) } };
}

/** Registers a key (after step-up with `proof`) under `name`. */
export async function registerKey(name: string, proof: StepUpProof): Promise<void> {
  const started = await api.call("POST /api/v1/auth/webauthn/register/options", { body: proof });
  const response = await createCredential(started.options);
  await api.call("POST /api/v1/auth/webauthn/register", {
    body: { token: started.token, name, response },
  });
}

/** Logs in with a key: after the password (`token` of the first step) or as a passkey alone. */
export async function loginWithKey(token?: string): Promise<void> {
  const started = await api.call("POST /api/v1/auth/login/webauthn/options", {
    body: token ? { token } : {},
  });
  const response = await getAssertion(started.options);
  await api.call("POST /api/v1/auth/login/webauthn", {
    body: { token: token ?? started.token, response },
  });
}
