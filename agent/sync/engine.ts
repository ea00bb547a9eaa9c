/**
 * The sync engine: the policy cache, the snapshot staging set, and one serial queue of syncs.
 *
 * It implements the spec's "Agent handling of updates":
 *
 * 1. an empty snapshot empties the cache and syncs, so everything managed is removed;
 * 2. snapshot messages accumulate in staging; `snapshot_complete` swaps staging into the cache
 *    and syncs; staging is reset on every (re)connect ({@linkcode SyncEngine.resetStaging}), so a
 *    snapshot cut off mid-way never leaks into the next one;
 * 3. CREATED/UPDATED set the entry, DELETED removes it, and each syncs;
 * 4. every sync recomputes from the whole cache, type by type, then reports compliance for
 *    every cached policy; a type that writes other types' settings into its own files (Firefox's one
 *    policies file carries the Certificates and Proxy settings) also gets their policies and runs before them;
 * 5. a type without enforcer is reported NON_COMPLIANT "unsupported policy type <T>";
 * 6. syncs run in the background, one at a time; requests made while one runs coalesce into
 *    one follow-up run over the latest cache, so the stream is never blocked; a type whose
 *    enforcer declares `background` (downloads, package operations) runs in its own serialized
 *    lane, so the other types do not wait for it either (its policies are reported UNKNOWN
 *    "in progress" until their first run ends; managed-file writes of all lanes are serialized);
 * 7. a policy missing from the next snapshot is gone from the cache, and its type's enforcer
 *    undoes its effects.
 *
 * A type with no cached policy and no managed file is not touched at all. Nothing is synced
 * before the first complete snapshot: until then the cache is unknown, not empty, and a sync
 * would undo every managed file of the previous run.
 *
 * @module
 */

import type { AgentConfig } from "../config.ts";
import type { RootFs } from "../fs.ts";
import type { Logger } from "../log.ts";
import type { Runner } from "../runner.ts";
import type { ManagedFiles } from "./managed_files.ts";
import {
  type CachedPolicy,
  type Enforcer,
  type EnforcerIO,
  type PolicyResult,
  sortPolicies,
  type SyncContext,
} from "./types.ts";

/** A stream event as the engine sees it (decoded from the wire by `agent/stream.ts`). */
export interface PolicyEvent {
  kind: "SNAPSHOT" | "CREATED" | "UPDATED" | "DELETED";
  /** Absent for an empty snapshot. DELETED needs at least `id`. */
  policy?: CachedPolicy;
  snapshotComplete: boolean;
}

/** What one sync run did, for the tamper watcher and notifications. */
export interface SyncSummary {
  /** Node paths whose content changed, per type. */
  changed: Map<string, string[]>;
  /** Every managed node path after the run, with its type. */
  managed: { path: string; type: string }[];
  /** Results per cached policy. */
  results: { policy: CachedPolicy; result: PolicyResult }[];
  /** Milliseconds from the start of the run to the end of enforcement. */
  durationMs?: number;
}

/** Options of {@linkcode SyncEngine}. */
export interface SyncEngineOptions {
  fs: RootFs;
  runner: Runner;
  logger: Logger;
  config: AgentConfig;
  managed: ManagedFiles;
  /** Enforcers keyed by wire name. */
  enforcers: ReadonlyMap<string, Enforcer>;
  /** Sends one compliance report; failures are logged by the engine and do not stop others. */
  reportCompliance: (policy: CachedPolicy, result: PolicyResult) => Promise<void>;
  /** Called with a node path just before ("start") and just after ("end") the engine writes it. */
  onOwnWrite?: (path: string, phase: "start" | "end") => void | Promise<void>;
  /** Called with the whole cache (sorted by id) each time a stream event changed it; not for {@linkcode SyncEngine.restore}. */
  onCacheChanged?: (policies: CachedPolicy[]) => void;
  /** Called after the enforcers ran and before compliance is reported. */
  onSynced?: (summary: SyncSummary) => void | Promise<void>;
}

/** Work to do inside a sync run, between enforcement and the compliance reports. */
export type AfterEnforceHook = (summary: SyncSummary) => Promise<void>;

/** The serialized lane of one background type. */
interface BackgroundLane {
  running?: Promise<void>;
  /** Policies of the next run; a newer request replaces them. */
  next?: CachedPolicy[];
  /** `id@version` of the policies whose last run finished (no "in progress" report again). */
  finished: Set<string>;
}

