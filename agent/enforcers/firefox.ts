/**
 * Firefox enforcer: renders every Firefox policy of the node into Firefox's enterprise
 * `policies.json` (system file `/etc/firefox/policies/policies.json`, read by distribution
 * builds; plus the Flatpak extension file when Flatpak Firefox is installed), merges several
 * policies key by key, and reads the file back for compliance.
 *
 * Merge (deterministic, independent of arrival order): higher binding priority wins per
 * top-level key; equal priority → the policy with the smaller id wins. Lists are replaced,
 * except the documented additive keys below, whose entries are combined:
 *
 * - `ExtensionSettings`, `Preferences`: per extension id / preference name, highest wins;
 * - `Extensions`, `WebsiteFilter`, `Certificates`: their lists (`Install`, `Block`, …) are
 *   unioned without duplicates, other members per highest priority;
 * - `Bookmarks`: the bookmark lists are unioned without duplicates.
 *
 * Managed-by marker: Firefox reads only the `policies` member of the file
 * (`const { policies } = JSON.parse(data)` in EnterprisePoliciesParent's JSON provider) and
 * validates the policy names inside it against its schema, so an unknown key *inside*
 * `policies` is reported as an error, while a sibling of `policies` is never looked at. The
 * marker therefore sits next to `policies`, as {@linkcode FIREFOX_MARKER_KEY}. svc also records
 * the SHA-256 of what it wrote in its state file, so an edited copy is still recognised.
 *
 * @module
 */

import { getPolicyType } from "../../shared/policy_types/mod.ts";
import { PolicyContentError } from "../../shared/policy_types/errors.ts";
import { messageJson } from "../../shared/policy_types/define.ts";
import { type FirefoxPolicy, FirefoxPolicySchema } from "../../shared/gen/svc/policy/v1/firefox_pb.ts";
import { flatpakArch } from "../config.ts";
import { type KeyedValues, type KeyMergeRule, mergeKeys, readBackItems } from "../sync/key_merge.ts";
import {
  type CachedPolicy,
  type Enforcer,
  type EnforcerIO,
  type ItemResult,
  type PolicyResult,
  rollupStatus,
  type SyncResult,
} from "../sync/types.ts";

/** Wire name of the type. */
export const FIREFOX_TYPE = "Firefox";

/** Top-level key of svc's `policies.json` that marks the file as managed (Firefox ignores it). */
export const FIREFOX_MARKER_KEY = "svc_managed";

const MARKER_TEXT = "This file is managed by svc (svc-agent). Local changes are overwritten; " +
  "ask your administrator to change the Firefox policy instead.";

/** Where a system Firefox lives (node paths); any one present means "installed". */
export const FIREFOX_INSTALL_PATHS: readonly string[] = [
  "/usr/lib/firefox",
  "/usr/lib/firefox-esr",
  "/usr/lib64/firefox",
  "/opt/firefox",
  "/usr/bin/firefox",
];

/** The Flatpak Firefox application directory (node path). */
export const FIREFOX_FLATPAK_APP = "/var/lib/flatpak/app/org.mozilla.firefox";

const RULES: Record<string, KeyMergeRule> = {
  ExtensionSettings: "per-entry",
  Preferences: "per-entry",
  Extensions: "per-member-union",
  WebsiteFilter: "per-member-union",
  Certificates: "per-member-union",
  Bookmarks: "union",
};

/** The merge rule of a Firefox top-level key (see the module documentation). */
export function firefoxKeyRule(key: string): KeyMergeRule {
  return RULES[key] ?? "replace";
}

/** A top-level Firefox policy name: what Firefox's schema can know, nothing else. */
const POLICY_KEY_RE = /^[A-Za-z][A-Za-z0-9_]{0,127}$/;

/**
 * Turns a cached policy into its Firefox policy keys, after re-running the shared parser
 * (size, depth and string limits) and validators on the untrusted server data.
 *
 * @throws {PolicyContentError} naming the problem.
 */
export function firefoxPolicyValues(policy: CachedPolicy): Record<string, unknown> {
  const def = getPolicyType(FIREFOX_TYPE);
  if (!def) throw new PolicyContentError("the Firefox policy type is not registered");
  // The typed message is the server's parse; round-trip it through the guarded parser anyway.
  const text = policy.typed
    ? JSON.stringify(messageJson(FirefoxPolicySchema, policy.typed as FirefoxPolicy))
    : policy.content;
  const message = def.parse(text, { ignoreUnknownFields: true }) as FirefoxPolicy;
  const issues = def.validate(message);
  if (issues.length) {
    throw new PolicyContentError(
      issues.slice(0, 5).map((i) => (i.field ? `${i.field}: ${i.message}` : i.message)).join("; "),
    );
  }
  const json = messageJson(FirefoxPolicySchema, message) as Record<string, unknown>;
  const { additional, ...typed } = json;
  const values: Record<string, unknown> = {};
  if (additional && typeof additional === "object" && !Array.isArray(additional)) {
    for (const [key, value] of Object.entries(additional as Record<string, unknown>)) values[key] = value;
  }
  // Typed fields win over an `additional` entry of the same name.
  Object.assign(values, typed);
  for (const key of Object.keys(values)) {
    if (!POLICY_KEY_RE.test(key)) {
      throw new PolicyContentError(`policy key ${JSON.stringify(key)} is not a Firefox policy name`);
    }
  }
  if (Object.keys(values).length === 0) throw new PolicyContentError("the policy sets no Firefox setting");
  return values;
}

