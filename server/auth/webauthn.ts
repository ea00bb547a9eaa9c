/**
 * Security keys and passkeys (WebAuthn): registering a credential for a signed-in user and checking an
 * assertion, as a second factor after the password or as a username-less (discoverable) login. SQL and
 * crypto only; no HTTP. Parsing and signature checks are `@simplewebauthn/server`'s.
 *
 * Challenges live in `pending_logins` (purpose `webauthn_register` / `webauthn_login`, or the challenge of a
 * `second_factor` pending login): random, bound to the user when there is one, good for
 * {@link PENDING_LOGIN_TTL_SECONDS} and used up by the check that reads them, so an assertion cannot be
 * replayed. The signature counter is advanced with a conditional update: a counter that does not grow (a
 * cloned authenticator, or two requests racing with one assertion) is refused.
 *
 * The relying party is the server's web port: RP ID = each of `server.hostnames` (default `localhost`),
 * origin `https://<host>:<enrollment_port>` (the port is left out when it is 443).
 *
 * @module
 */
import {
  type AuthenticationResponseJSON,
  generateAuthenticationOptions,
  generateRegistrationOptions,
  type RegistrationResponseJSON,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
} from "@simplewebauthn/server";
import type { ServerConfig } from "../config/config.ts";
import { type Queryable, queryOne } from "../db/db.ts";
import { DomainError } from "../core/errors.ts";
import { consumePendingLogin, createPendingLogin, findPendingLogin } from "./pending_logins.ts";

/** The relying party: names a credential may be scoped to and the pages that may use it. */
export interface RelyingParty {
  /** Accepted RP IDs; the first is offered to new credentials when the request names no other. */
  rpIds: string[];
  /** Accepted origins (`https://host[:port]`). */
  origins: string[];
  /** Shown by the authenticator. */
  name: string;
}

/** The relying party of a server configuration. */
export function relyingPartyOf(config: Pick<ServerConfig, "server">): RelyingParty {
  const hosts = config.server.hostnames.length > 0 ? config.server.hostnames : ["localhost"];
  const port = config.server.enrollmentPort;
  const rpIds = hosts.map((h) => h.toLowerCase());
  return {
    rpIds,
    origins: rpIds.map((h) => (port === 443 ? `https://${h}` : `https://${h}:${port}`)),
    name: "svc",
  };
}

/** What a key's answer must match: the challenge sent and one of this server's origins and RP ids. */
function expectedBy(rp: RelyingParty, challenge: string) {
  return { expectedChallenge: challenge, expectedOrigin: rp.origins, expectedRPID: rp.rpIds };
}

/** The RP ID for a request from `origin` (a configured host), else the first configured one. */
export function rpIdFor(rp: RelyingParty, origin: string | undefined): string {
  const i = origin ? rp.origins.indexOf(origin) : -1;
  return i >= 0 ? rp.rpIds[i] : rp.rpIds[0];
}

/** A registered credential as listed to its owner. */
export interface CredentialInfo {
  id: string;
  name: string;
  createdAt: Date;
  lastUsedAt: Date | null;
}

/** The user's credentials, oldest first. */
export async function listCredentials(q: Queryable, userId: string): Promise<CredentialInfo[]> {
  const rows = await q.query<{ id: string; name: string; created_at: Date; last_used_at: Date | null }>(
    `SELECT id, name, created_at, last_used_at FROM webauthn_credentials
      WHERE user_id = $1 ORDER BY created_at, name`,
    [userId],
  );
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    createdAt: new Date(r.created_at),
    lastUsedAt: r.last_used_at ? new Date(r.last_used_at) : null,
  }));
}

/** Removes one of the user's credentials; false when it is not theirs (or gone). */
export async function removeCredential(q: Queryable, userId: string, id: string): Promise<boolean> {
  const rows = await q.query("DELETE FROM webauthn_credentials WHERE id = $1 AND user_id = $2 RETURNING id", [
    id,
    userId,
  ]);
  return rows.length > 0;
}

