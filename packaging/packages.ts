/**
 * What each package installs (one list, rendered by every format writer) and the loop that builds them:
 * svc-agent as deb, rpm, apk and Arch, svc-server as deb and rpm, each for every arch.
 *
 * svc-agent (spec "Agent interface"): `/usr/bin/svc-agent`, `/etc/svc/agent.yaml` (0600, kept across
 * upgrades), `/lib/systemd/system/svc-agent.service`, `/var/lib/svc-agent` (0750). The program itself
 * lives in `/usr/lib/svc-agent/` and `/usr/bin/svc-agent` points at it. Arch Linux keeps units under
 * `/usr/lib/systemd/system` (its `/lib` is a symlink owned by the filesystem package).
 *
 * svc-server: `/usr/bin/svc-server`, `/etc/svc/server.yaml` (0640 root:svc, kept) and its unit (user
 * `svc`, hardened). It recommends svc-agent-repo.
 *
 * svc-agent-repo (deb and rpm, architecture-independent): the signed agent repository of the same build
 * under `/usr/share/svc/agent-repo`, the server's default `agent_repo.dir`. A package of its own because
 * it is most of the bytes (every agent package for every format and arch): the server package stays the
 * size of the server, and a server upgrade does not download the agents again.
 *
 * @module
 */
import { type App, ARCH_ALL, ARCHES, PACKAGE_META, type PackageName } from "./targets.ts";
import { VERSION } from "../shared/version.ts";
import { writeDeb } from "./deb.ts";
import { writeRpm } from "./rpm.ts";
import { writeApk } from "./apk.ts";
import { writePacman } from "./pacman.ts";
import type { BuiltPackage, Format, PackageEntry, PackageSpec } from "./package_spec.ts";

const DESCRIPTIONS: Record<PackageName, { summary: string; description: string }> = {
  "svc-agent": {
    summary: "svc policy agent for Linux desktops",
    description: "The svc agent enrolls the machine with an svc server, receives the policies bound to its " +
      "node groups over a mutually authenticated stream, writes them into the system's own configuration " +
      "(browsers, dconf, KConfig, polkit, firewalld, Flatpak, disk encryption) and reports compliance.",
  },
  "svc-server": {
    summary: "svc policy management server",
    description: "The svc server manages desktop policies for a fleet of Linux machines: REST API and web " +
      "UI, enrollment and policy services for agents, an internal CA and Prometheus metrics. It serves the " +
      "signed agent package repository that the svc-agent-repo package installs.",
  },
  "svc-agent-repo": {
    summary: "svc agent package repository",
    description: "The signed repository of svc-agent packages (deb, rpm, apk and Arch, amd64 and arm64) of " +
      "one svc release, which svc-server serves to the machines it manages under /agent/ and its " +
      "deploy-agent wizard installs from.",
  },
};

/** Format writers, and which formats each program ships in. */
const FORMATS: Record<App, Format[]> = {
  "svc-agent": ["deb", "rpm", "apk", "arch"],
  "svc-server": ["deb", "rpm"],
};

/** Path of `app`'s systemd unit for `format`. */
export function unitPath(app: App, format: Format): string {
  return `${format === "arch" ? "/usr/lib" : "/lib"}/systemd/system/${app}.service`;
}

async function walk(dir: string, prefix: string, out: PackageEntry[]): Promise<void> {
  const names: Deno.DirEntry[] = [];
  for await (const e of Deno.readDir(dir)) names.push(e);
  names.sort((a, b) => a.name.localeCompare(b.name));
  for (const e of names) {
    const src = `${dir}/${e.name}`;
    const path = `${prefix}/${e.name}`;
    const info = await Deno.lstat(src);
    if (info.isSymlink) out.push({ path, type: "symlink", mode: 0o777, linkname: await Deno.readLink(src) });
    else if (info.isDirectory) {
      out.push({ path, type: "dir", mode: 0o755 });
      await walk(src, path, out);
    } else out.push({ path, type: "file", mode: (info.mode ?? 0o644) & 0o755, source: src });
  }
}

/** The install list of `app` in `format`. */
export async function packageEntries(
  app: App,
  format: Format,
  options: { program: string; root: string },
): Promise<PackageEntry[]> {
  const unit = unitPath(app, format);
  const entries: PackageEntry[] = [
    { path: `/usr/lib/${app}`, type: "dir", mode: 0o755 },
  ];
  await walk(options.program, `/usr/lib/${app}`, entries);
  entries.push(
    { path: "/usr/bin", type: "dir", mode: 0o755 },
    { path: `/usr/bin/${app}`, type: "symlink", mode: 0o777, linkname: `../lib/${app}/${app}` },
    { path: "/etc/svc", type: "dir", mode: 0o755 },
  );
  if (app === "svc-agent") {
    entries.push(
      {
        path: "/etc/svc/agent.yaml",
        type: "file",
        mode: 0o600,
        source: `${options.root}/packaging/agent.yaml`,
        conffile: true,
      },
      { path: "/var/lib/svc-agent", type: "dir", mode: 0o750 },
    );
  } else {
    entries.push({
      path: "/etc/svc/server.yaml",
      type: "file",
      mode: 0o640,
      source: `${options.root}/packaging/server.yaml`,
      conffile: true,
      group: "svc",
    });
  }
  entries.push({
    path: unit,
    type: "file",
    mode: 0o644,
    source: `${options.root}/packaging/systemd/${app}.service`,
  });
  entries.push(...licenseEntries(app, format, options.root));
  return entries;
}

