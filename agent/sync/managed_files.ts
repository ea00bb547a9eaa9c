/**
 * The agent's record of the files it manages, kept in `{data_dir}/state/managed-files.json`:
 * which type owns each file, the SHA-256 of the content svc last wrote (so svc's files are
 * recognised even where the format has no room for a marker, and external edits are detected),
 * and whether an original existed. Originals are copied into `{data_dir}/state/backups/`
 * (root-only, outside the directories the managed software reads) before the first write and
 * put back when the file stops being managed. Directories svc had to create for a managed file are
 * recorded too and removed, when empty, once the last managed file under them goes.
 *
 * Only the sync engine's serial queue calls the mutating methods, so there is one writer.
 *
 * @module
 */

import { readFileIfExists, type RootFs, writeFileAtomic } from "../fs.ts";
import type { Logger } from "../log.ts";

/** One managed file. */
export interface ManagedFileRecord {
  /** Node path (under the root). */
  path: string;
  /** Wire name of the owning policy type. */
  type: string;
  /** SHA-256 (hex) of the content svc last wrote. */
  sha256: string;
  /** What was there before svc wrote the file. */
  original: {
    existed: boolean;
    /** File name under the backups directory when an original existed. */
    backup?: string;
    /** Mode of the original file. */
    mode?: number;
  };
}

interface StateFile {
  version: 1;
  files: ManagedFileRecord[];
  /** Node paths of directories svc created for managed files (absent in older state files). */
  createdDirs?: string[];
}

/** The parent of a node path (`/` for a top-level entry). */
function parentOf(path: string): string {
  const at = path.lastIndexOf("/");
  return at <= 0 ? "/" : path.slice(0, at);
}

/** SHA-256 of text or bytes, lowercase hex. */
export async function sha256Hex(data: string | Uint8Array): Promise<string> {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as BufferSource));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The managed-file record store; see the module documentation. */
export class ManagedFiles {
  readonly #stateDir: string;
  readonly #logger: Logger;
  readonly #records = new Map<string, ManagedFileRecord>();
  readonly #createdDirs = new Set<string>();

  private constructor(stateDir: string, logger: Logger) {
    this.#stateDir = stateDir;
    this.#logger = logger;
  }

  /** Loads the store from `{dataDir}/state`; a corrupt file is moved aside and logged. */
  static async load(dataDir: string, logger: Logger): Promise<ManagedFiles> {
    const store = new ManagedFiles(`${dataDir}/state`, logger);
    const path = store.#statePath;
    const bytes = await readFileIfExists(path);
    if (bytes === undefined) return store;
    try {
      const parsed = JSON.parse(new TextDecoder().decode(bytes)) as StateFile;
      if (parsed.version !== 1 || !Array.isArray(parsed.files)) throw new Error("unknown layout");
      for (const r of parsed.files) {
        if (typeof r.path !== "string" || typeof r.type !== "string" || typeof r.sha256 !== "string") {
          throw new Error("malformed record");
        }
        store.#records.set(r.path, r);
      }
      for (const dir of parsed.createdDirs ?? []) {
        if (typeof dir !== "string") throw new Error("malformed directory list");
        store.#createdDirs.add(dir);
      }
    } catch (err) {
      const aside = `${path}.corrupt-${Date.now()}`;
      await Deno.rename(path, aside).catch(() => {});
      logger.error("managed-file state is unreadable; starting empty (backups are kept)", {
        file: path,
        moved_to: aside,
        error: (err as Error).message,
      });
      store.#records.clear();
      store.#createdDirs.clear();
    }
    return store;
  }

