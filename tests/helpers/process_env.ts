/**
 * Test modules that run in parallel share one process and so one environment. A few libraries loaded through
 * FFI (MIT krb5's GSSAPI, a PKCS#11 module) can only be configured through it. A test that must set such
 * variables takes a lease first: one process-wide lock (a `flock` on a file, which two workers of one process
 * also contend for), the previous values saved, and restored when the lease is released.
 */

/** A held lease on the process environment. */
export interface EnvLease {
  /** Restores the leased variables and lets the next test in. */
  release(): void;
}

const LOCK_PATH = "/tmp/svc-tests-process-env.lock";

/** Waits for the lease, then saves `names` so {@link EnvLease.release} can put them back. */
export async function leaseProcessEnv(names: readonly string[]): Promise<EnvLease> {
  const file = await Deno.open(LOCK_PATH, { read: true, write: true, create: true });
  await file.lock(true);
  const saved = names.map((name) => [name, Deno.env.get(name)] as const);
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      for (const [name, value] of saved) {
        value === undefined ? Deno.env.delete(name) : Deno.env.set(name, value);
      }
      file.close();
    },
  };
}
