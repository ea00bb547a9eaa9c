/**
 * One enforcer body for every browser type (Firefox, Thunderbird, Chrome/Chromium, Edge). A browser family
 * says where its browsers are installed and what file each installed browser reads (a
 * {@linkcode BrowserTarget}); this module does the rest the same way for all of them:
 *
 * 1. re-validates every policy with the shared registry (server data is untrusted) — a policy that fails
 *    is reported ERROR and never reaches the disk;
 * 2. merges the valid ones key by key ({@linkcode mergeKeys}: higher binding priority wins per top-level
 *    key, equal priority → the smaller policy id; additive keys per the type's catalogue);
 * 3. writes one file per installed target through `io.writeManaged` (atomic, original backed up) and
 *    releases files of targets that are gone;
 * 4. reads each file back and reports every policy against its own intended values: a key lost to a
 *    higher-priority policy is INAPPLICABLE naming it; a key the target leaves out on purpose is
 *    INAPPLICABLE with the reason; a key the browser will not use (another file overrides it, or this
 *    browser version does not know it) is NON_COMPLIANT with the reason.
 *
 * No browser installed → every policy INAPPLICABLE, nothing written; a browser installed later is enforced as soon
 * as it appears, because the family's install locations are watched (agent/sync/node_watch.ts).
 *
 * A browser reads one policy file per directory or installation, so the settings other types have for it (the
 * Certificates type's trusted CAs, the Proxy type's proxy) are written into the same file
 * ({@linkcode BrowserCompanion}): they merge with the type's own by priority like any policy's keys, and their
 * own types read them back from the file and report them.
 *
 * @module
 */

import { ADDITIONAL_KEY, type BrowserTypeDef } from "../../shared/policy_types/browser.ts";
import { messageJson } from "../../shared/policy_types/define.ts";
import { PolicyContentError } from "../../shared/policy_types/errors.ts";
import {
  type KeyedValues,
  type KeyMergeRule,
  mergeKeys,
  type MergeOptions,
  readBackItems,
} from "../sync/key_merge.ts";
import {
  type CachedPolicy,
  type Enforcer,
  type EnforcerIO,
  type ItemResult,
  type PolicyResult,
  rollupMessage,
  rollupStatus,
  type SyncContext,
  type SyncResult,
} from "../sync/types.ts";
import { parsePolicyContent } from "../sync/content.ts";

/** One file an installed browser reads. */
export interface BrowserTarget {
  /** Node path of the file svc writes. */
  path: string;
  /** The browser (build) reading it, for messages, e.g. `Chromium` or `Flatpak Firefox`. */
  product: string;
  /** File content for the merged keys. */
  render(keys: Record<string, unknown>): string;
  /** The keys in a file svc wrote, or what is wrong with it. */
  readBack(text: string): Record<string, unknown> | string;
  /** Whether a file's content is svc's own (not an original to back up). */
  isOwnContent(text: string): boolean;
  /** Why this target leaves a key out (reported INAPPLICABLE), or undefined to write it. */
  omitted?(key: string): string | undefined;
  /**
   * After the write: why the browser will not use some of the written keys, keyed by top-level key: a text
   * is reported NON_COMPLIANT (the browser ignores a key the administrator expects to work), `inapplicable`
   * INAPPLICABLE (the key is known to be inert in this browser version). `values` are the keys as written.
   */
  effective?(io: EnforcerIO, values: Record<string, unknown>): Promise<EffectiveReasons>;
}

/** What {@linkcode BrowserTarget.effective} found, keyed by top-level key. */
export type EffectiveReasons = Map<string, string | { inapplicable: string }>;

/** Another policy type's settings for a browser family, written into the family's own files. */
export interface BrowserCompanion {
  /** Wire name of the other type. */
  type: string;
  /**
   * The top-level keys its policies ask of the family's browsers, each attributed to the policy that gives it
   * (the merge ranks them by its priority). Policies that do not pass the type's checks give nothing: their own
   * enforcer reports them.
   */
  keyed(policies: readonly CachedPolicy[], io: EnforcerIO): Promise<KeyedValues[]>;
  /** Merge rules of keys the family's catalogue does not know (a list of certificates adds up). */
  rules?: Readonly<Record<string, KeyMergeRule>>;
}

