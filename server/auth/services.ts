/** What the identity routes and hooks share: context, token signer, login limiter and client-address resolver. */
import type { ServerContext } from "../context.ts";
import { type ClientIpResolver, createClientIpResolver } from "../core/client_ip.ts";
import { createSecretSealer, type SecretSealer } from "./mfa.ts";
import { createWindowLimiter, type WindowLimiter } from "./rate_limit.ts";
import { createStepUp, type StepUp } from "./step_up.ts";
import { relyingPartyOf } from "./webauthn.ts";
import { createTokenSigner, type TokenSigner } from "./tokens.ts";

/** Wrong current passwords allowed per account in a minute when changing one's own password. */
export const OWN_PASSWORD_LIMIT = { max: 10, windowSeconds: 60 } as const;

/** Shared identity state for one server process. */
export interface IdentityServices {
  ctx: ServerContext;
  signer: TokenSigner;
  /** Wrong current passwords when changing one's own (per account, in the database). */
  limiter: WindowLimiter;
  clientIp: ClientIpResolver;
  /** Seals TOTP secrets at rest. */
  sealer: SecretSealer;
  /** Fresh re-authentication before dangerous actions. */
  stepUp: StepUp;
}

/** Builds the shared state from the context (logs the JWT secret warning when it applies). */
export function createIdentityServices(ctx: ServerContext): IdentityServices {
  const sealer = createSecretSealer(ctx.totpKey, ctx.config.security.jwtSecret);
  return {
    ctx,
    signer: createTokenSigner(ctx.config.security.jwtSecret, ctx.log),
    limiter: createWindowLimiter(ctx.db, OWN_PASSWORD_LIMIT),
    clientIp: createClientIpResolver(ctx.config.server.trustedProxies),
    sealer,
    stepUp: createStepUp(ctx.db, sealer, {
      directory: ctx.config.ldap,
      relyingParty: relyingPartyOf(ctx.config),
    }),
  };
}
