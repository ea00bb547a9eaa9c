/**
 * `deno task build:oci` (or `deno task build --portable --oci`): the OCI image of svc-server, built with
 * Debian's `umoci` from files this machine already has; no registry and no base image are involved.
 *
 * The root filesystem holds only what the program needs to run:
 *
 * ```
 * /usr/lib/svc-server/lib/   the portable build's runtime, bundle, worker and PGlite files (no launcher:
 *                            the image has no shell, the entrypoint is the launcher's exec line)
 * /usr/lib/x86_64-linux-gnu/ the C and GCC runtime libraries `ldd` lists for the runtime, copied from their
 *                            Debian packages (/lib, /lib64 are the same links as on merged-/usr Debian)
 * /usr/share/doc/<pkg>/copyright  the licences of those packages
 * /etc/passwd, /etc/group    root and svc (uid/gid 10001), the user the image runs as
 * /etc/ssl/certs/            the CA bundle (system trust store for `DENO_TLS_CA_STORE=system` setups)
 * /var/lib/svc               the one data volume (owned by svc, 0700)
 * /tmp                       scratch (a tmpfs at run time, as the root filesystem is read-only)
 * ```
 *
 * The image config sets the user, the environment (data dir, metrics on all interfaces, Deno's cache
 * under /tmp), the entrypoint, the exposed ports and the volume. OCI has no health check field: the
 * compose file (packaging/compose.yaml) runs `svc-server healthcheck` with the same entrypoint.
 *
 * Output: an OCI image layout `dist/oci/svc-server` tagged with the version, and the same layout as one
 * file `dist/oci/svc-server-<version>-oci-amd64.tar` (`skopeo copy oci-archive:…`, `podman load -i`).
 *
 * @module
 */
import { basename, dirname, join } from "node:path";
import { run } from "./exec.ts";
import { portableRunArgs } from "./program.ts";
import { PACKAGE_META } from "./targets.ts";
import { VERSION } from "../shared/version.ts";

const ROOT = new URL("../", import.meta.url).pathname.replace(/\/$/, "");

/** Where the program lives inside the image. */
export const IMAGE_PROGRAM_DIR = "/usr/lib/svc-server/lib";
/** The user and group the image runs as (not root; no other account owns anything in the image). */
export const IMAGE_UID = 10001;
/** The one data volume. */
export const IMAGE_DATA_DIR = "/var/lib/svc";
/** Ports: web (UI, REST, enrollment), policy gRPC, metrics. */
export const IMAGE_PORTS = [8443, 8444, 9090];

/** The image's argv: the portable launcher's exec line, without the shell that the image does not have. */
export function imageEntrypoint(): string[] {
  return [
    `${IMAGE_PROGRAM_DIR}/deno`,
    ...portableRunArgs("svc-server"),
    `${IMAGE_PROGRAM_DIR}/svc-server.js`,
  ];
}

/** The image's environment; everything else is configured by the operator's `SVC_*` variables. */
export const IMAGE_ENV: Record<string, string> = {
  PATH: IMAGE_PROGRAM_DIR,
  HOME: IMAGE_DATA_DIR,
  // Deno keeps its cache in DENO_DIR; the program needs none, so it goes to the tmpfs, not the volume.
  DENO_DIR: "/tmp/deno",
  DENO_NO_UPDATE_CHECK: "1",
  DENO_NO_PROMPT: "1",
  SVC_SERVER_DATA_DIR: IMAGE_DATA_DIR,
  // Inside a container loopback is private to it; the port is reachable only where it is published.
  SVC_METRICS_ADDR: "0.0.0.0:9090",
};

/** Options of {@link buildOciImage}. */
export interface OciImageOptions {
  /** The portable amd64 server directory (`dist/svc-server-linux-amd64`). */
  program: string;
  /** The OCI image layout to create (replaced when it exists). */
  layout: string;
  /** Scratch directory (created and removed). */
  workDir: string;
  /** The image tag (default: the version). */
  tag?: string;
}

/** What {@link buildOciImage} made. */
export interface OciImage {
  layout: string;
  tag: string;
  /** `<layout>:<tag>`, as umoci and skopeo name it. */
  ref: string;
  /** Bytes of the unpacked root filesystem. */
  rootfsBytes: number;
  /** Bytes of the layout's blobs (compressed layer + config + manifest). */
  blobBytes: number;
  /** The Debian packages the copied libraries come from, `name version`. */
  packages: string[];
}

/** One shared library the runtime loads: the path `ldd` printed and the Debian package owning it. */
interface Library {
  path: string;
  pkg: string;
}