/** Options for `navigator.credentials.create` plus the token that names its challenge. */
export async function startRegistration(
  q: Queryable,
  rp: RelyingParty,
  user: { id: string; username: string; fullName?: string },
  rpId: string = rp.rpIds[0],
): Promise<{ token: string; options: Record<string, unknown> }> {
  const existing = await q.query<{ credential_id: string; transports: string[] }>(
    "SELECT credential_id, transports FROM webauthn_credentials WHERE user_id = $1",
    [user.id],
  );
  const options = await generateRegistrationOptions({
    rpName: rp.name,
    rpID: rpId,
    userName: user.username,
    userDisplayName: user.fullName || user.username,
    userID: new TextEncoder().encode(user.id),
    attestationType: "none",
    excludeCredentials: existing.map((c) => ({
      id: c.credential_id,
      transports: c.transports as AuthenticatorTransportName[],
    })),
    authenticatorSelection: { residentKey: "preferred", userVerification: "preferred" },
    timeout: 120_000,
  });
  const pending = await createPendingLogin(q, {
    userId: user.id,
    purpose: "webauthn_register",
    challenge: options.challenge,
  });
  return { token: pending.token, options: options as unknown as Record<string, unknown> };
}

type AuthenticatorTransportName = "ble" | "cable" | "hybrid" | "internal" | "nfc" | "smart-card" | "usb";

/** Why a WebAuthn check failed (400 for the person; the kind goes to the audit row). */
export class WebAuthnError extends DomainError {
  constructor(readonly reason: string, message: string) {
    super("bad_request", message, undefined, { code: "webauthn_failed" });
  }
}

/**
 * Checks the answer of `navigator.credentials.create` against the challenge of `token` (used up here,
 * whatever the outcome) and stores the credential under `name`.
 */
export async function finishRegistration(
  q: Queryable,
  rp: RelyingParty,
  userId: string,
  input: { token: string; name: string; response: RegistrationResponseJSON },
): Promise<CredentialInfo> {
  const name = input.name.trim();
  if (name.length < 1 || name.length > 100) {
    throw new DomainError("bad_request", "name the key (1 to 100 characters)", [
      { field: "name", message: "must be 1 to 100 characters" },
    ], { code: "validation_failed" });
  }
  const pending = await findPendingLogin(q, input.token, "webauthn_register");
  if (
    !pending || pending.userId !== userId || !pending.challenge || !(await consumePendingLogin(q, pending.id))
  ) {
    throw new WebAuthnError("expired_or_used", "the registration expired or was already used: start again");
  }
  let verification;
  try {
    verification = await verifyRegistrationResponse({
      response: input.response,
      ...expectedBy(rp, pending.challenge),
      requireUserVerification: false,
    });
  } catch (err) {
    throw new WebAuthnError("invalid_attestation", `the key's answer was refused: ${messageOf(err)}`);
  }
  if (!verification.verified || !verification.registrationInfo) {
    throw new WebAuthnError("invalid_attestation", "the key's answer was refused");
  }
  const { credential } = verification.registrationInfo;
  const rows = await q.query<{ id: string; created_at: Date }>(
    `INSERT INTO webauthn_credentials (user_id, name, credential_id, public_key, sign_count, transports)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING id, created_at`,
    [
      userId,
      name,
      credential.id,
      toBase64Url(credential.publicKey),
      credential.counter,
      input.response.response.transports ?? [],
    ],
  );
  if (rows.length === 0) {
    throw new DomainError(
      "conflict",
      "this key is already registered, or another of your keys has this name: choose another name",
      undefined,
      { code: "webauthn_duplicate" },
    );
  }
  return { id: rows[0].id, name, createdAt: new Date(rows[0].created_at), lastUsedAt: null };
}

/**
 * Options for `navigator.credentials.get`. With `userId`, only that user's credentials are allowed (second
 * factor, step-up); without, any discoverable credential (passkey-first login). The challenge is stored on
 * the pending login `pendingId` when given (a `second_factor` one), else in a new `webauthn_login` one
 * whose token is returned.
 */
export async function startAuthentication(
  q: Queryable,
  rp: RelyingParty,
  input: { userId?: string; pendingId?: string; rpId?: string },
): Promise<{ token?: string; options: Record<string, unknown> }> {
  const allow = input.userId
    ? await q.query<{ credential_id: string; transports: string[] }>(
      "SELECT credential_id, transports FROM webauthn_credentials WHERE user_id = $1",
      [input.userId],
    )
    : [];
  const options = await generateAuthenticationOptions({
    rpID: input.rpId ?? rp.rpIds[0],
    allowCredentials: allow.map((c) => ({
      id: c.credential_id,
      transports: c.transports as AuthenticatorTransportName[],
    })),
    userVerification: input.userId ? "preferred" : "required",
    timeout: 120_000,
  });
  if (input.pendingId) {
    await q.query("UPDATE pending_logins SET challenge = $2 WHERE id = $1", [
      input.pendingId,
      options.challenge,
    ]);
    return { options: options as unknown as Record<string, unknown> };
  }
  const pending = await createPendingLogin(q, {
    userId: input.userId ?? null,
    purpose: "webauthn_login",
    challenge: options.challenge,
  });
  return { token: pending.token, options: options as unknown as Record<string, unknown> };
}

