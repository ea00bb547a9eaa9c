/**
 * What the build makes and for which machines: the two programs, the two architectures Deno publishes a
 * Linux runtime for, and each architecture's name in every package format. ppc64le is absent on purpose:
 * Deno publishes no runtime for it, so nothing is built for it and the manifest does not list it.
 *
 * @module
 */

/** The two executables built from one checkout. */
export const APPS = ["svc-server", "svc-agent"] as const;
/** An executable's name. */
export type App = (typeof APPS)[number];
/**
 * Every package the build makes: the two programs, and the agent repository in a package of its own
 * (architecture-independent), so the server package stays the size of the server and upgrading the
 * server does not download the agents again.
 */
export type PackageName = App | "svc-agent-repo";

/** One target architecture and its spelling in each ecosystem. */
export interface ArchInfo {
  /** Our name (Debian's), also the manifest's and the download counter's label. */
  name: "amd64" | "arm64";
  /** `deno compile --target`. */
  denoTarget: string;
  /** npm package carrying Deno's runtime for this arch. */
  npmRuntime: string;
  deb: string;
  rpm: string;
  apk: string;
  pacman: string;
}

/** Every architecture the build makes packages for. */
export const ARCHES: readonly ArchInfo[] = [
  {
    name: "amd64",
    denoTarget: "x86_64-unknown-linux-gnu",
    npmRuntime: "@deno/linux-x64-glibc",
    deb: "amd64",
    rpm: "x86_64",
    apk: "x86_64",
    pacman: "x86_64",
  },
  {
    name: "arm64",
    denoTarget: "aarch64-unknown-linux-gnu",
    npmRuntime: "@deno/linux-arm64-glibc",
    deb: "arm64",
    rpm: "aarch64",
    apk: "aarch64",
    pacman: "aarch64",
  },
];

/** A package's architecture: one of {@link ARCHES}, or "all" for architecture-independent content. */
export type PackageArch = Pick<ArchInfo, "deb" | "rpm" | "apk" | "pacman"> & {
  name: ArchInfo["name"] | "all";
};

/** Architecture-independent packages (Debian `all`, rpm `noarch`). */
export const ARCH_ALL: PackageArch = { name: "all", deb: "all", rpm: "noarch", apk: "noarch", pacman: "any" };

/**
 * Deno runtime shipped by the portable build, the same for both arches: the newest version the npm
 * registry publishes for linux-x64-glibc AND linux-arm64-glibc (arm64 stops at 2.9.5).
 */
export const PORTABLE_RUNTIME_VERSION = "2.9.5";

/** Package metadata shared by every format. */
export const PACKAGE_META = {
  maintainer: "svc maintainers <svc-maintainers@lists.svc.dev>",
  copyrightHolder: "svc maintainers",
  /** SPDX id of svc's own licence (LICENSE at the repository root). */
  license: "Apache-2.0",
  /** Package release (Debian revision, rpm Release, apk -rN, pacman pkgrel). */
  release: "1",
} as const;
