/**
 * File access for everything the agent enforces. Every path an enforcer names is a node path
 * (`/etc/firefox/policies/policies.json`) resolved under the configured root directory
 * (`agent.root_dir`, `/` in production, a temp directory in tests). Resolution refuses paths
 * that would leave the root, lexically (`..`) or through symbolic links, and refuses control
 * characters, so neither a hostile server value nor a planted link can steer a write elsewhere.
 *
 * Writes are atomic: a temp file in the same directory, fsync, rename, fsync of the directory.
 *
 * @module
 */

import { dirname } from "node:path";

/** A node path that would resolve outside the root, or is malformed. */
export class PathEscapeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PathEscapeError";
  }
}

/** Options of {@linkcode writeFileAtomic}. */
export interface WriteOptions {
  /** File mode; default 0o644. */
  mode?: number;
  /** Mode of directories created on the way; default 0o755. */
  dirMode?: number;
}

/**
 * Splits an absolute node path into components, refusing anything that is not a plain
 * absolute path: relative paths, `.` or `..` components, NUL and other control characters.
 */
export function pathComponents(path: string): string[] {
  if (typeof path !== "string" || path === "") throw new PathEscapeError("path is empty");
  // deno-lint-ignore no-control-regex
  if (/[\x00-\x1f\x7f]/.test(path)) {
    throw new PathEscapeError(`path ${JSON.stringify(path)} contains a control character`);
  }
  if (!path.startsWith("/")) throw new PathEscapeError(`path "${path}" is not absolute`);
  const parts = path.split("/").filter((p) => p !== "");
  for (const part of parts) {
    if (part === "." || part === "..") {
      throw new PathEscapeError(`path "${path}" contains a "${part}" component`);
    }
  }
  return parts;
}

function isWithin(root: string, path: string): boolean {
  return root === "/" ? path.startsWith("/") : path === root || path.startsWith(`${root}/`);
}

async function lstatOrUndefined(path: string): Promise<Deno.FileInfo | undefined> {
  try {
    return await Deno.lstat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

/**
 * Writes `data` to the host path `path` atomically: a new temp file next to it, fsync, rename
 * over the target, fsync of the directory. The temp file is removed on any failure, so the
 * target is either the old or the new content, never half of one.
 */
export async function writeFileAtomic(
  path: string,
  data: Uint8Array | string,
  options: WriteOptions = {},
): Promise<void> {
  const mode = options.mode ?? 0o644;
  const dir = dirname(path);
  await Deno.mkdir(dir, { recursive: true, mode: options.dirMode ?? 0o755 });
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const suffix = crypto.getRandomValues(new Uint8Array(6)).reduce((s, b) => s + b.toString(16), "");
  const tmp = `${dir}/.svc-tmp-${suffix}`;
  const file = await Deno.open(tmp, { write: true, createNew: true, mode });
  try {
    try {
      let written = 0;
      while (written < bytes.length) written += await file.write(bytes.subarray(written));
      await file.sync();
    } finally {
      file.close();
    }
    // The process umask may have narrowed the mode given to open.
    await Deno.chmod(tmp, mode);
    await Deno.rename(tmp, path);
  } catch (err) {
    await Deno.remove(tmp).catch(() => {});
    throw err;
  }
  const dirHandle = await Deno.open(dir, { read: true });
  try {
    await dirHandle.sync();
  } finally {
    dirHandle.close();
  }
}

/** Whether a host path exists (a missing parent directory counts as not existing). */
export async function fileExists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.NotADirectory) return false;
    throw err;
  }
}

/** Reads a host file, or undefined when it does not exist. */
export async function readFileIfExists(path: string): Promise<Uint8Array | undefined> {
  try {
    return await Deno.readFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

/** Root-prefixed file access; see the module documentation. */
export class RootFs {
  /** Real path of the root directory. */
  readonly root: string;

  private constructor(root: string) {
    this.root = root;
  }

  /** Opens `root` (which must be an existing directory). */
  static async open(root: string): Promise<RootFs> {
    const real = await Deno.realPath(root);
    const info = await Deno.stat(real);
    if (!info.isDirectory) throw new Error(`agent.root_dir "${root}" is not a directory`);
    return new RootFs(real);
  }

  /**
   * Maps a node path to the host path under the root. Components that exist are followed
   * through symbolic links, and every link must land inside the root; a dangling link is
   * refused because writing through it would create a file wherever it points.
   *
   * @throws {PathEscapeError} when the path is malformed or leaves the root.
   */
  async resolve(path: string): Promise<string> {
    const parts = pathComponents(path);
    let current = this.root;
    for (let i = 0; i < parts.length; i++) {
      const candidate = current === "/" ? `/${parts[i]}` : `${current}/${parts[i]}`;
      const info = await lstatOrUndefined(candidate);
      if (!info) {
        const rest = parts.slice(i + 1);
        return rest.length ? `${candidate}/${rest.join("/")}` : candidate;
      }
      if (info.isSymlink) {
        let target: string;
        try {
          target = await Deno.realPath(candidate);
        } catch {
          throw new PathEscapeError(`path "${path}": "${candidate}" is a dangling symbolic link`);
        }
        if (!isWithin(this.root, target)) {
          throw new PathEscapeError(
            `path "${path}": symbolic link "${candidate}" points to "${target}", outside the root "${this.root}"`,
          );
        }
        current = target;
      } else {
        current = candidate;
      }
    }
    return current;
  }

  /** Reads a file as bytes, or undefined when it does not exist. */
  async readFile(path: string): Promise<Uint8Array | undefined> {
    return readFileIfExists(await this.resolve(path));
  }

  /** Reads a file as UTF-8 text, or undefined when it does not exist. */
  async readTextFile(path: string): Promise<string | undefined> {
    const bytes = await this.readFile(path);
    return bytes === undefined ? undefined : new TextDecoder().decode(bytes);
  }

  /** Whether anything exists at the path (links followed). */
  async exists(path: string): Promise<boolean> {
    try {
      await Deno.stat(await this.resolve(path));
      return true;
    } catch (err) {
      if (err instanceof Deno.errors.NotFound || err instanceof PathEscapeError) return false;
      throw err;
    }
  }

  /** File information (links followed), or undefined when nothing is there. */
  async stat(path: string): Promise<Deno.FileInfo | undefined> {
    try {
      return await Deno.stat(await this.resolve(path));
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return undefined;
      throw err;
    }
  }

  /** Writes a file atomically; see {@linkcode writeFileAtomic}. */
  async writeFileAtomic(path: string, data: Uint8Array | string, options: WriteOptions = {}): Promise<void> {
    await writeFileAtomic(await this.resolve(path), data, options);
  }

  /** Removes a file; resolves false when it did not exist. */
  async remove(path: string): Promise<boolean> {
    try {
      await Deno.remove(await this.resolve(path));
      return true;
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return false;
      throw err;
    }
  }

  /** Names of the entries of a directory, sorted; empty when it does not exist. */
  async readDir(path: string): Promise<string[]> {
    const names: string[] = [];
    try {
      for await (const entry of Deno.readDir(await this.resolve(path))) names.push(entry.name);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.NotADirectory) return [];
      throw err;
    }
    return names.sort();
  }
}
