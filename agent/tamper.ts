/**
 * The tamper watcher: watches the directories of the files svc renders (and nothing when there
 * are none) and, once per burst of events, compares each changed managed file with what svc
 * last wrote (the SHA-256 in the managed-file record, through `verify`). A file that differs
 * is handed to a callback together with the processes holding it at that moment (scanned
 * before the restore, while the writer may still be there).
 *
 * The agent's own writes are recognised by content, not by time: while svc writes a file
 * (between {@linkcode TamperWatcher.ownWrite} "start" and "end") its events wait, and when any
 * such write ends every watched file is verified again. An external edit made during or right
 * after an own write is therefore seen as soon as the write is over, however many edits follow
 * each other. A file the restore could not bring back (the write fails) is reported again only after a new
 * change event for it, not on every verification sweep, so a persistent failure does not loop.
 *
 * @module
 */

import { dirname } from "node:path";
import type { RootFs } from "./fs.ts";
import type { Logger } from "./log.ts";
import { findFileHolders, type HolderProcess } from "./procs.ts";

/** A managed file changed by someone else. */
export interface TamperEvent {
  /** Node path of the file. */
  path: string;
  /** Policy type that owns it. */
  type: string;
  processes: HolderProcess[];
  detectedAt: Date;
}

/** Options of {@linkcode TamperWatcher}. */
export interface TamperWatcherOptions {
  fs: RootFs;
  logger: Logger;
  /**
   * Whether a node path holds what svc last wrote (true also when svc no longer manages it):
   * `ManagedFiles.verify`.
   */
  verify: (path: string) => Promise<boolean>;
  /** Handles one tamper event (restore, report); events of the same path wait for it. */
  onTamper: (event: TamperEvent) => Promise<void>;
  /** Quiet time that ends a burst of events; default 150 ms. */
  settleMs?: number;
  /** procfs root for the holder scan; default `/proc`. */
  procRoot?: string;
}

interface Watched {
  path: string;
  type: string;
}

/** See the module documentation. */
export class TamperWatcher {
  readonly #options: TamperWatcherOptions;
  /** Host path → managed file. */
  #files = new Map<string, Watched>();
  #dirsKey = "";
  #watcher: Deno.FsWatcher | undefined;
  #loop: Promise<void> | undefined;
  /** Host path → number of own writes in progress. */
  readonly #writing = new Map<string, number>();
  readonly #timers = new Map<string, { timer: ReturnType<typeof setTimeout>; event: boolean }>();
  /** Host paths whose last restore did not bring the managed content back. */
  readonly #unrestored = new Set<string>();
  readonly #busy = new Set<string>();
  /** Host path → whether a change event (not only a sweep) came while it was being handled. */
  readonly #again = new Map<string, boolean>();
  #closed = false;

  constructor(options: TamperWatcherOptions) {
    this.#options = options;
  }