  get #statePath(): string {
    return `${this.#stateDir}/managed-files.json`;
  }

  get #backupDir(): string {
    return `${this.#stateDir}/backups`;
  }

  /** Records of one type (or all), sorted by path. */
  list(type?: string): ManagedFileRecord[] {
    return [...this.#records.values()]
      .filter((r) => type === undefined || r.type === type)
      .sort((a, b) => (a.path < b.path ? -1 : 1));
  }

  /** The record of a path, if managed. */
  get(path: string): ManagedFileRecord | undefined {
    return this.#records.get(path);
  }

  /** Types that have at least one managed file. */
  types(): Set<string> {
    return new Set([...this.#records.values()].map((r) => r.type));
  }

  /**
   * Writes `content` to `path` for `type`: on first management the current file is backed up
   * unless it is svc's own; then an atomic write and a state update. Resolves true when the
   * bytes on disk changed.
   */
  async write(
    fs: RootFs,
    params: {
      path: string;
      type: string;
      content: string;
      mode?: number;
      isOwnContent?: (text: string) => boolean;
    },
  ): Promise<boolean> {
    const { path, type, content } = params;
    const existing = this.#records.get(path);
    if (existing && existing.type !== type) {
      throw new Error(`${path} is already managed by policy type ${existing.type}`);
    }
    const current = await fs.readFile(path);
    const digest = await sha256Hex(content);
    if (!existing) {
      // sha256 stays empty until the write below succeeds.
      const record: ManagedFileRecord = { path, type, sha256: "", original: { existed: false } };
      const currentText = current === undefined ? undefined : new TextDecoder().decode(current);
      const ours = currentText !== undefined && params.isOwnContent?.(currentText) === true;
      if (current !== undefined && !ours) {
        const name = await sha256Hex(path);
        const info = await fs.stat(path);
        await writeFileAtomic(`${this.#backupDir}/${name}`, current, { mode: 0o600, dirMode: 0o700 });
        record.original = { existed: true, backup: name, mode: (info?.mode ?? 0o644) & 0o7777 };
      }
      for (let dir = parentOf(path); dir !== "/" && !(await fs.exists(dir)); dir = parentOf(dir)) {
        this.#createdDirs.add(dir);
      }
      // Record before writing, so a crash between the two still knows where the original is.
      this.#records.set(path, record);
      await this.#save();
    }
    const changed = current === undefined || (await sha256Hex(current)) !== digest;
    if (changed) await fs.writeFileAtomic(path, content, { mode: params.mode ?? 0o644 });
    const record = this.#records.get(path)!;
    if (record.sha256 !== digest) {
      record.sha256 = digest;
      await this.#save();
    }
    return changed;
  }

  /**
   * Stops managing `path`: restores the backed-up original, or removes the file when there was
   * none. Resolves true when the disk changed.
   */
  async release(fs: RootFs, path: string): Promise<boolean> {
    const record = this.#records.get(path);
    if (!record) return false;
    let changed: boolean;
    if (record.original.existed && record.original.backup) {
      const backupPath = `${this.#backupDir}/${record.original.backup}`;
      const original = await readFileIfExists(backupPath);
      if (original === undefined) {
        this.#logger.error("backup of an original file is missing; leaving the file as it is", { path });
        changed = false;
      } else {
        const current = await fs.readFile(path);
        changed = current === undefined || (await sha256Hex(current)) !== (await sha256Hex(original));
        if (changed) await fs.writeFileAtomic(path, original, { mode: record.original.mode ?? 0o644 });
        await Deno.remove(backupPath).catch(() => {});
      }
    } else {
      changed = await fs.remove(path);
    }
    this.#records.delete(path);
    await this.#removeCreatedDirs(fs);
    await this.#save();
    return changed;
  }

  /**
   * Removes the directories svc created that no managed file needs any more, deepest first, as long as
   * they are empty; one that holds someone else's files stays, and svc forgets it.
   */
  async #removeCreatedDirs(fs: RootFs): Promise<void> {
    const paths = [...this.#records.keys()];
    const unneeded = [...this.#createdDirs]
      .filter((dir) => !paths.some((p) => p.startsWith(`${dir}/`)))
      .sort((a, b) => b.length - a.length);
    for (const dir of unneeded) {
      this.#createdDirs.delete(dir);
      if ((await fs.readDir(dir)).length > 0) continue;
      try {
        await fs.remove(dir);
      } catch (err) {
        this.#logger.warn("cannot remove a directory svc created", {
          path: dir,
          error: (err as Error).message,
        });
      }
    }
  }

  /** Whether the file on disk is exactly what svc last wrote. */
  async isIntact(fs: RootFs, path: string): Promise<boolean> {
    const record = this.#records.get(path);
    const current = await fs.readFile(path);
    return record !== undefined && current !== undefined && (await sha256Hex(current)) === record.sha256;
  }

  /**
   * Whether the file at `path` is as svc left it: exactly what svc last wrote, or not managed
   * (any content). The tamper watcher's check.
   */
  async verify(fs: RootFs, path: string): Promise<boolean> {
    return !this.#records.has(path) || await this.isIntact(fs, path);
  }

  async #save(): Promise<void> {
    const state: StateFile = { version: 1, files: this.list(), createdDirs: [...this.#createdDirs].sort() };
    await writeFileAtomic(this.#statePath, `${JSON.stringify(state, null, 2)}\n`, {
      mode: 0o600,
      dirMode: 0o700,
    });
  }
}
