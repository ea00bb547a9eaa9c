/**
 * Materialises a package's install list as a directory tree (the input dpkg-deb and rpmbuild read),
 * and reads the bytes of entries for the writers that build archives themselves.
 *
 * @module
 */
import type { PackageEntry } from "./package_spec.ts";

/** Writes `entries` under `root` with their modes; returns the installed size in bytes. */
export async function stageTree(entries: PackageEntry[], root: string): Promise<number> {
  let size = 0;
  for (const e of entries) {
    const target = `${root}${e.path}`;
    if (e.type === "dir") {
      await Deno.mkdir(target, { recursive: true });
      await Deno.chmod(target, e.mode);
    } else if (e.type === "symlink") {
      await Deno.mkdir(target.slice(0, target.lastIndexOf("/")), { recursive: true });
      await Deno.symlink(e.linkname!, target);
    } else {
      await Deno.mkdir(target.slice(0, target.lastIndexOf("/")), { recursive: true });
      await Deno.copyFile(e.source!, target);
      await Deno.chmod(target, e.mode);
      size += (await Deno.stat(target)).size;
    }
  }
  return size;
}

/** Installed size of `entries` in bytes (files only). */
export async function installedSize(entries: PackageEntry[]): Promise<number> {
  let size = 0;
  for (const e of entries) if (e.type === "file") size += (await Deno.stat(e.source!)).size;
  return size;
}

/** Hex digest of `data`. */
export async function hexDigest(
  algorithm: "SHA-1" | "SHA-256",
  data: Uint8Array<ArrayBuffer>,
): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest(algorithm, data));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Compresses `data` with gzip (a single member). */
export async function gzip(data: Uint8Array<ArrayBuffer>): Promise<Uint8Array<ArrayBuffer>> {
  const stream = new Blob([data]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
