/**
 * Step-up re-authentication as a REST request carries it: the body properties a route declares for the
 * proof (top level or as one `step_up` object), reading the proof from the request, and masking the codes in
 * the copy of the body the audit row keeps. The check itself is an identity rule (server/auth/step_up.ts).
 *
 * @module
 */
import type { StepUp, StepUpProof } from "../auth/step_up.ts";
import type { Queryable } from "../db/db.ts";
import { body, caller, type RouteContext } from "./route.ts";

/** The proof's fields, as a route's body or its `step_up` object carries them. */
const PROOF_PROPERTIES = {
  password: { type: "string", maxLength: 1024, description: "Your password (step-up re-authentication)" },
  code: {
    type: "string",
    maxLength: 16,
    description: "A code from your authenticator app, when you have one",
  },
  backup_code: { type: "string", maxLength: 32, description: "A backup code, instead of code" },
  webauthn: {
    type: "object",
    additionalProperties: false,
    description:
      "A security key's answer instead of code (challenge from /api/v1/auth/step-up/webauthn/options)",
    properties: {
      token: { type: "string", maxLength: 64 },
      response: { type: "object", description: "PublicKeyCredential.toJSON() of navigator.credentials.get" },
    },
  },
} as const;

/**
 * The `step_up` body property: the same proof as one object. The console always sends it this way, and it is
 * the only way where the body's own `password` means something else (`POST /api/v1/users`).
 */
export const STEP_UP_OBJECT_PROPERTY = {
  step_up: {
    type: "object",
    additionalProperties: false,
    description: "Step-up re-authentication as one object (password, code, backup_code or webauthn)",
    properties: PROOF_PROPERTIES,
  },
} as const;

/** JSON-schema properties a route adds to its body to carry a {@link StepUpProof}: top level or `step_up`. */
export const STEP_UP_PROPERTIES = { ...PROOF_PROPERTIES, ...STEP_UP_OBJECT_PROPERTY } as const;

/** The body of a route whose only input is the step-up proof. */
export const STEP_UP_BODY = {
  type: "object",
  additionalProperties: false,
  properties: STEP_UP_PROPERTIES,
} as const;

/** The 403 answer of a route that may ask for step-up. */
export const STEP_UP_REFUSED = {
  description: "Missing permission, or step-up re-authentication (password, code)",
} as const;

/**
 * Checks the caller's step-up proof: `proof`, or else the one in the body. A route that checks only in some
 * cases takes the proof first ({@link takeStepUpProof}), so the codes are masked in the audit row's copy of
 * the body whether or not the check runs.
 */
export async function checkStepUp(
  stepUp: StepUp,
  q: Queryable,
  c: RouteContext,
  proof: StepUpProof = takeStepUpProof(c),
): Promise<void> {
  await stepUp.check(q, caller(c).id, proof, c.get("clientIp"));
}

/**
 * The proof out of the body of a route that used {@link STEP_UP_PROPERTIES} (or, with `objectOnly`, only
 * {@link STEP_UP_OBJECT_PROPERTY}, where the body's own fields mean something else). The codes are then
 * masked in the body the request's audit row copies (the recorder masks passwords by key, but not `code`: a
 * backup code typed wrong by one character must not end up in the audit log).
 */
export function takeStepUpProof(c: RouteContext, options: { objectOnly?: boolean } = {}): StepUpProof {
  type Fields = {
    password?: string;
    code?: string;
    backup_code?: string;
    webauthn?: { token: string; response: unknown };
  };
  const whole = body<Fields & { step_up?: Fields }>(c);
  // `step_up` wins: where the route has its own `password` (a new user's), only the object is the proof.
  const input: Fields = whole.step_up ?? (options.objectOnly ? {} : whole);
  maskCodes(c, ["code", "backup_code", "webauthn", "step_up"]);
  return {
    password: input.password,
    code: input.code,
    backupCode: input.backup_code,
    webauthn: input.webauthn,
  };
}

/** Replaces the named fields of the request body (as the audit row copies it) with a mask. */
export function maskCodes(c: RouteContext, fields: readonly string[]): void {
  const input = c.get("body") as Record<string, unknown> | undefined;
  if (!input || typeof input !== "object") return;
  const masked = { ...input };
  for (const field of fields) if (masked[field] !== undefined) masked[field] = "[REDACTED]";
  c.set("body", masked);
}
