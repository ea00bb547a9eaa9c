/**
 * What a package is, as the build describes it to a format writer: the installed paths and the package's
 * name, version, arch and texts. The writers (deb.ts, rpm.ts, apk.ts, pacman.ts) and the loop that calls
 * them (packages.ts) both depend on this module, so neither imports the other's.
 *
 * @module
 */
import type { PackageArch, PackageName } from "./targets.ts";

/** A package format. */
export type Format = "deb" | "rpm" | "apk" | "arch";

/** One installed path. */
export interface PackageEntry {
  /** Absolute install path. */
  path: string;
  type: "file" | "dir" | "symlink";
  mode: number;
  /** File content source on disk (files). */
  source?: string;
  /** Symlink target. */
  linkname?: string;
  /** Configuration file kept across upgrades. */
  conffile?: boolean;
  /** Group owner when not root (the server's config is readable by `svc`). */
  group?: string;
  /** The licence text (rpm marks it `%license`). */
  license?: boolean;
}

/** Everything a format writer needs. */
export interface PackageSpec {
  name: PackageName;
  version: string;
  release: string;
  arch: PackageArch;
  summary: string;
  description: string;
  entries: PackageEntry[];
  /** Build time, seconds since the epoch (SOURCE_DATE_EPOCH when set). */
  mtime: number;
}

/** A built package file. */
export interface BuiltPackage {
  app: PackageName;
  format: Format;
  arch: PackageArch["name"];
  file: string;
}
