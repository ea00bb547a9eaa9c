/**
 * Gives the runtime's cold code pages back to the kernel once the agent has gone quiet.
 *
 * Starting, connecting and a first sync run through far more of the Deno executable (TLS, HTTP/2, the
 * Node compatibility layer, the module loader) than an idle agent ever touches again: about 40 MiB of the
 * binary stay resident, of which an idle agent uses less than half. Like Android's compaction of cached
 * apps, the agent asks the kernel (`madvise(MADV_PAGEOUT)`, Linux 5.4+) to reclaim the executable's
 * read-only pages after a quiet spell; the pages the agent still needs come back on their next use
 * (from the page cache, or the disk if the kernel evicted them meanwhile). Only clean file-backed pages of
 * the executable are advised, so nothing is written to swap and nothing can be lost; pages another process
 * maps too (a server on the same machine running the same runtime file) are left alone by the kernel.
 *
 * @module
 */

import type { Logger } from "./log.ts";

const MADV_PAGEOUT = 21;

interface Libc {
  madvise(addr: Deno.PointerValue, length: bigint, advice: number): number;
}

let libc: Libc | null | undefined;

/** libc's `madvise` through FFI, or null where FFI or libc is not available (the agent then keeps its pages). */
function openLibc(): Libc | null {
  if (libc !== undefined) return libc;
  try {
    const lib = Deno.dlopen("libc.so.6", {
      madvise: { parameters: ["pointer", "usize", "i32"], result: "i32" },
    });
    libc = { madvise: (addr, length, advice) => lib.symbols.madvise(addr, length, advice) };
  } catch {
    libc = null;
  }
  return libc;
}

/** Read-only mappings of the running executable: [start, end) addresses. */
function executableMappings(): Array<[bigint, bigint]> {
  const exe = Deno.readLinkSync("/proc/self/exe");
  const ranges: Array<[bigint, bigint]> = [];
  for (const line of Deno.readTextFileSync("/proc/self/maps").split("\n")) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+\s+(.+)$/.exec(line);
    // Writable mappings hold the binary's relocated data, which is private to this process: not advised.
    if (!m || m[4] !== exe || m[3][1] === "w") continue;
    ranges.push([BigInt(`0x${m[1]}`), BigInt(`0x${m[2]}`)]);
  }
  return ranges;
}

/** Resident KiB of the executable's mappings (smaps), for the log line. */
function executableResidentKiB(): number {
  const exe = Deno.readLinkSync("/proc/self/exe");
  let inExe = false;
  let kib = 0;
  for (const line of Deno.readTextFileSync("/proc/self/smaps").split("\n")) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inExe = line.endsWith(exe);
    else if (inExe && line.startsWith("Rss:")) kib += Number(/(\d+)/.exec(line)![1]);
  }
  return kib;
}

/** Outcome of one {@linkcode releaseColdRuntimePages} call. */
export interface ReleasedPages {
  /** Resident KiB of the executable before and after the advice. */
  beforeKiB: number;
  afterKiB: number;
}

/**
 * Advises the kernel to reclaim the running executable's read-only pages now. Returns what was resident
 * before and after, or null where the advice cannot be given (no FFI permission, no glibc, a kernel
 * older than 5.4).
 */
export function releaseColdRuntimePages(): ReleasedPages | null {
  const c = openLibc();
  if (!c) return null;
  let ranges: Array<[bigint, bigint]>;
  let beforeKiB: number;
  try {
    ranges = executableMappings();
    beforeKiB = executableResidentKiB();
  } catch {
    return null;
  }
  for (const [start, end] of ranges) {
    if (c.madvise(Deno.UnsafePointer.create(start), end - start, MADV_PAGEOUT) !== 0) return null;
  }
  return { beforeKiB, afterKiB: executableResidentKiB() };
}

/** Options of {@linkcode ColdPageRelease}. */
export interface ColdPageReleaseOptions {
  logger: Logger;
  /** Milliseconds without activity before the pages are released; default 30 s. */
  quietMs?: number;
}

/**
 * Releases the cold runtime pages once per quiet spell: every {@linkcode activity} (a finished sync)
 * re-arms a timer, so pages are given back only after the work that needed them is over.
 */
export class ColdPageRelease {
  readonly #logger: Logger;
  readonly #quietMs: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #unavailable = false;

  constructor(options: ColdPageReleaseOptions) {
    this.#logger = options.logger;
    this.#quietMs = options.quietMs ?? 30_000;
  }

  /** Notes activity: the release waits for the next quiet spell. */
  activity(): void {
    if (this.#unavailable) return;
    clearTimeout(this.#timer);
    const timer = setTimeout(() => this.#release(), this.#quietMs);
    // An idle agent's timer must not keep a stopping process alive.
    Deno.unrefTimer(timer);
    this.#timer = timer;
  }

  /** Cancels a pending release. */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #release(): void {
    this.#timer = undefined;
    const released = releaseColdRuntimePages();
    if (!released) {
      this.#unavailable = true;
      this.#logger.debug("cold runtime pages stay resident: madvise through FFI is not available here");
      return;
    }
    this.#logger.debug("released cold runtime pages", {
      resident_kib_before: released.beforeKiB,
      resident_kib_after: released.afterKiB,
    });
  }
}
