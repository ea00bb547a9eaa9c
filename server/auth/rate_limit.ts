/**
 * Brute-force protection for passwords.
 *
 * {@link createLoginThrottle} guards `POST /api/v1/auth/login`. Its counts live in the database (table
 * `login_throttle`), so every replica sees the same numbers, and it is built so that an attacker cannot turn
 * it against the account owner:
 * - per client address: after {@link LOGIN_THROTTLE}.address.free unsuccessful attempts, each further one
 *   must wait twice as long as the previous (progressive delay, capped), whatever account it names;
 * - per account and address: the same, with a smaller allowance, so one address cannot keep guessing one
 *   account;
 * - per account, from anywhere: past its limit the account is "under attack"; then only addresses that have
 *   no unsuccessful attempt for it in the window may try. A correct password from an address with no
 *   failures is never refused, so no amount of guessing from elsewhere locks the owner out.
 * Refused attempts (429 with Retry-After) are answered before the password is checked. An attempt counts
 * when it starts (so concurrent guesses cannot slip past the limit together) and is taken back when the
 * password was right.
 *
 * {@link createWindowLimiter} is a plainer counter on the same table: so many events per key per window. It
 * limits failed step-up re-authentications and own-password changes (behind a session, so no account can be
 * locked by strangers) and the anonymous passkey challenges per client address.
 */
import type { Db, Queryable } from "../db/db.ts";

/** Options of {@link createWindowLimiter}. */
export interface WindowLimiterOptions {
  /** Events (failures, or uses for {@link WindowLimiter.take}) a key may have in one window. */
  max: number;
  /** Length of a window in seconds (at most {@link LOGIN_THROTTLE}.windowSeconds: rows expire after that). */
  windowSeconds: number;
  /** Clock (tests). */
  now?: () => Date;
}

/**
 * A fixed-window counter per key, kept in the database like the login throttle (same table, so every replica
 * sees the same numbers). Keys are opaque strings such as `stepup-ip:10.0.0.1`; only their digests are
 * stored. A window starts at a key's first event after its previous window ended (for these rows
 * `last_attempt_at` holds that start), and a key that reached `max` waits until its window ends.
 *
 * Every method takes the connection to use, so a check can read inside the caller's transaction. A failure
 * counted while handling an audited request must outlive its rolled-back unit of work: count it with
 * `afterUnit` (server/db/db.ts).
 */
export interface WindowLimiter {
  /** Seconds to wait when any key is at its limit, else 0. */
  retryAfter(q: Queryable, keys: readonly string[]): Promise<number>;
  /** Counts an event (a failed attempt) against every key. */
  fail(q: Queryable, keys: readonly string[]): Promise<void>;
  /** Forgets a key (an account after a successful attempt). */
  reset(q: Queryable, key: string): Promise<void>;
  /**
   * Counts one use of `key` unless it is at its limit, atomically (concurrent callers cannot slip past the
   * limit together); 0 when counted, else the seconds to wait (refused uses are not counted).
   */
  take(q: Queryable, key: string): Promise<number>;
}