/** The runtime's shared libraries as `ldd` lists them, each with its owning Debian package. */
async function runtimeLibraries(runtime: string): Promise<Library[]> {
  const out = await run("ldd", [runtime]);
  const paths = [...out.matchAll(/(\/\S+) \(0x/g)].map((m) => m[1]);
  if (!paths.some((p) => basename(p).startsWith("libc.so"))) {
    throw new Error(`ldd ${runtime} lists no libc: is it an amd64 glibc program on an amd64 machine?`);
  }
  const libs: Library[] = [];
  for (const path of paths) {
    // "libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6" (the arch qualifier is there when several are installed).
    const owner = await run("dpkg", ["-S", path]);
    libs.push({ path, pkg: owner.slice(0, owner.indexOf(": ")) });
  }
  return libs;
}

/**
 * Copies `path` from this machine into `rootfs` at the same path, recreating every symbolic link met on
 * the way (the loader is looked up as /lib64/…, which on merged-/usr Debian is a link chain into /usr/lib).
 */
async function copyResolved(path: string, rootfs: string): Promise<void> {
  let current = "/";
  const parts = path.split("/").filter(Boolean);
  for (let i = 0; i < parts.length; i++) {
    const next = join(current, parts[i]);
    const info = await Deno.lstat(next);
    if (info.isSymlink) {
      const target = await Deno.readLink(next);
      await Deno.mkdir(join(rootfs, current), { recursive: true });
      await Deno.symlink(target, join(rootfs, next)).catch((err) => {
        if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
      });
      const resolved = target.startsWith("/") ? target : join(current, target);
      return await copyResolved(join(resolved, ...parts.slice(i + 1)), rootfs);
    }
    current = next;
  }
  await Deno.mkdir(join(rootfs, dirname(path)), { recursive: true });
  await Deno.copyFile(path, join(rootfs, path));
}

async function dirBytes(dir: string): Promise<number> {
  let total = 0;
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    const info = await Deno.lstat(path);
    if (info.isDirectory) total += await dirBytes(path);
    else if (info.isFile) total += info.size;
  }
  return total;
}

/** Stages the image's root filesystem in `rootfs`; returns the Debian packages it copied from. */
async function stageRootfs(program: string, rootfs: string): Promise<string[]> {
  const runtime = join(program, "lib", "deno");
  const programDir = join(rootfs, IMAGE_PROGRAM_DIR);
  await Deno.mkdir(programDir, { recursive: true });
  for await (const entry of Deno.readDir(join(program, "lib"))) {
    await Deno.copyFile(join(program, "lib", entry.name), join(programDir, entry.name));
  }
  const libs = await runtimeLibraries(runtime);
  for (const lib of libs) await copyResolved(lib.path, rootfs);
  // The CA bundle also names its package's licence; the libraries' packages are listed with versions.
  const pkgs = [...new Set([...libs.map((l) => l.pkg), "ca-certificates"])].sort();
  const versions: string[] = [];
  for (const pkg of pkgs) {
    const version = (await run("dpkg-query", ["-W", "-f", "${Version}", pkg])).trim();
    versions.push(`${pkg.replace(/:.*/, "")} ${version}`);
    const doc = `/usr/share/doc/${pkg.replace(/:.*/, "")}/copyright`;
    await Deno.mkdir(join(rootfs, dirname(doc)), { recursive: true });
    await Deno.copyFile(doc, join(rootfs, doc));
  }
  await Deno.mkdir(join(rootfs, "etc/ssl/certs"), { recursive: true });
  await Deno.copyFile(
    await Deno.realPath("/etc/ssl/certs/ca-certificates.crt"),
    join(rootfs, "etc/ssl/certs/ca-certificates.crt"),
  );
  await Deno.writeTextFile(
    join(rootfs, "etc/passwd"),
    `root:x:0:0:root:/root:/usr/sbin/nologin\nsvc:x:${IMAGE_UID}:${IMAGE_UID}:svc server:${IMAGE_DATA_DIR}:/usr/sbin/nologin\n`,
  );
  await Deno.writeTextFile(join(rootfs, "etc/group"), `root:x:0:\nsvc:x:${IMAGE_UID}:\n`);
  await Deno.writeTextFile(
    join(rootfs, "etc/nsswitch.conf"),
    "passwd: files\ngroup: files\nhosts: files dns\n",
  );
  // The parents stay 0755 (uid 10001 must traverse them); only the volume itself is private.
  await Deno.mkdir(join(rootfs, dirname(IMAGE_DATA_DIR)), { recursive: true });
  await Deno.mkdir(join(rootfs, IMAGE_DATA_DIR));
  await Deno.chmod(join(rootfs, IMAGE_DATA_DIR), 0o700);
  await Deno.chown(join(rootfs, IMAGE_DATA_DIR), IMAGE_UID, IMAGE_UID);
  await Deno.mkdir(join(rootfs, "tmp"));
  await Deno.chmod(join(rootfs, "tmp"), 0o1777);
  return versions;
}

