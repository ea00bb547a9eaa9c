/**
 * The node's life: what a policy targets can appear, change or disappear without any change on the server (a
 * browser installed after its policy arrived, GNOME schemas or KDE installed later, a local account added to a
 * group). Each enforcer names the node paths whose change can change what it does
 * ({@linkcode Enforcer.watches}); this watcher follows them with inotify and asks for one re-evaluation per
 * burst of changes.
 *
 * A target that does not exist yet cannot be watched itself, so its nearest existing ancestor directory is
 * watched (not recursively) for the entry on the way to it; a target that is a directory is watched too, so
 * files installed into it are seen. When a matching event arrives the watch set is recomputed at once (the
 * directory that just appeared is watched before the package manager fills it), and the re-evaluation waits for
 * a quiet period, so one `apt-get install` is one sync. Events of unrelated entries of a watched ancestor are
 * ignored. The periodic full re-evaluation of the daemon is the safety net for what inotify cannot see.
 *
 * @module
 */

import { dirname } from "node:path";
import type { RootFs } from "../fs.ts";
import type { Logger } from "../log.ts";

/** Options of {@linkcode NodeWatcher}. */
export interface NodeWatcherOptions {
  fs: RootFs;
  logger: Logger;
  /** Called once per burst of relevant changes with the node paths that changed. */
  onChange: (paths: string[]) => void;
  /** Quiet time that ends a burst; default 1,500 ms (a package manager unpacks in several steps). */
  settleMs?: number;
}

/** See the module documentation. */
export class NodeWatcher {
  readonly #options: NodeWatcherOptions;
  /** Host path of a target → its node path. */
  #targets = new Map<string, string>();
  #dirsKey = "";
  #watcher: Deno.FsWatcher | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  readonly #changed = new Set<string>();
  #closed = false;

  constructor(options: NodeWatcherOptions) {
    this.#options = options;
  }

  /** Host directories watched now, sorted (for diagnostics and tests). */
  watchedDirs(): string[] {
    return this.#dirsKey ? this.#dirsKey.split("\n") : [];
  }

  /** Replaces the watched targets (node paths); an empty list stops watching. */
  async setTargets(paths: readonly string[]): Promise<void> {
    if (this.#closed) return;
    const targets = new Map<string, string>();
    for (const path of new Set(paths)) {
      try {
        targets.set(await this.#options.fs.resolve(path), path);
      } catch (err) {
        this.#options.logger.debug("node path cannot be watched", { path, error: (err as Error).message });
      }
    }
    this.#targets = targets;
    await this.#rearm();
  }

  /** Stops watching for good. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#stop();
  }

  async #rearm(): Promise<void> {
    const dirs = new Set<string>();
    for (const host of this.#targets.keys()) {
      const info = await statOrUndefined(host);
      if (info?.isDirectory) dirs.add(host);
      const ancestor = await nearestDirectory(dirname(host), this.#options.fs.root);
      if (ancestor) dirs.add(ancestor);
    }
    if (this.#closed) return;
    const key = [...dirs].sort().join("\n");
    if (key === this.#dirsKey && this.#watcher) return;
    this.#stop();
    this.#dirsKey = key;
    if (dirs.size === 0) return;
    let watcher: Deno.FsWatcher;
    try {
      watcher = Deno.watchFs([...dirs], { recursive: false });
    } catch (err) {
      // A directory removed between the stat and the watch: the next change or sync arms again.
      this.#options.logger.warn("cannot watch the node for changes", { error: (err as Error).message });
      this.#dirsKey = "";
      return;
    }
    this.#watcher = watcher;
    void this.#consume(watcher);
  }

  #stop(): void {
    try {
      this.#watcher?.close();
    } catch {
      // Already closed.
    }
    this.#watcher = undefined;
  }

  async #consume(watcher: Deno.FsWatcher): Promise<void> {
    try {
      for await (const event of watcher) {
        if (event.kind === "access" || event.kind === "other") continue;
        const hits = event.paths.flatMap((p) => this.#matches(p));
        if (hits.length === 0) continue;
        for (const hit of hits) this.#changed.add(hit);
        // Watch what just appeared (or stop watching what went) before it fills up.
        await this.#rearm();
        clearTimeout(this.#timer);
        this.#timer = setTimeout(() => this.#fire(), this.#options.settleMs ?? 1_500);
      }
    } catch (err) {
      if (!this.#closed && watcher === this.#watcher) {
        this.#options.logger.warn("node watcher stopped", { error: (err as Error).message });
      }
    }
  }

  /** Node paths of the targets an event on host path `path` concerns. */
  #matches(path: string): string[] {
    const hits: string[] = [];
    for (const [host, node] of this.#targets) {
      if (path === host || host.startsWith(`${path}/`) || path.startsWith(`${host}/`)) hits.push(node);
    }
    return hits;
  }

  #fire(): void {
    if (this.#closed || this.#changed.size === 0) return;
    const paths = [...this.#changed].sort();
    this.#changed.clear();
    this.#options.onChange(paths);
  }
}

async function statOrUndefined(path: string): Promise<Deno.FileInfo | undefined> {
  try {
    return await Deno.stat(path);
  } catch {
    return undefined;
  }
}

/** `dir` or its nearest existing ancestor that is a directory, never above `root`. */
async function nearestDirectory(dir: string, root: string): Promise<string | undefined> {
  for (let current = dir;; current = dirname(current)) {
    if ((await statOrUndefined(current))?.isDirectory) return current;
    if (current === root || current === "/" || !current.startsWith(root)) return undefined;
  }
}
