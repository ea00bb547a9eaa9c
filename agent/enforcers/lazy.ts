/**
 * Enforcers loaded on first use. An agent enforces the few types its node gets policies for, so a module
 * (with its catalogue, generated messages and parsers) is loaded only when its type is first synced; an
 * idle agent carries none of them. The engine reads some traits before it syncs a type (which lane, whether
 * a type without policies must still be synced to undo effects, whether users are told), so the registry
 * line declares them; `tests/agent/enforcer_registry_test.ts` checks them against the loaded module.
 *
 * @module
 */

import type { Enforcer } from "../sync/types.ts";

/** What the engine needs to know about an enforcer before loading it. */
export interface EnforcerTraits {
  notifiesUsers: boolean;
  /** {@linkcode Enforcer.background}. */
  background?: boolean;
  /** Whether the enforcer implements {@linkcode Enforcer.hasResidue}. */
  residue?: boolean;
}

/** An enforcer standing for the module `load` returns; see the module documentation. */
export interface LazyEnforcer extends Enforcer {
  /** Loads (once) and returns the real enforcer. */
  load(): Promise<Enforcer>;
}

/** Traits of an enforcer that tells users and runs in the foreground lane. */
export const NOTIFIES: EnforcerTraits = { notifiesUsers: true };
/** Traits of an enforcer that tells nobody and runs in the foreground lane. */
export const QUIET: EnforcerTraits = { notifiesUsers: false };

/** The enforcer of `type`: export `name` of the module `load` imports, loaded on first use. */
export function lazyEnforcer<K extends string>(
  type: string,
  load: () => Promise<{ [P in K]: Enforcer }>,
  name: K,
  traits: EnforcerTraits,
): LazyEnforcer {
  let loading: Promise<Enforcer> | undefined;
  const real = () =>
    loading ??= load().then((module) => {
      const enforcer = module[name];
      if (enforcer?.type !== type) {
        throw new Error(`the ${type} enforcer module exports type ${enforcer?.type}`);
      }
      return enforcer;
    }).catch((err) => {
      loading = undefined;
      throw err;
    });
  return {
    type,
    notifiesUsers: traits.notifiesUsers,
    background: traits.background,
    load: real,
    hasResidue: traits.residue ? async (io) => (await (await real()).hasResidue?.(io)) ?? false : undefined,
    sync: async (policies, io) => (await real()).sync(policies, io),
  };
}