/**
 * Checks an assertion against `challenge` (the caller uses the challenge up) and advances the credential's
 * counter. With `userId` the credential must be theirs; passkey-first logins (no `userId`) require user
 * verification. Returns the user and credential; throws {@link WebAuthnError} otherwise.
 */
export async function verifyAssertion(
  q: Queryable,
  rp: RelyingParty,
  input: { challenge: string; userId?: string; response: AuthenticationResponseJSON },
): Promise<{ userId: string; credentialId: string; name: string }> {
  const credentialId = typeof input.response?.id === "string" ? input.response.id : "";
  const row = credentialId
    ? await queryOne<
      {
        id: string;
        user_id: string;
        name: string;
        public_key: string;
        sign_count: string | number;
        transports: string[];
      }
    >(
      q,
      `SELECT id, user_id, name, public_key, sign_count, transports FROM webauthn_credentials
        WHERE credential_id = $1`,
      [credentialId],
    )
    : undefined;
  if (!row || (input.userId !== undefined && row.user_id !== input.userId)) {
    throw new WebAuthnError("unknown_credential", "this key is not registered here (for this account)");
  }
  const stored = Number(row.sign_count);
  let verification;
  try {
    verification = await verifyAuthenticationResponse({
      response: input.response,
      ...expectedBy(rp, input.challenge),
      credential: {
        id: credentialId,
        publicKey: fromBase64Url(row.public_key),
        counter: stored,
        transports: row.transports as AuthenticatorTransportName[],
      },
      requireUserVerification: input.userId === undefined,
    });
  } catch (err) {
    const message = messageOf(err);
    const reason = /counter/i.test(message) ? "counter_regression" : "invalid_assertion";
    throw new WebAuthnError(reason, `the key's answer was refused: ${message}`);
  }
  if (!verification.verified) throw new WebAuthnError("invalid_assertion", "the key's answer was refused");
  const next = verification.authenticationInfo.newCounter;
  // Conditional on the value read: a racing use of the same counter value loses. Authenticators without a
  // counter (always 0) are accepted as long as they never started one.
  const won = await q.query(
    `UPDATE webauthn_credentials SET sign_count = $2, last_used_at = now()
      WHERE id = $1 AND sign_count = $3 AND ($2 > $3 OR ($2 = 0 AND $3 = 0)) RETURNING id`,
    [row.id, next, stored],
  );
  if (won.length === 0) {
    throw new WebAuthnError("counter_regression", "the key's signature counter did not advance: refused");
  }
  return { userId: row.user_id, credentialId: row.id, name: row.name };
}

/**
 * A passkey-first login (or a step-up with `forUserId`): checks the assertion against the challenge of the
 * `webauthn_login` pending login `token` (used up first, so a replay finds nothing). Returns the user id.
 */
export async function usePasskeyLogin(
  q: Queryable,
  rp: RelyingParty,
  token: string,
  response: AuthenticationResponseJSON,
  forUserId?: string,
): Promise<{ userId: string; name: string }> {
  const pending = await findPendingLogin(q, token, "webauthn_login");
  if (
    !pending || !pending.challenge || (forUserId !== undefined && pending.userId !== forUserId) ||
    !(await consumePendingLogin(q, pending.id))
  ) {
    throw new WebAuthnError("expired_or_used", "the sign-in expired or was already used: start again");
  }
  const found = await verifyAssertion(q, rp, {
    challenge: pending.challenge,
    userId: pending.userId ?? undefined,
    response,
  });
  return { userId: found.userId, name: found.name };
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function toBase64Url(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function fromBase64Url(text: string): Uint8Array<ArrayBuffer> {
  const b64 = text.replaceAll("-", "+").replaceAll("_", "/");
  return Uint8Array.from(atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0));
}