/** Renders the merged `policies` object into the file svc writes. */
export function renderFirefoxPolicies(policies: Record<string, unknown>): string {
  return `${JSON.stringify({ [FIREFOX_MARKER_KEY]: MARKER_TEXT, policies }, null, 2)}\n`;
}

/** Whether a `policies.json` text is svc's own (carries the marker). */
export function isSvcFirefoxFile(text: string): boolean {
  try {
    const parsed = JSON.parse(text);
    return parsed !== null && typeof parsed === "object" && Object.hasOwn(parsed, FIREFOX_MARKER_KEY);
  } catch {
    return false;
  }
}

async function anyExists(io: EnforcerIO, paths: readonly string[]): Promise<boolean> {
  for (const path of paths) if (await io.fs.exists(path)) return true;
  return false;
}

function summarize(
  items: ItemResult[],
  targetsNote: string,
): { status: PolicyResult["status"]; message: string } {
  const status = rollupStatus(items);
  const count = (s: string) => items.filter((i) => i.status === s).length;
  const bad = items.filter((i) => i.status === "NON_COMPLIANT" || i.status === "ERROR");
  switch (status) {
    case "COMPLIANT": {
      const overridden = count("INAPPLICABLE");
      return {
        status,
        message: `${count("COMPLIANT")} setting(s) applied in ${targetsNote}` +
          (overridden ? `; ${overridden} overridden by higher-priority policies` : ""),
      };
    }
    case "INAPPLICABLE":
      return { status, message: "every setting is overridden by higher-priority policies" };
    default:
      return {
        status,
        message: `${bad.length} of ${items.length} setting(s) not in effect: ` +
          bad.slice(0, 3).map((i) => `${i.key} (${i.message})`).join("; "),
      };
  }
}

/** The Firefox enforcer. */
export const firefoxEnforcer: Enforcer = {
  type: FIREFOX_TYPE,
  notifiesUsers: true,

  async sync(policies: CachedPolicy[], io: EnforcerIO): Promise<SyncResult> {
    const changed: string[] = [];
    const systemInstalled = await anyExists(io, FIREFOX_INSTALL_PATHS);
    const flatpakInstalled = await io.fs.exists(FIREFOX_FLATPAK_APP);
    const targets: string[] = [];
    if (systemInstalled) targets.push(io.config.firefox.policiesPath);
    if (flatpakInstalled) {
      targets.push(io.config.firefox.flatpakPoliciesPath.replaceAll("{arch}", flatpakArch()));
    }

    const results: PolicyResult[] = [];
    const valid: KeyedValues[] = [];
    for (const policy of policies) {
      try {
        valid.push({ policy, values: firefoxPolicyValues(policy) });
      } catch (err) {
        if (!(err instanceof PolicyContentError)) throw err;
        io.logger.warn("Firefox policy rejected by the agent", { policy: policy.id, error: err.message });
        results.push({
          policyId: policy.id,
          status: "ERROR",
          message: `policy content rejected by the agent: ${err.message}`,
          items: [],
        });
      }
    }

    const desired = valid.length > 0 ? targets : [];
    for (const path of io.managedPaths()) {
      if (!desired.includes(path) && await io.releaseManaged(path)) changed.push(path);
    }
    if (policies.length === 0) return { policies: results, changed };
    if (targets.length === 0) {
      const message = `Firefox is not installed (looked for ${FIREFOX_INSTALL_PATHS.join(", ")} and the ` +
        `Flatpak org.mozilla.firefox)`;
      for (const { policy } of valid) {
        results.push({ policyId: policy.id, status: "INAPPLICABLE", message, items: [] });
      }
      return { policies: results, changed };
    }
    if (valid.length === 0) return { policies: results, changed };

    const merge = mergeKeys(valid, firefoxKeyRule);
    const text = renderFirefoxPolicies(merge.merged);
    const writeErrors = new Map<string, string>();
    for (const target of targets) {
      try {
        if (await io.writeManaged(target, text, { mode: 0o644, isOwnContent: isSvcFirefoxFile })) {
          changed.push(target);
        }
      } catch (err) {
        io.logger.error("cannot write Firefox policies", { path: target, error: err });
        writeErrors.set(target, (err as Error).message);
      }
    }

    // Read back what is really on disk, per file.
    const actual = new Map<string, Record<string, unknown> | string>();
    for (const target of targets) {
      const written = await io.fs.readTextFile(target).catch((err) => {
        actual.set(target, `cannot read: ${(err as Error).message}`);
        return undefined;
      });
      if (actual.has(target)) continue;
      if (written === undefined) {
        actual.set(target, writeErrors.get(target) ?? "the file is missing");
        continue;
      }
      try {
        const parsed = JSON.parse(written);
        actual.set(
          target,
          parsed?.policies && typeof parsed.policies === "object" && !Array.isArray(parsed.policies)
            ? parsed.policies
            : 'the file has no "policies" object',
        );
      } catch {
        actual.set(target, "the file is not valid JSON");
      }
    }

    const targetsNote = targets.join(" and ");
    for (const { policy } of valid) {
      const items: ItemResult[] = [];
      for (const target of targets) {
        const state = actual.get(target)!;
        if (typeof state === "string") {
          items.push({ schemaId: target, key: "*", status: "ERROR", message: state });
        } else {
          items.push(...readBackItems(merge, policy, state, target));
        }
      }
      results.push({ policyId: policy.id, ...summarize(items, targetsNote), items });
    }
    return { policies: results, changed };
  },
};
