/**
 * Gives memory that the policy streams' native side freed back to the operating system.
 *
 * A stream's TLS and HTTP/2 state lives in the runtime's native heap (glibc malloc), not in V8. glibc keeps
 * what is freed in its arenas for reuse and returns it to the system only from the top of a heap, so after a
 * reconnect storm (thousands of handshakes at once) or a fan-out round (a copy of the snapshot per stream), the
 * process's resident memory stays at the storm's high-water mark although the memory is free. Measured with
 * bench/stream_memory.ts (2,000 streams, 2 cores): up to 186 MiB per 1,000 streams of native memory after a
 * storm where 37 to 57 are held; `malloc_trim` after the rounds took the native part from ~57 to ~40.
 *
 * So after activity (streams opened or messages written), at most once per interval, the hub asks glibc to
 * trim. Where there is no glibc, or no permission to load it (`--allow-ffi`), trimming is off and says so once.
 */
import type { Logger } from "../core/log.ts";

/** The trimmer of one process. */
export interface MemoryTrim {
  /** Called on every hub tick with the delivery's activity count; trims when it moved and the interval passed. */
  tick(activity: number): void;
  close(): void;
}

/** Trims after activity, at most once per `intervalMs` (default 30 s). */
export function createMemoryTrim(log: Logger, options: { intervalMs?: number } = {}): MemoryTrim {
  const intervalMs = options.intervalMs ?? 30_000;
  let lib: Deno.DynamicLibrary<{ malloc_trim: { parameters: ["usize"]; result: "i32" } }> | undefined;
  try {
    if (Deno.build.os === "linux") {
      lib = Deno.dlopen("libc.so.6", { malloc_trim: { parameters: ["usize"], result: "i32" } });
    }
  } catch (err) {
    log.debug("hub: freed native memory is not given back (no glibc malloc_trim here)", {
      error: String(err),
    });
  }
  let seen = 0;
  let last = performance.now();
  return {
    tick(activity) {
      if (!lib || activity === seen || performance.now() - last < intervalMs) return;
      seen = activity;
      const started = performance.now();
      lib.symbols.malloc_trim(0n);
      last = performance.now();
      log.debug("hub: freed native memory given back", { ms: Math.round(last - started) });
    },
    close() {
      lib?.close();
      lib = undefined;
    },
  };
}