  /** Node paths currently watched, sorted. */
  watchedPaths(): string[] {
    return [...this.#files.values()].map((w) => w.path).sort();
  }

  /**
   * Replaces the set of watched files (node paths with their type). Directories are watched,
   * so replacing a file by rename is seen; an empty set stops watching. Every file of the new
   * set is verified once, so a change made while the set was being replaced is not missed.
   */
  async setWatched(files: readonly Watched[]): Promise<void> {
    if (this.#closed) return;
    const next = new Map<string, Watched>();
    for (const file of files) {
      try {
        next.set(await this.#options.fs.resolve(file.path), file);
      } catch (err) {
        this.#options.logger.warn("managed file cannot be watched", { path: file.path, error: err });
      }
    }
    this.#files = next;
    const dirs: string[] = [];
    for (const hostPath of next.keys()) {
      const dir = dirname(hostPath);
      try {
        if ((await Deno.stat(dir)).isDirectory && !dirs.includes(dir)) dirs.push(dir);
      } catch {
        // Directory gone; the next sync recreates it and calls setWatched again.
      }
    }
    dirs.sort();
    const key = dirs.join("\n");
    if (key !== this.#dirsKey || !this.#watcher) {
      this.#stopWatcher();
      this.#dirsKey = key;
      if (dirs.length > 0) {
        const watcher = Deno.watchFs(dirs, { recursive: false });
        this.#watcher = watcher;
        this.#loop = this.#consume(watcher);
        this.#options.logger.debug("tamper watcher watching", { dirs });
      }
    }
    for (const hostPath of next.keys()) this.#noticed(hostPath, false);
  }

  /**
   * Marks the start or the end of an own write of a node path. Events of a path being written
   * wait; when a write ends, every watched file is verified again.
   */
  async ownWrite(path: string, phase: "start" | "end"): Promise<void> {
    let hostPath: string;
    try {
      hostPath = await this.#options.fs.resolve(path);
    } catch {
      return; // A path that cannot be resolved cannot be written either.
    }
    const count = (this.#writing.get(hostPath) ?? 0) + (phase === "start" ? 1 : -1);
    if (count > 0) {
      this.#writing.set(hostPath, count);
      return;
    }
    this.#writing.delete(hostPath);
    if (phase === "end") { for (const watched of this.#files.keys()) this.#noticed(watched, false); }
  }

  /** Stops watching and drops pending events. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#stopWatcher();
    for (const { timer } of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    await this.#loop;
  }

  #stopWatcher(): void {
    try {
      this.#watcher?.close();
    } catch {
      // already closed
    }
    this.#watcher = undefined;
    this.#dirsKey = "";
  }

  async #consume(watcher: Deno.FsWatcher): Promise<void> {
    try {
      for await (const event of watcher) {
        if (event.kind === "access") continue;
        for (const path of event.paths) {
          if (this.#files.has(path)) this.#noticed(path, true);
        }
      }
    } catch (err) {
      if (!this.#closed) this.#options.logger.warn("tamper watcher stopped", { error: err });
    }
  }

  /** Verifies a path once its burst is over; `event`: a change event (not a sweep) asked for it. */
  #noticed(hostPath: string, event: boolean): void {
    if (this.#closed) return;
    const pending = this.#timers.get(hostPath);
    if (pending !== undefined) clearTimeout(pending.timer);
    const fromEvent = event || pending?.event === true;
    const timer = setTimeout(() => {
      this.#timers.delete(hostPath);
      void this.#fire(hostPath, fromEvent);
    }, this.#options.settleMs ?? 150);
    this.#timers.set(hostPath, { timer, event: fromEvent });
  }

  async #fire(hostPath: string, fromEvent: boolean): Promise<void> {
    const file = this.#files.get(hostPath);
    // A file being written is verified when its write ends.
    if (!file || this.#closed || this.#writing.has(hostPath)) return;
    if (this.#busy.has(hostPath)) {
      this.#again.set(hostPath, fromEvent || this.#again.get(hostPath) === true);
      return;
    }
    // A file svc could not restore waits for its next change rather than looping on every sweep.
    if (!fromEvent && this.#unrestored.has(hostPath)) return;
    this.#busy.add(hostPath);
    try {
      if (await this.#options.verify(file.path)) {
        this.#unrestored.delete(hostPath);
        return;
      }
      // The content may have changed under an own write that started meanwhile.
      if (this.#writing.has(hostPath) || this.#files.get(hostPath) !== file) return;
      const processes = await findFileHolders(hostPath, { procRoot: this.#options.procRoot });
      this.#options.logger.warn("managed file changed outside svc; restoring", {
        path: file.path,
        type: file.type,
        processes: processes.map((p) => `${p.comm}[${p.pid}]`),
      });
      await this.#options.onTamper({ path: file.path, type: file.type, processes, detectedAt: new Date() });
      if (await this.#options.verify(file.path)) {
        this.#unrestored.delete(hostPath);
      } else {
        this.#unrestored.add(hostPath);
        this.#options.logger.error(
          "managed file could not be restored; it is checked again at its next change",
          {
            path: file.path,
            type: file.type,
          },
        );
      }
    } catch (err) {
      this.#options.logger.error("tamper handling failed", { path: file.path, error: err });
    } finally {
      this.#busy.delete(hostPath);
      const again = this.#again.get(hostPath);
      this.#again.delete(hostPath);
      if (again !== undefined) this.#noticed(hostPath, again);
    }
  }
}
