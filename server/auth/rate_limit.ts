/**
 * Login brute-force limiter: at most `maxFailures` failed attempts per client address and per account in a
 * sliding window; beyond that every attempt (even with the right password, so guessing cannot continue) is
 * answered 429 with Retry-After until the oldest failure leaves the window. State is per server process.
 */

/** Options of {@link createLoginLimiter}. */
export interface LoginLimiterOptions {
  maxFailures?: number;
  windowMs?: number;
  /** Clock (tests). */
  now?: () => number;
  /** Bound on tracked keys, so a flood of addresses cannot exhaust memory. */
  maxKeys?: number;
}

/** The limiter. Keys are opaque strings such as `ip:10.0.0.1` and `user:alice`. */
export interface LoginLimiter {
  /** Seconds to wait when any key is over the limit, else 0. */
  retryAfter(keys: readonly string[]): number;
  /** Counts a failed attempt against every key. */
  fail(keys: readonly string[]): void;
  /** Forgets the failures of a key (an account after a successful login). */
  reset(key: string): void;
}

/** Creates a limiter (defaults: 10 failures per 60 s). */
export function createLoginLimiter(options: LoginLimiterOptions = {}): LoginLimiter {
  const max = options.maxFailures ?? 10;
  const windowMs = options.windowMs ?? 60_000;
  const now = options.now ?? Date.now;
  const maxKeys = options.maxKeys ?? 100_000;
  const failures = new Map<string, number[]>();

  const recent = (key: string, at: number): number[] => {
    const list = failures.get(key);
    if (!list) return [];
    const kept = list.filter((t) => t > at - windowMs);
    if (kept.length === 0) failures.delete(key);
    else failures.set(key, kept);
    return kept;
  };
  const prune = (at: number) => {
    for (const key of failures.keys()) recent(key, at);
    // Still nearly full: drop the oldest entries (Map keeps insertion order), leaving room so the next
    // prune is far away and the cost stays amortised.
    for (const key of failures.keys()) {
      if (failures.size < maxKeys * 0.9) break;
      failures.delete(key);
    }
  };

  return {
    retryAfter(keys) {
      const at = now();
      let wait = 0;
      for (const key of keys) {
        const list = recent(key, at);
        if (list.length >= max) wait = Math.max(wait, list[list.length - max] + windowMs - at);
      }
      return wait > 0 ? Math.max(1, Math.ceil(wait / 1000)) : 0;
    },
    fail(keys) {
      const at = now();
      if (failures.size >= maxKeys) prune(at);
      for (const key of keys) {
        const list = recent(key, at);
        list.push(at);
        // Only the newest `max` failures decide anything; re-inserting moves the key to the young end, so
        // pruning evicts idle keys rather than an active attacker's.
        failures.delete(key);
        failures.set(key, list.slice(-max));
      }
    },
    reset(key) {
      failures.delete(key);
    },
  };
}