/** What a browser family tells {@linkcode browserEnforcer}. */
export interface BrowserFamily {
  /** The shared policy type (wire name, parser, validator, merge rules). */
  def: BrowserTypeDef;
  /** Product name for messages, e.g. `Firefox`. */
  product: string;
  /** Identity of items of additive lists (see {@linkcode MergeOptions.itemIdentity}). */
  itemIdentity?: MergeOptions["itemIdentity"];
  /** The targets of the installed browsers, and a description of what was looked for. */
  locate(io: EnforcerIO): Promise<{ targets: BrowserTarget[]; lookedFor: string }>;
  /**
   * Where the family's browsers appear when installed (deb, rpm, tarball, Flatpak): their appearance, upgrade
   * or removal makes the agent look again ({@linkcode Enforcer.watches}).
   */
  installLocations(io: EnforcerIO): string[];
  /** Other types whose settings go into the family's files. */
  companions?: readonly BrowserCompanion[];
}

/**
 * Turns a cached policy into its top-level policy keys, after re-running the shared parser (size, depth
 * and string limits) and validator on the untrusted server data. Typed fields win over an `additional`
 * entry of the same name (the validator already refuses such an entry).
 *
 * @throws {PolicyContentError} naming the problem.
 */
export function browserPolicyValues(def: BrowserTypeDef, policy: CachedPolicy): Record<string, unknown> {
  const message = parsePolicyContent(policy, def);
  const issues = def.validate(message);
  if (issues.length) {
    throw new PolicyContentError(
      issues.slice(0, 5).map((i) => (i.field ? `${i.field}: ${i.message}` : i.message)).join("; "),
    );
  }
  // deno-lint-ignore no-explicit-any -- as above
  const json = messageJson(def.schema as any, message as any) as Record<string, unknown>;
  const { additional, ...curated } = json;
  const values: Record<string, unknown> = {};
  if (additional && typeof additional === "object" && !Array.isArray(additional)) {
    Object.assign(values, additional);
  }
  Object.assign(values, curated);
  for (const key of Object.keys(values)) {
    if (!ADDITIONAL_KEY.test(key)) {
      throw new PolicyContentError(`policy key ${JSON.stringify(key)} is not a ${def.wireName} policy name`);
    }
  }
  if (Object.keys(values).length === 0) {
    throw new PolicyContentError(`the policy sets no ${def.wireName} setting`);
  }
  return values;
}

/** Whether anything exists at one of `paths` (node paths). */
export async function anyExists(io: EnforcerIO, paths: readonly string[]): Promise<boolean> {
  for (const path of paths) if (await io.fs.exists(path)) return true;
  return false;
}

/** The first of `paths` that exists, if any. */
export async function firstExisting(io: EnforcerIO, paths: readonly string[]): Promise<string | undefined> {
  for (const path of paths) if (await io.fs.exists(path)) return path;
  return undefined;
}

function summarize(items: ItemResult[], where: string): { status: PolicyResult["status"]; message: string } {
  const status = rollupStatus(items);
  const count = (s: string) => items.filter((i) => i.status === s).length;
  switch (status) {
    case "COMPLIANT": {
      const skipped = count("INAPPLICABLE");
      return {
        status,
        message: `${count("COMPLIANT")} setting(s) applied in ${where}` +
          (skipped
            ? `; ${skipped} not applicable (overridden by higher-priority policies or not for this browser)`
            : ""),
      };
    }
    case "INAPPLICABLE": {
      const reasons = [...new Set(items.map((i) => i.message))];
      return {
        status,
        message: reasons.length === 1
          ? `no setting applies: ${reasons[0]}`
          : `no setting applies: ${reasons.slice(0, 3).join("; ")}`,
      };
    }
    default:
      return {
        status,
        message: rollupMessage(items, "setting(s)"),
      };
  }
}