interface PendingRun {
  hooks: AfterEnforceHook[];
  waiters: (() => void)[];
}

/** See the module documentation. */
export class SyncEngine {
  readonly #options: SyncEngineOptions;
  #cache = new Map<string, CachedPolicy>();
  #staging = new Map<string, CachedPolicy>();
  #pending: PendingRun | undefined;
  #running: Promise<void> | undefined;
  #ready = false;
  readonly #lanes = new Map<string, BackgroundLane>();
  #fileLock: Promise<unknown> = Promise.resolve();

  constructor(options: SyncEngineOptions) {
    this.#options = options;
  }

  /** The cached policies, sorted by id. */
  cached(): CachedPolicy[] {
    return [...this.#cache.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
  }

  /** Drops a partly received snapshot; call on every (re)connect. */
  resetStaging(): void {
    this.#staging = new Map();
  }

  /**
   * Applies one stream event to staging or the cache, and queues a sync when the cache
   * changed. Never waits for the sync.
   */
  handleEvent(event: PolicyEvent): void {
    const { logger } = this.#options;
    switch (event.kind) {
      case "SNAPSHOT":
        if (event.policy) this.#staging.set(event.policy.id, event.policy);
        if (event.snapshotComplete) {
          this.#cache = this.#staging;
          this.#staging = new Map();
          this.#ready = true;
          logger.debug("snapshot complete", { policies: this.#cache.size });
          this.#options.onCacheChanged?.(this.cached());
          void this.requestSync();
        }
        return;
      case "CREATED":
      case "UPDATED":
        if (!event.policy) return logger.warn(`${event.kind} event without a policy ignored`);
        this.#cache.set(event.policy.id, event.policy);
        this.#options.onCacheChanged?.(this.cached());
        void this.requestSync();
        return;
      case "DELETED":
        if (!event.policy || !this.#cache.delete(event.policy.id)) {
          return logger.debug("DELETED event for a policy not in the cache", { id: event.policy?.id });
        }
        this.#options.onCacheChanged?.(this.cached());
        void this.requestSync();
        return;
    }
  }

  /** Whether a complete snapshot has been received (syncs run only from then on). */
  get ready(): boolean {
    return this.#ready;
  }

  /**
   * Starts from a policy set received in an earlier run (the persisted cache, agent/sync/policy_store.ts), as
   * a complete snapshot would: the agent enforces and watches it before the server answers, and never lifts
   * what it enforces because the server is away. A snapshot received later replaces it. Does nothing once a
   * snapshot has arrived.
   */
  restore(policies: readonly CachedPolicy[]): void {
    if (this.#ready) return;
    this.#cache = new Map(policies.map((p) => [p.id, p]));
    this.#ready = true;
    void this.requestSync();
  }

  /**
   * Node paths whose change can change what the types with cached policies do ({@linkcode Enforcer.watches}),
   * sorted.
   */
  watchTargets(): string[] {
    const types = new Set([...this.#cache.values()].map((p) => p.type));
    const paths = new Set<string>();
    for (const type of types) {
      const enforcer = this.#options.enforcers.get(type);
      try {
        for (const path of enforcer?.watches?.(this.#io(type)) ?? []) paths.add(path);
      } catch (err) {
        this.#options.logger.warn("cannot tell what to watch for a type", { type, error: err });
      }
    }
    return [...paths].sort();
  }

  /**
   * Queues a sync over the latest cache. Requests made while a sync runs coalesce into one
   * follow-up run; before the first complete snapshot they wait for it. `hook` runs inside
   * that run after enforcement and before the compliance reports. Resolves when the run has
   * finished.
   */
  requestSync(hook?: AfterEnforceHook): Promise<void> {
    this.#pending ??= { hooks: [], waiters: [] };
    if (hook) this.#pending.hooks.push(hook);
    const done = new Promise<void>((resolve) => this.#pending!.waiters.push(resolve));
    if (this.#ready) this.#running ??= this.#drain();
    return done;
  }

  /** Resolves when no sync is running or queued (queued before readiness does not count). */
  async idle(): Promise<void> {
    for (;;) {
      const lane = [...this.#lanes.values()].find((l) => l.running);
      if (this.#running) await this.#running;
      else if (lane) await lane.running;
      else return;
    }
  }

  async #drain(): Promise<void> {
    try {
      while (this.#pending) {
        const run = this.#pending;
        this.#pending = undefined;
        try {
          await this.#runOnce(run.hooks);
        } catch (err) {
          this.#options.logger.error("sync failed", { error: err });
        }
        for (const wake of run.waiters) wake();
      }
    } finally {
      this.#running = undefined;
    }
  }

  async #runOnce(hooks: AfterEnforceHook[]): Promise<void> {
    const runStarted = performance.now();
    const { managed, enforcers, logger } = this.#options;
    const byType = new Map<string, CachedPolicy[]>();
    for (const policy of this.#cache.values()) {
      const list = byType.get(policy.type) ?? [];
      list.push(policy);
      byType.set(policy.type, list);
    }
    const residue: string[] = [];
    for (const [type, enforcer] of enforcers) {
      if (!byType.has(type) && enforcer.hasResidue && await enforcer.hasResidue(this.#io(type))) {
        residue.push(type);
      }
    }
    // A type that writes other types' settings into its files runs whenever one of them has policies, and
    // before them, so they read back what it wrote (Enforcer.companions).
    const hosts: string[] = [];
    const companionTypes = new Set<string>();
    for (const [type, enforcer] of enforcers) {
      for (const companion of enforcer.companions ?? []) companionTypes.add(companion);
      if (enforcer.companions?.some((t) => byType.has(t))) hosts.push(type);
    }
    const types = [...new Set([...byType.keys(), ...managed.types(), ...residue, ...hosts])].sort((a, b) =>
      Number(companionTypes.has(a)) - Number(companionTypes.has(b)) || (a < b ? -1 : a > b ? 1 : 0)
    );
    const summary: SyncSummary = { changed: new Map(), managed: [], results: [] };
    for (const type of types) {
      const policies = sortPolicies(byType.get(type) ?? []);
      const enforcer = enforcers.get(type);
      if (!enforcer) {
        if (policies.length === 0) {
          logger.warn("files of a policy type this agent does not handle are left alone", { type });
        }
        for (const policy of policies) {
          summary.results.push({
            policy,
            result: {
              policyId: policy.id,
              status: "NON_COMPLIANT",
              message: `unsupported policy type ${type}`,
              items: [],
            },
          });
        }
        continue;
      }
      if (enforcer.background) {
        this.#queueBackground(enforcer, policies);
        continue;
      }
      const started = performance.now();
      const results = await this.#syncType(enforcer, type, policies, summary, () => ({
        companions: sortPolicies((enforcer.companions ?? []).flatMap((t) => byType.get(t) ?? [])),
      }));
      logger.debug("type synced", {
        type,
        policies: policies.length,
        ms: Math.round(performance.now() - started),
      });
      const byId = new Map(results.map((r) => [r.policyId, r]));
      for (const policy of policies) {
        const result = byId.get(policy.id) ?? {
          policyId: policy.id,
          status: "ERROR",
          message: `the ${type} enforcer reported nothing for this policy`,
          items: [],
        };
        summary.results.push({ policy, result });
      }
    }
    summary.managed = managed.list().map((r) => ({ path: r.path, type: r.type }));
    summary.durationMs = Math.round(performance.now() - runStarted);
    await this.#options.onSynced?.(summary);
    for (const hook of hooks) {
      try {
        await hook(summary);
      } catch (err) {
        logger.error("post-sync step failed", { error: err });
      }
    }
    // A policy replaced while this run enforced it (a newer snapshot or update) is reported by the
    // follow-up run; a report of the superseded one would only be overwritten, or resurrect a deleted one.
    const current = summary.results.filter(({ policy }) => this.#cache.get(policy.id) === policy);
    await Promise.all(current.map(async ({ policy, result }) => {
      try {
        await this.#options.reportCompliance(policy, result);
      } catch (err) {
        logger.warn("compliance report failed", { policy: policy.id, error: err });
      }
    }));
  }

  /** Queues a run of a background type over `policies`; a queued, not yet started run is replaced. */
  #queueBackground(enforcer: Enforcer, policies: CachedPolicy[]): void {
    let lane = this.#lanes.get(enforcer.type);
    if (!lane) this.#lanes.set(enforcer.type, lane = { finished: new Set() });
    lane.next = policies;
    lane.running ??= this.#drainLane(enforcer, lane);
  }

  async #drainLane(enforcer: Enforcer, lane: BackgroundLane): Promise<void> {
    const { logger, managed, reportCompliance, onSynced } = this.#options;
    const type = enforcer.type;
    const report = (policy: CachedPolicy, result: PolicyResult) =>
      reportCompliance(policy, result).catch((err) =>
        logger.warn("compliance report failed", { policy: policy.id, error: err })
      );
    try {
      while (lane.next) {
        const policies = lane.next;
        lane.next = undefined;
        await Promise.all(
          policies.filter((p) => !lane.finished.has(`${p.id}@${p.version}`)).map((policy) =>
            report(policy, {
              policyId: policy.id,
              status: "UNKNOWN",
              message: `${type} sync in progress in the background`,
              items: [],
            })
          ),
        );
        const summary: SyncSummary = { changed: new Map(), managed: [], results: [] };
        const results = await this.#syncType(enforcer, type, policies, summary);
        const byId = new Map(results.map((r) => [r.policyId, r]));
        for (const policy of policies) {
          summary.results.push({
            policy,
            result: byId.get(policy.id) ?? {
              policyId: policy.id,
              status: "ERROR",
              message: `the ${type} enforcer reported nothing for this policy`,
              items: [],
            },
          });
        }
        summary.managed = managed.list().map((r) => ({ path: r.path, type: r.type }));
        try {
          await onSynced?.(summary);
        } catch (err) {
          logger.error("post-sync step failed", { type, error: err });
        }
        if (lane.next) continue;
        lane.finished = new Set(policies.map((p) => `${p.id}@${p.version}`));
        await Promise.all(summary.results.map(({ policy, result }) => report(policy, result)));
      }
    } finally {
      lane.running = undefined;
    }
  }

  /** {@linkcode SyncEngine.#io} whose managed-file writes never overlap those of another lane. */
  /**
   * Runs one enforcer over its policies (foreground pass or background lane alike), recording what it changed
   * in `summary`. A throwing enforcer turns into an ERROR result for each of its policies, so one broken type
   * never stops the others. `context` is built inside the guard for the same reason.
   */
  async #syncType(
    enforcer: Enforcer,
    type: string,
    policies: CachedPolicy[],
    summary: SyncSummary,
    context?: () => SyncContext,
  ): Promise<PolicyResult[]> {
    try {
      const outcome = context
        ? await enforcer.sync(policies, this.#lockedIo(type), context())
        : await enforcer.sync(policies, this.#lockedIo(type));
      if (outcome.changed.length) summary.changed.set(type, [...outcome.changed]);
      return outcome.policies;
    } catch (err) {
      this.#options.logger.error("enforcer failed", { type, error: err });
      return policies.map((p) => ({
        policyId: p.id,
        status: "ERROR",
        message: `${type} sync failed: ${(err as Error).message}`,
        items: [],
      }));
    }
  }

  #lockedIo(type: string): EnforcerIO {
    const io = this.#io(type);
    const exclusive = <T>(work: () => Promise<T>): Promise<T> => {
      const run = this.#fileLock.then(work, work);
      this.#fileLock = run.catch(() => {});
      return run;
    };
    return {
      ...io,
      managedPaths: () => io.managedPaths(),
      writeManaged: (path, content, options) => exclusive(() => io.writeManaged(path, content, options)),
      releaseManaged: (path) => exclusive(() => io.releaseManaged(path)),
    };
  }

  #io(type: string): EnforcerIO {
    const { fs, runner, logger, config, managed, onOwnWrite } = this.#options;
    return {
      fs,
      runner,
      logger,
      config,
      managedPaths: () => managed.list(type).map((r) => r.path),
      writeManaged: async (path, content, options = {}) => {
        await onOwnWrite?.(path, "start");
        try {
          return await managed.write(fs, { path, type, content, ...options });
        } finally {
          await onOwnWrite?.(path, "end");
        }
      },
      releaseManaged: async (path) => {
        await onOwnWrite?.(path, "start");
        try {
          return await managed.release(fs, path);
        } finally {
          await onOwnWrite?.(path, "end");
        }
      },
    };
  }
}
