/**
 * The hub's snapshot cache: one snapshot per distinct node-group set, built once and shared by every stream
 * of that set, until a resync that touches one of its groups evicts it or it goes unused for the cache time.
 * A snapshot is built no lower than the newest revision whose notice has arrived, so it contains that change.
 */
import type { Db } from "../db/mod.ts";
import type { Logger } from "../core/log.ts";
import { buildSnapshot, type Snapshot } from "./snapshot.ts";

interface CacheEntry {
  groupIds: string[];
  /** Every revision up to this one is contained in the snapshot. */
  floor: number;
  promise: Promise<Snapshot>;
  createdAt: number;
}

/** The snapshots of one hub. */
export interface SnapshotCache {
  /** The snapshot of `groupIds` (cache key `groupKey`) containing at least `minRevision`. */
  get(groupKey: string, groupIds: string[], minRevision: number): Promise<Snapshot>;
  /** Drops the snapshots of the affected groups (all of them for `"all"`). */
  evict(affected: ReadonlySet<string> | "all"): void;
  /** Drops the snapshots older than the cache time. */
  expire(): void;
  /** Snapshots built so far. */
  builds(): number;
}

/**
 * Creates the cache. `latestRevision` is the newest revision whose notice this hub has seen; `cacheMs` how
 * long an unused snapshot stays.
 */
export function createSnapshotCache(
  db: Db,
  log: Logger,
  options: { cacheMs: number; latestRevision: () => number },
): SnapshotCache {
  const { cacheMs, latestRevision } = options;
  const cache = new Map<string, CacheEntry>();
  let snapshotBuilds = 0;

  function get(groupKey: string, groupIds: string[], minRevision: number): Promise<Snapshot> {
    const hit = cache.get(groupKey);
    if (hit && hit.floor >= minRevision) return hit.promise;
    // Every revision whose notice has arrived is committed, so a build starting now contains it.
    snapshotBuilds++;
    const entry: CacheEntry = {
      groupIds,
      floor: Math.max(minRevision, latestRevision()),
      promise: buildSnapshot(db, groupIds, log),
      createdAt: performance.now(),
    };
    cache.set(groupKey, entry);
    entry.promise.catch(() => {
      if (cache.get(groupKey) === entry) cache.delete(groupKey);
    });
    return entry.promise;
  }

  function evict(affected: ReadonlySet<string> | "all"): void {
    for (const [key, entry] of cache) {
      if (affected === "all" || entry.groupIds.some((g) => affected.has(g))) cache.delete(key);
    }
  }

  return {
    get,
    evict,
    expire() {
      const now = performance.now();
      for (const [key, entry] of cache) if (now - entry.createdAt > cacheMs) cache.delete(key);
    },
    builds: () => snapshotBuilds,
  };
}