/** Creates a database-backed {@link WindowLimiter}. */
export function createWindowLimiter(db: Db, options: WindowLimiterOptions): WindowLimiter {
  const now = options.now ?? (() => new Date());
  const window = options.windowSeconds;
  const cleanupAfter = Math.max(window, LOGIN_THROTTLE.windowSeconds);
  let sinceCleanup = 0;
  const rowKey = (key: string) => digest(`window\0${key}`);
  const waitOf = (row: { attempts: number; last_attempt_at: Date } | undefined, at: Date): number => {
    if (!row || row.attempts < options.max) return 0;
    const ends = new Date(row.last_attempt_at).getTime() + window * 1000;
    return ends > at.getTime() ? Math.max(1, Math.ceil((ends - at.getTime()) / 1000)) : 0;
  };
  const read = async (q: Queryable, key: string) =>
    (await q.query<{ attempts: number; last_attempt_at: Date }>(
      "SELECT attempts, last_attempt_at FROM login_throttle WHERE scope = 'account' AND key = $1",
      [await rowKey(key)],
    ))[0];
  const cleanup = async () => {
    if (++sinceCleanup < 100) return;
    sinceCleanup = 0;
    await db.query(
      "DELETE FROM login_throttle WHERE last_attempt_at < now() - make_interval(secs => $1::int)",
      [cleanupAfter],
    ).catch(() => {});
  };
  // One statement per key: a new window (count 1, start now) when the last one ended, else one more. With
  // `full` the row is left alone (and not returned) when the key is at its limit in the current window.
  const ended = "login_throttle.last_attempt_at <= $2::timestamptz - make_interval(secs => $3::int)";
  const count = async (q: Queryable, key: string, at: Date, full: boolean) =>
    await q.query<{ attempts: number }>(
      `INSERT INTO login_throttle (scope, key, attempts, last_attempt_at) VALUES ('account', $1, 1, $2)
       ON CONFLICT (scope, key) DO UPDATE SET
         attempts = CASE WHEN ${ended} THEN 1 ELSE login_throttle.attempts + 1 END,
         last_attempt_at = CASE WHEN ${ended} THEN $2 ELSE login_throttle.last_attempt_at END
       ${full ? `WHERE login_throttle.attempts < $4 OR ${ended}` : ""}
       RETURNING attempts`,
      full ? [await rowKey(key), at, window, options.max] : [await rowKey(key), at, window],
    );
  return {
    async retryAfter(q, keys) {
      const at = now();
      let wait = 0;
      for (const key of keys) wait = Math.max(wait, waitOf(await read(q, key), at));
      return wait;
    },
    async fail(q, keys) {
      const at = now();
      for (const key of keys) await count(q, key, at, false);
      await cleanup();
    },
    async reset(q, key) {
      await q.query("DELETE FROM login_throttle WHERE scope = 'account' AND key = $1", [await rowKey(key)]);
    },
    async take(q, key) {
      const at = now();
      if ((await count(q, key, at, true)).length > 0) {
        await cleanup();
        return 0;
      }
      return Math.max(1, waitOf(await read(q, key), at));
    },
  };
}

/** Limits of one counted key: free attempts, then a delay doubling from `baseSeconds` up to `capSeconds`. */
export interface ThrottleLimit {
  /** Unsuccessful attempts allowed without delay in the window. */
  free: number;
  /** Delay after the first attempt over the allowance; doubles with each further attempt. */
  baseSeconds: number;
  /** Longest delay. */
  capSeconds: number;
}

/** Options of {@link createLoginThrottle}. */
export interface LoginThrottleOptions {
  /** All attempts from one address. */
  address: ThrottleLimit;
  /** One account from one address. */
  accountAddress: ThrottleLimit;
  /** Unsuccessful attempts on one account from anywhere before it counts as under attack. */
  accountUnderAttack: number;
  /** How long an unsuccessful attempt counts, in seconds (after the last one). */
  windowSeconds: number;
  /** Clock (tests). */
  now?: () => Date;
}

/**
 * Default login limits. An address gets 20 free unsuccessful attempts over all accounts, one account from
 * one address gets 5; after that each attempt must wait 30 s after the previous one, then 60 s, 120 s, … up
 * to 15 minutes (long enough to make guessing useless, short enough for someone who mistyped). 50
 * unsuccessful attempts on one account from anywhere mark it as under attack. Counts expire 15 minutes
 * after the last unsuccessful attempt of their key.
 */
export const LOGIN_THROTTLE: LoginThrottleOptions = {
  address: { free: 20, baseSeconds: 30, capSeconds: 900 },
  accountAddress: { free: 5, baseSeconds: 30, capSeconds: 900 },
  accountUnderAttack: 50,
  windowSeconds: 900,
};

/** The verdict on an attempt that is about to check a password. */
export type ThrottleVerdict =
  | {
    allowed: true; /** Call with the outcome once the password was checked. */
    settle(ok: boolean): Promise<void>;
  }
  | {
    allowed: false;
    retryAfterSeconds: number;
    reason: "address" | "account_address" | "account_under_attack";
  };

/** The login throttle. */
export interface LoginThrottle {
  /** Counts an attempt of `account` (any spelling; compared case-insensitively) from `address`, or refuses it. */
  attempt(account: string, address: string): Promise<ThrottleVerdict>;
}

type Scope = "address" | "account_address" | "account";

