/**
 * The contract between the sync engine and the enforcers: what a cached policy looks like,
 * what an enforcer may do on the node (through {@linkcode EnforcerIO} only), and what it
 * reports back.
 *
 * @module
 */

import type { Message } from "@bufbuild/protobuf";
import type { AgentConfig } from "../config.ts";
import type { RootFs } from "../fs.ts";
import type { Logger } from "../log.ts";
import type { Runner } from "../runner.ts";

/** Compliance outcome names, as in the spec (without the `COMPLIANCE_STATUS_` prefix). */
export type ComplianceStatusName = "COMPLIANT" | "NON_COMPLIANT" | "INAPPLICABLE" | "ERROR" | "UNKNOWN";

/** A `Policy.typed_content` member as the agent receives it: its protobuf-es name and encoded message. */
export interface EncodedTypedContent {
  /** e.g. `firefoxPolicy`. */
  case: string;
  value: Uint8Array;
}

/** A policy as the agent keeps it in its cache. */
export interface CachedPolicy {
  id: string;
  name: string;
  /** Wire name of the type, e.g. `Firefox`. */
  type: string;
  version: number;
  /** Highest priority of the enabled bindings that reach this node; higher wins. */
  priority: number;
  /** Stored protojson content (untrusted). */
  content: string;
  /**
   * The server's parse of `content` (untrusted); undefined when the server could not parse it. From the
   * stream it is the `Policy.typed_content` member as received (its name and encoded message), decoded
   * by the type's enforcer (agent/sync/content.ts); a decoded message is accepted too.
   */
  typed?: Message | EncodedTypedContent;
}

/** Result of one item (setting, rule, key) of a policy. */
export interface ItemResult {
  /** Group of the item, e.g. `policies.json` or a GSettings schema id. */
  schemaId: string;
  key: string;
  status: ComplianceStatusName;
  message: string;
}

/** What one policy achieved on the node. */
export interface PolicyResult {
  policyId: string;
  status: ComplianceStatusName;
  message: string;
  items: ItemResult[];
}

/** What an enforcer reports after syncing all policies of its type. */
export interface SyncResult {
  /** One entry per policy passed in (the engine fills in missing ones as ERROR). */
  policies: PolicyResult[];
  /** Node paths whose content changed on disk during this sync. */
  changed: string[];
}

/** Options of {@linkcode EnforcerIO.writeManaged}. */
export interface ManagedWriteOptions {
  /** File mode; default 0o644. */
  mode?: number;
  /**
   * Recognises content svc wrote earlier (a managed-by marker) when the state file does not
   * know the file, so it is not backed up as an "original".
   */
  isOwnContent?: (text: string) => boolean;
}

/**
 * Everything an enforcer may touch. Paths are node paths, resolved under `agent.root_dir`.
 * Enforcers never talk to the network.
 */
export interface EnforcerIO {
  readonly fs: RootFs;
  readonly runner: Runner;
  readonly logger: Logger;
  readonly config: AgentConfig;
  /** Node paths this type currently manages, sorted. */
  managedPaths(): string[];
  /**
   * Writes a rendered file atomically. Before the first write to a path the original file (if
   * any, and not svc's own) is backed up so it can be restored. Own writes are announced to
   * the tamper watcher. Resolves true when the content on disk changed.
   */
  writeManaged(path: string, content: string, options?: ManagedWriteOptions): Promise<boolean>;
  /**
   * Stops managing a file: the original is put back, or the file removed when there was none.
   * Resolves true when the disk changed.
   */
  releaseManaged(path: string): Promise<boolean>;
}

/** See {@linkcode Enforcer.residue}. */
export type ResidueHint = "when loaded" | { readonly stateFile: string };

/** What a sync gets besides its own type's policies. */
export interface SyncContext {
  /**
   * The cached policies of the types in {@linkcode Enforcer.companions}, sorted like the type's own (priority
   * descending, then id).
   */
  companions: CachedPolicy[];
}