/**
 * The licence text where each format's convention puts it: `/usr/share/licenses/<name>/LICENSE` (rpm,
 * Alpine, Arch). A deb says it in `/usr/share/doc/<name>/copyright` instead (deb.ts), pointing at
 * Debian's own copy of the Apache licence.
 */
export function licenseEntries(name: string, format: Format, root: string): PackageEntry[] {
  if (format === "deb") return [];
  return [
    { path: `/usr/share/licenses/${name}`, type: "dir", mode: 0o755 },
    {
      path: `/usr/share/licenses/${name}/LICENSE`,
      type: "file",
      mode: 0o644,
      source: `${root}/LICENSE`,
      license: true,
    },
  ];
}

/** The install list of svc-agent-repo: the repository directory `repo` of this build, and the licence. */
export async function agentRepoEntries(repo: string, format: Format, root: string): Promise<PackageEntry[]> {
  const entries: PackageEntry[] = [
    { path: "/usr/share/svc", type: "dir", mode: 0o755 },
    { path: "/usr/share/svc/agent-repo", type: "dir", mode: 0o755 },
  ];
  await walk(repo, "/usr/share/svc/agent-repo", entries);
  entries.push(...licenseEntries("svc-agent-repo", format, root));
  return entries;
}

/** Builds svc-agent-repo (deb and rpm, architecture-independent) from the repository in `repo`. */
export async function buildAgentRepoPackages(
  options: { repo: string; out: string; root: string; workDir: string; release?: string },
): Promise<BuiltPackage[]> {
  await Deno.mkdir(options.out, { recursive: true });
  const mtime = Number(Deno.env.get("SOURCE_DATE_EPOCH") ?? Math.floor(Date.now() / 1000));
  const built: BuiltPackage[] = [];
  for (const format of ["deb", "rpm"] as const) {
    const spec: PackageSpec = {
      name: "svc-agent-repo",
      version: VERSION,
      release: options.release ?? PACKAGE_META.release,
      arch: ARCH_ALL,
      ...DESCRIPTIONS["svc-agent-repo"],
      entries: await agentRepoEntries(options.repo, format, options.root),
      mtime,
    };
    const work = await Deno.makeTempDir({ dir: options.workDir, prefix: `svc-agent-repo-${format}-` });
    try {
      const write = format === "deb" ? writeDeb : writeRpm;
      built.push({
        app: spec.name,
        format,
        arch: "all",
        file: await write(spec, { out: options.out, workDir: work }),
      });
    } finally {
      await Deno.remove(work, { recursive: true }).catch(() => {});
    }
  }
  return built;
}

/** Builds every package of `app` into `out`; returns them. */
export async function buildPackages(
  app: App,
  options: {
    programs: Record<string, string>;
    out: string;
    root: string;
    workDir: string;
    release?: string;
    /** Only these formats / arches (default: all of `app`'s). */
    formats?: Format[];
    arches?: string[];
  },
): Promise<BuiltPackage[]> {
  await Deno.mkdir(options.out, { recursive: true });
  const mtime = Number(Deno.env.get("SOURCE_DATE_EPOCH") ?? Math.floor(Date.now() / 1000));
  const jobs: Array<() => Promise<BuiltPackage>> = [];
  for (const arch of ARCHES.filter((a) => !options.arches || options.arches.includes(a.name))) {
    const program = options.programs[`${app}/${arch.name}`];
    for (const format of FORMATS[app].filter((f) => !options.formats || options.formats.includes(f))) {
      jobs.push(async () => {
        const spec: PackageSpec = {
          name: app,
          version: VERSION,
          release: options.release ?? PACKAGE_META.release,
          arch,
          ...DESCRIPTIONS[app],
          entries: await packageEntries(app, format, { program, root: options.root }),
          mtime,
        };
        const work = await Deno.makeTempDir({
          dir: options.workDir,
          prefix: `${app}-${format}-${arch.name}-`,
        });
        try {
          const write = { deb: writeDeb, rpm: writeRpm, apk: writeApk, arch: writePacman }[format];
          const file = await write(spec, { out: options.out, workDir: work });
          return { app, format, arch: arch.name, file };
        } finally {
          await Deno.remove(work, { recursive: true }).catch(() => {});
        }
      });
    }
  }
  return await inParallel(jobs, 2);
}

/** Runs `jobs` with at most `limit` at a time (compressors are CPU-bound), keeping their order. */
async function inParallel<T>(jobs: Array<() => Promise<T>>, limit: number): Promise<T[]> {
  const results: T[] = new Array(jobs.length);
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const i = next++;
      results[i] = await jobs[i]();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, jobs.length) }, worker));
  return results;
}