async function digest(text: string): Promise<string> {
  const bytes = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Seconds a key with `attempts` unsuccessful attempts must wait after its last one. */
function delaySeconds(attempts: number, limit: ThrottleLimit): number {
  if (attempts < limit.free) return 0;
  return Math.min(limit.capSeconds, limit.baseSeconds * 2 ** Math.min(30, attempts - limit.free));
}

/** Creates the database-backed login throttle (defaults: {@link LOGIN_THROTTLE}). */
export function createLoginThrottle(db: Db, options: Partial<LoginThrottleOptions> = {}): LoginThrottle {
  const o: LoginThrottleOptions = { ...LOGIN_THROTTLE, ...options };
  const now = o.now ?? (() => new Date());
  let sinceCleanup = 0;

  const load = async (tx: Queryable, keys: Record<Scope, string>, at: Date) => {
    // Insert-or-lock every row in a fixed order, so concurrent attempts on the same keys queue up here.
    const rows = await tx.query<{ scope: Scope; attempts: number; last_attempt_at: Date }>(
      `INSERT INTO login_throttle (scope, key, attempts, last_attempt_at)
       VALUES ('account', $1, 0, $4), ('account_address', $2, 0, $4), ('address', $3, 0, $4)
       ON CONFLICT (scope, key) DO UPDATE SET attempts = login_throttle.attempts
       RETURNING scope, attempts, last_attempt_at`,
      [keys.account, keys.account_address, keys.address, at],
    );
    const current = {} as Record<Scope, number>;
    const last = {} as Record<Scope, Date>;
    for (const row of rows) {
      const expired = at.getTime() - new Date(row.last_attempt_at).getTime() > o.windowSeconds * 1000;
      current[row.scope] = expired ? 0 : row.attempts;
      last[row.scope] = new Date(row.last_attempt_at);
    }
    return { current, last };
  };

  return {
    async attempt(account, address) {
      const keys: Record<Scope, string> = {
        account: await digest(`account\0${account.toLowerCase()}`),
        account_address: await digest(`account_address\0${account.toLowerCase()}\0${address}`),
        address: await digest(`address\0${address}`),
      };
      const verdict = await db.transaction(async (tx): Promise<ThrottleVerdict | undefined> => {
        // The clock is read once this transaction runs: a concurrent attempt that went first may have
        // written a later time than one read before waiting.
        const at = now();
        const { current, last } = await load(tx, keys, at);
        const waitFor = (scope: Scope, limit: ThrottleLimit) => {
          const delay = delaySeconds(current[scope], limit);
          if (delay === 0) return 0;
          return Math.ceil((last[scope].getTime() + delay * 1000 - at.getTime()) / 1000);
        };
        const addressWait = waitFor("address", o.address);
        if (addressWait > 0) return { allowed: false, retryAfterSeconds: addressWait, reason: "address" };
        const pairWait = waitFor("account_address", o.accountAddress);
        if (pairWait > 0) return { allowed: false, retryAfterSeconds: pairWait, reason: "account_address" };
        if (current.account >= o.accountUnderAttack && current.account_address > 0) {
          const until = last.account.getTime() + o.windowSeconds * 1000;
          return {
            allowed: false,
            retryAfterSeconds: Math.max(1, Math.ceil((until - at.getTime()) / 1000)),
            reason: "account_under_attack",
          };
        }
        await tx.query(
          `UPDATE login_throttle SET
             attempts = CASE WHEN last_attempt_at < $1::timestamptz - make_interval(secs => $2::int) THEN 1
                        ELSE attempts + 1 END,
             last_attempt_at = $1
           WHERE (scope, key) IN (('account', $3), ('account_address', $4), ('address', $5))`,
          [at, o.windowSeconds, keys.account, keys.account_address, keys.address],
        );
        return undefined;
      });
      if (verdict) return verdict;
      if (++sinceCleanup >= 100) {
        sinceCleanup = 0;
        await db.query(
          "DELETE FROM login_throttle WHERE last_attempt_at < now() - make_interval(secs => $1::int)",
          [o.windowSeconds],
        ).catch(() => {});
      }
      return {
        allowed: true,
        async settle(ok) {
          if (!ok) return;
          // The right password: this attempt was not a guess. The pair starts afresh; the address and the
          // account only give this attempt back (other failures there still count).
          await db.query(
            `UPDATE login_throttle SET attempts = CASE WHEN scope = 'account_address' THEN 0
                                                       ELSE greatest(attempts - 1, 0) END
             WHERE (scope, key) IN (('account', $1), ('account_address', $2), ('address', $3))`,
            [keys.account, keys.account_address, keys.address],
          );
        },
      };
    },
  };
}