/** Enforces every policy of one type; see `agent/enforcers/`. */
export interface Enforcer {
  /** Wire name of the type. */
  readonly type: string;
  /** Whether users should be told (restart the application, log in again) after a change. */
  readonly notifiesUsers: boolean;
  /**
   * Set when a sync can take long (downloads, package operations): the engine runs this type in
   * its own serialized background lane, so neither the stream nor the other types wait for it.
   */
  readonly background?: boolean;
  /**
   * Whether the type left effects on the node that are not managed files (remotes, installed
   * software, timers), so the engine syncs it with no policies to undo them. Without it a type
   * with no policy is synced only while it manages files.
   */
  hasResidue?(io: EnforcerIO): Promise<boolean>;
  /**
   * Set with {@linkcode hasResidue}: what the engine may learn before the type's module is loaded (it asks
   * every sync in which the type has no policies, so asking must not load it; agent/enforcers/lazy.ts).
   * `"when loaded"`: the residue lives only in a loaded module (a timer), so an unloaded type has none.
   * `{ stateFile }`: residue is possible only while `{data_dir}/state/{stateFile}` exists.
   */
  readonly residue?: ResidueHint;
  /**
   * Node paths whose appearance, change or disappearance can change what this type does on the node (where
   * its programs are installed, the schemas or accounts it reads), so the agent re-evaluates without a
   * server change (agent/sync/node_watch.ts). Asked only while the type has policies.
   */
  watches?(io: EnforcerIO): string[];
  /**
   * Other types whose settings this type writes into a file it owns, because the program reads that one file
   * only (Firefox's single policies.json carries the Certificates and Proxy types' keys too). The engine gives
   * their policies to {@linkcode Enforcer.sync} as `context.companions`, syncs this type whenever one exists,
   * and syncs it before those types, so that they read back what it wrote. It reports its own policies only.
   */
  readonly companions?: readonly string[];
  /**
   * Brings the node in line with `policies` (all cached policies of this type, sorted by
   * priority descending then id ascending; empty means "undo everything of this type"), then
   * reads the real state back and reports per policy.
   */
  sync(policies: CachedPolicy[], io: EnforcerIO, context?: SyncContext): Promise<SyncResult>;
}

const SEVERITY: Record<ComplianceStatusName, number> = {
  ERROR: 4,
  NON_COMPLIANT: 3,
  UNKNOWN: 2,
  COMPLIANT: 1,
  INAPPLICABLE: 0,
};

/**
 * Derives one status for a policy from its items: ERROR beats NON_COMPLIANT beats UNKNOWN beats
 * COMPLIANT; INAPPLICABLE only when every item is. No items → UNKNOWN.
 */
export function rollupStatus(items: readonly ItemResult[]): ComplianceStatusName {
  if (items.length === 0) return "UNKNOWN";
  let worst: ComplianceStatusName = "INAPPLICABLE";
  for (const item of items) if (SEVERITY[item.status] > SEVERITY[worst]) worst = item.status;
  return worst;
}

/**
 * The message of a policy whose items are not all in effect: how many of how many `noun`s are not, then the first
 * three, each as `label (why)`; `label` defaults to the item's key (GSettings-like items add their schema). With
 * none failing (the UNKNOWN rollup) it says how many are in effect and names the ones nobody could tell; with no
 * items at all, `0 of 0 <noun> in effect: nothing to enforce` (the policy names nothing this node can check).
 */
export function rollupMessage(
  items: readonly ItemResult[],
  noun: string,
  label: (item: ItemResult) => string = (i) => i.key,
): string {
  const named = (list: readonly ItemResult[]) =>
    list.slice(0, 3).map((i) => `${label(i)} (${i.message})`).join("; ");
  const bad = items.filter((i) => i.status === "ERROR" || i.status === "NON_COMPLIANT");
  if (bad.length) return `${bad.length} of ${items.length} ${noun} not in effect: ${named(bad)}`;
  if (items.length === 0) return `0 of 0 ${noun} in effect: nothing to enforce`;
  const ok = items.filter((i) => i.status === "COMPLIANT").length;
  const unknown = items.filter((i) => i.status === "UNKNOWN");
  return `${ok} of ${items.length} ${noun} in effect` +
    (unknown.length ? `; not known: ${named(unknown)}` : "");
}

/** Sorts policies the one way every enforcer sees them: priority descending, then id ascending. */
export function sortPolicies(policies: readonly CachedPolicy[]): CachedPolicy[] {
  return [...policies].sort((a, b) => b.priority - a.priority || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