/** Builds the enforcer of a browser family; see the module documentation. */
export function browserEnforcer(family: BrowserFamily): Enforcer {
  const { def, product } = family;
  const companions = family.companions ?? [];
  const companionRules: Record<string, KeyMergeRule> = Object.assign(
    {},
    ...companions.map((c) => c.rules ?? {}),
  );
  const ruleOf = (key: string) => companionRules[key] ?? def.mergeRule(key);
  return {
    type: def.wireName,
    notifiesUsers: true,
    watches: (io) => family.installLocations(io),
    companions: companions.length ? companions.map((c) => c.type) : undefined,

    async sync(policies: CachedPolicy[], io: EnforcerIO, context?: SyncContext): Promise<SyncResult> {
      const changed: string[] = [];
      const results: PolicyResult[] = [];
      const valid: KeyedValues[] = [];
      for (const policy of policies) {
        try {
          valid.push({ policy, values: browserPolicyValues(def, policy) });
        } catch (err) {
          if (!(err instanceof PolicyContentError)) throw err;
          io.logger.warn(`${def.wireName} policy rejected by the agent`, {
            policy: policy.id,
            error: err.message,
          });
          results.push({
            policyId: policy.id,
            status: "ERROR",
            message: `policy content rejected by the agent: ${err.message}`,
            items: [],
          });
        }
      }

      const inputs = [...valid];
      for (const companion of companions) {
        const theirs = (context?.companions ?? []).filter((p) => p.type === companion.type);
        if (theirs.length) inputs.push(...await companion.keyed(theirs, io));
      }
      const { targets, lookedFor } = policies.length > 0 || inputs.length > 0
        ? await family.locate(io)
        : { targets: [], lookedFor: "" };
      const merge = inputs.length > 0
        ? mergeKeys(inputs, ruleOf, { itemIdentity: family.itemIdentity })
        : undefined;
      const planned = targets.map((target) => {
        const keys: Record<string, unknown> = {};
        for (const [key, value] of Object.entries(merge?.merged ?? {})) {
          if (!target.omitted?.(key)) keys[key] = value;
        }
        return { target, keys, write: Object.keys(keys).length > 0 };
      });

      const desired = new Set(planned.filter((p) => p.write).map((p) => p.target.path));
      for (const path of io.managedPaths()) {
        if (!desired.has(path) && await io.releaseManaged(path)) changed.push(path);
      }
      if (inputs.length === 0) return { policies: results, changed };
      if (targets.length === 0) {
        const message = `${product} is not installed (looked for ${lookedFor})`;
        for (const { policy } of valid) {
          results.push({ policyId: policy.id, status: "INAPPLICABLE", message, items: [] });
        }
        return { policies: results, changed };
      }

      const states = new Map<
        BrowserTarget,
        { actual: Record<string, unknown>; effective: EffectiveReasons } | string
      >();
      for (const { target, keys, write } of planned) {
        if (!write) {
          states.set(target, { actual: {}, effective: new Map() });
          continue;
        }
        try {
          if (
            await io.writeManaged(target.path, target.render(keys), {
              mode: 0o644,
              isOwnContent: target.isOwnContent,
            })
          ) {
            changed.push(target.path);
          }
        } catch (err) {
          io.logger.error(`cannot write ${product} policies`, { path: target.path, error: err });
          states.set(target, `cannot write: ${(err as Error).message}`);
          continue;
        }
        let text: string | undefined;
        try {
          text = await io.fs.readTextFile(target.path);
        } catch (err) {
          states.set(target, `cannot read: ${(err as Error).message}`);
          continue;
        }
        const actual = text === undefined ? "the file is missing after the write" : target.readBack(text);
        if (typeof actual === "string") {
          states.set(target, actual);
          continue;
        }
        let effective: EffectiveReasons = new Map();
        try {
          effective = await target.effective?.(io, keys) ?? effective;
        } catch (err) {
          io.logger.warn(`cannot check which ${product} policies are in effect`, {
            path: target.path,
            error: (err as Error).message,
          });
        }
        states.set(target, { actual, effective });
      }

      const where = targets.map((t) => t.path).join(" and ");
      for (const { policy } of valid) {
        const items: ItemResult[] = [];
        for (const target of targets) {
          const state = states.get(target)!;
          if (typeof state === "string") {
            items.push({ schemaId: target.path, key: "*", status: "ERROR", message: state });
            continue;
          }
          items.push(...readBackItems(merge!, policy, state.actual, target.path, {
            adjust: (path, item) => {
              const omitted = target.omitted?.(path[0]);
              if (omitted) return { ...item, status: "INAPPLICABLE", message: omitted };
              const reason = state.effective.get(path[0]);
              if (!reason || item.status !== "COMPLIANT") return item;
              return typeof reason === "string"
                ? { ...item, status: "NON_COMPLIANT", message: reason }
                : { ...item, status: "INAPPLICABLE", message: reason.inapplicable };
            },
          }));
        }
        results.push({ policyId: policy.id, ...summarize(items, where), items });
      }
      return { policies: results, changed };
    },
  };
}
