/**
 * The enforcers this agent ships, keyed by policy type wire name. A type missing here is reported
 * NON_COMPLIANT "unsupported policy type" by the sync engine. The list is registry.gen.ts, written by
 * `deno task proto` (proto/policy_registries.ts) from every type whose enforcer module exists: a new type's
 * enforcer is found, not registered by hand. Each entry loads its module on first use of the type (lazy.ts).
 *
 * @module
 */

import type { Enforcer } from "../sync/types.ts";
import { lazyEnforcers } from "./registry.gen.ts";

export { lazyEnforcers };

/** Every enforcer of this build. */
export const ENFORCERS: readonly Enforcer[] = lazyEnforcers();

/** A fresh registry: wire name → enforcer. */
export function enforcerRegistry(enforcers: readonly Enforcer[] = ENFORCERS): Map<string, Enforcer> {
  return new Map(enforcers.map((e) => [e.type, e]));
}
