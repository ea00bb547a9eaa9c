/**
 * Enforcers loaded on first use. An agent enforces the few types its node gets policies for, so a module
 * (with its catalogue, generated messages and parsers) is loaded only when its type is first synced; an
 * idle agent carries none of them. The engine reads some traits before it syncs a type (which lane, whether
 * a type without policies must still be synced to undo effects, whether users are told), so the registry
 * (registry.gen.ts, written by proto/policy_registries.ts from the modules themselves) carries them;
 * `tests/agent/enforcer_registry_test.ts` checks them against the loaded module.
 *
 * @module
 */

import type { Enforcer, ResidueHint } from "../sync/types.ts";
import { stateFilePath } from "./state_file.ts";
import { fileExists } from "../fs.ts";

/** What the engine needs to know about an enforcer before loading it. */
export interface EnforcerTraits {
  notifiesUsers: boolean;
  /** {@linkcode Enforcer.background}. */
  background?: boolean;
  /** {@linkcode Enforcer.residue}: set when the enforcer implements {@linkcode Enforcer.hasResidue}. */
  residue?: ResidueHint;
  /** {@linkcode Enforcer.companions}. */
  companions?: readonly string[];
}

/** An enforcer standing for the module `load` returns; see the module documentation. */
export interface LazyEnforcer extends Enforcer {
  /** Loads (once) and returns the real enforcer. */
  load(): Promise<Enforcer>;
  /** Whether loading the module has started (what an idle agent must not have done). */
  loaded(): boolean;
}

/** The enforcer of `type`: export `name` of the module `load` imports, loaded on first use. */
export function lazyEnforcer<K extends string>(
  type: string,
  load: () => Promise<{ [P in K]: Enforcer }>,
  name: K,
  traits: EnforcerTraits,
): LazyEnforcer {
  let loading: Promise<Enforcer> | undefined;
  let loadedEnforcer: Enforcer | undefined;
  const real = () =>
    loading ??= load().then((module) => {
      const enforcer = module[name];
      if (enforcer?.type !== type) {
        throw new Error(`the ${type} enforcer module exports type ${enforcer?.type}`);
      }
      loadedEnforcer = enforcer;
      return enforcer;
    }).catch((err) => {
      loading = undefined;
      throw err;
    });
  return {
    type,
    notifiesUsers: traits.notifiesUsers,
    background: traits.background,
    companions: traits.companions,
    load: real,
    loaded: () => loading !== undefined,
    residue: traits.residue,
    hasResidue: traits.residue === undefined ? undefined : async (io) => {
      const hint = traits.residue!;
      if (!loading && (hint === "when loaded" || !await fileExists(stateFilePath(io, hint.stateFile)))) {
        return false;
      }
      return (await (await real()).hasResidue?.(io)) ?? false;
    },
    sync: async (policies, io, context) => (await real()).sync(policies, io, context),
    // A type with policies has been synced, so loaded; one that is not loaded has nothing to watch yet.
    watches: (io) => loadedEnforcer?.watches?.(io) ?? [],
  };
}