/** Builds the image into an OCI layout with umoci (run as root: the layer keeps the staged owners). */
export async function buildOciImage(options: OciImageOptions): Promise<OciImage> {
  const tag = options.tag ?? VERSION;
  const ref = `${options.layout}:${tag}`;
  const rootfs = join(options.workDir, "rootfs");
  await Deno.remove(options.layout, { recursive: true }).catch(() => {});
  await Deno.remove(rootfs, { recursive: true }).catch(() => {});
  await Deno.mkdir(dirname(options.layout), { recursive: true });
  try {
    const packages = await stageRootfs(options.program, rootfs);
    await run("umoci", ["init", "--layout", options.layout]);
    await run("umoci", ["new", "--image", ref]);
    await run("umoci", ["insert", "--image", ref, "--history.created_by", "packaging/oci.ts", rootfs, "/"]);
    const config = [
      // umoci's new image carries a TERM variable; the image's environment is only IMAGE_ENV.
      "--clear",
      "config.env",
      "--config.user",
      `${IMAGE_UID}:${IMAGE_UID}`,
      "--config.workingdir",
      IMAGE_DATA_DIR,
      "--config.volume",
      IMAGE_DATA_DIR,
      // Repeated: one argument each (a single value would be one argument with spaces in it).
      ...imageEntrypoint().flatMap((arg) => ["--config.entrypoint", arg]),
      "--os",
      "linux",
      "--architecture",
      "amd64",
      "--author",
      PACKAGE_META.maintainer,
      ...Object.entries(IMAGE_ENV).flatMap(([k, v]) => ["--config.env", `${k}=${v}`]),
      ...IMAGE_PORTS.flatMap((p) => ["--config.exposedports", `${p}/tcp`]),
      ...Object.entries({
        "org.opencontainers.image.title": "svc-server",
        "org.opencontainers.image.version": VERSION,
        "org.opencontainers.image.licenses": PACKAGE_META.license,
        "org.opencontainers.image.vendor": PACKAGE_META.copyrightHolder,
        "org.opencontainers.image.description": `svc policy server; runtime libraries from Debian: ${
          packages.join(", ")
        }`,
      }).flatMap(([k, v]) => ["--config.label", `${k}=${v}`, "--manifest.annotation", `${k}=${v}`]),
    ];
    await run("umoci", [
      "config",
      "--image",
      ref,
      "--history.created_by",
      "packaging/oci.ts (config)",
      ...config,
    ]);
    await run("umoci", ["gc", "--layout", options.layout]);
    return {
      layout: options.layout,
      tag,
      ref,
      rootfsBytes: await dirBytes(rootfs),
      blobBytes: await dirBytes(join(options.layout, "blobs")),
      packages,
    };
  } finally {
    await Deno.remove(rootfs, { recursive: true }).catch(() => {});
  }
}

/** The layout as one uncompressed tar (an `oci-archive`), entries relative to the layout's root. */
export async function archiveLayout(layout: string, file: string): Promise<void> {
  await Deno.mkdir(dirname(file), { recursive: true });
  await run("tar", [
    "--sort=name",
    "--owner=0",
    "--group=0",
    "--numeric-owner",
    "-cf",
    file,
    "-C",
    layout,
    ".",
  ]);
}

async function main(): Promise<number> {
  const started = performance.now();
  const dist = Deno.args[0] ?? `${ROOT}/dist`;
  const program = `${dist}/svc-server-linux-amd64`;
  if (!await Deno.stat(`${program}/lib/deno`).then(() => true, () => false)) {
    console.error(`build:oci: ${program}/lib/deno is absent: run \`deno task build --portable\` first`);
    return 1;
  }
  if (Deno.uid() !== 0) {
    console.error(
      "build:oci: run as root: the image's files must be owned by root and its volume by uid 10001",
    );
    return 1;
  }
  const workDir = await Deno.makeTempDir({ prefix: "svc-oci-" });
  try {
    const image = await buildOciImage({ program, layout: `${dist}/oci/svc-server`, workDir });
    const archive = `${dist}/oci/svc-server-${VERSION}-oci-amd64.tar`;
    await archiveLayout(image.layout, archive);
    const mb = (n: number) => `${(n / 1_000_000).toFixed(1)} MB`;
    console.error(
      `build:oci: ${image.ref} (root filesystem ${mb(image.rootfsBytes)}, blobs ${mb(image.blobBytes)}; ` +
        `${basename(archive)}) in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    return 0;
  } finally {
    await Deno.remove(workDir, { recursive: true }).catch(() => {});
  }
}

if (import.meta.main) {
  try {
    Deno.exit(await main());
  } catch (err) {
    console.error(`build:oci: ${(err as Error).message}`);
    Deno.exit(1);
  }
}
