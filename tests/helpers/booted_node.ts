/**
 * A real Debian 12 node with systemd as PID 1, for tests of what runs as a service (DESIGN.md, "Booted node"):
 * a root built once per machine with mmdebstrap from Debian's packages (shared read-only by every test), an
 * overlay per node, and systemd started in private pid, mount, uts and ipc namespaces. The node shares the
 * host's network, so it reaches a test server on 127.0.0.1 and Debian's mirror through apt; nothing in it may
 * touch the host's network configuration or devices (udev, gettys, networking and time sync are masked).
 *
 * A node's overlay (its disk) outlives the node: {@linkcode BootedNode.reboot} kills PID 1 and boots the same
 * disk again, as a power cycle would.
 *
 * @module
 */

import { eventually } from "./agent_process.ts";

/** Debian packages of the shared root, beyond the `important` variant. */
const PACKAGES = [
  "systemd",
  "systemd-sysv",
  "dbus",
  "ca-certificates",
  "curl",
  "procps",
  "gnupg",
  "dconf-cli",
  "gsettings-desktop-schemas",
  "libkf5config-bin",
  "polkitd",
  "pamtester",
  "libpam-modules",
  // Privilege: sudo and visudo (not in the important variant).
  "sudo",
  // Its service is masked below: the node shares the host's network, so only firewall-offline-cmd may run.
  "firewalld",
];
/** Downloaded into the root's apt cache but not installed: tests install them inside a running node. */
const DOWNLOADED = ["firefox-esr", "chromium", "thunderbird", "flatpak"];
/** Downloaded without their recommendations (installed the same way): KDE's window manager, enough for Plasma. */
const DOWNLOADED_BARE = ["kwin-x11"];

/** Units that would touch the host's devices, consoles, network or clock. */
const MASKED = [
  "systemd-udevd.service",
  "systemd-udevd-control.socket",
  "systemd-udevd-kernel.socket",
  "systemd-udev-trigger.service",
  "systemd-udev-settle.service",
  "getty@tty1.service",
  "serial-getty@console.service",
  "console-getty.service",
  "getty.target",
  "networking.service",
  "systemd-timesyncd.service",
  "systemd-networkd.service",
  "systemd-resolved.service",
  // A running firewalld would rewrite the host's netfilter rules.
  "firewalld.service",
];

const ROOT_KEY = `bookworm-v1-${[...PACKAGES, "+", ...DOWNLOADED, "+", ...DOWNLOADED_BARE].join(",")}`;

/** Why booted nodes cannot run here, or undefined. */
export async function bootedNodeUnavailable(): Promise<string | undefined> {
  if (Deno.uid() !== 0) return "needs root (mount namespaces, overlayfs, chroot)";
  for (const tool of ["mmdebstrap", "unshare", "nsenter"]) {
    const out = await new Deno.Command("sh", { args: ["-c", `command -v ${tool}`], stdout: "null" }).output();
    if (!out.success) {
      return `${tool} is missing (Debian package ${tool === "mmdebstrap" ? "mmdebstrap" : "util-linux"})`;
    }
  }
  const probe = await new Deno.Command("unshare", {
    args: ["--fork", "--pid", "--mount", "true"],
    stderr: "null",
  })
    .output();
  if (!probe.success) return "private pid and mount namespaces are not allowed here";
  return undefined;
}

async function run(cmd: string, args: string[], options: { stdin?: string } = {}): Promise<CommandResult> {
  const child = new Deno.Command(cmd, {
    args,
    stdin: options.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (options.stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(options.stdin));
    await writer.close();
  }
  const out = await child.output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

/** What a command printed and how it ended. */
export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * The shared root, built on first use (about a minute; later calls and other test processes wait for it and
 * reuse it). `SVC_BOOTED_ROOT_DIR` moves the cache.
 */
export async function bootedRoot(): Promise<string> {
  const base = Deno.env.get("SVC_BOOTED_ROOT_DIR") ?? "/var/tmp/svc-booted";
  await Deno.mkdir(base, { recursive: true });
  const hash = Array.from(
    new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(ROOT_KEY))).slice(0, 6),
    (b) => b.toString(16).padStart(2, "0"),
  ).join("");
  const root = `${base}/root-${hash}`;
  const script = `
set -e
[ -e "${root}/.svc-complete" ] && exit 0
rm -rf "${root}.partial"
mmdebstrap --quiet --variant=important --include=${PACKAGES.join(",")} \\
  --skip=cleanup/apt/lists --skip=cleanup/apt/cache \\
  --customize-hook='chroot "$1" apt-get install --download-only -y -q ${DOWNLOADED.join(" ")}' \\
  --customize-hook='chroot "$1" apt-get install --download-only --no-install-recommends -y -q ${
    DOWNLOADED_BARE.join(" ")
  }' \\
  bookworm "${root}.partial"
rm -rf "${root}"
mv "${root}.partial" "${root}"
touch "${root}/.svc-complete"
`;
  // One builder at a time across test processes; the others wait on the lock and find it built.
  const r = await run("flock", [`${base}/build.lock`, "sh", "-c", script]);
  if (r.code !== 0) throw new Error(`mmdebstrap could not build the node root:\n${r.stdout}\n${r.stderr}`);
  return root;
}

/** Options of {@linkcode bootNode}. */
export interface BootOptions {
  /** Host name of the node; default `svc-node`. */
  hostname?: string;
}

/** A running node; see the module documentation. */
export class BootedNode {
  /** Host path of the node's disk (the overlay's upper directory holds what changed). */
  readonly dir: string;
  readonly #root: string;
  readonly #hostname: string;
  #child: Deno.ChildProcess | undefined;
  #pid = 0;
  #console = "";

  private constructor(root: string, dir: string, hostname: string) {
    this.#root = root;
    this.dir = dir;
    this.#hostname = hostname;
  }

  /** Boots a fresh node on the shared root. */
  static async boot(options: BootOptions = {}): Promise<BootedNode> {
    const root = await bootedRoot();
    const dir = await Deno.makeTempDir({ prefix: "svc-node-" });
    for (const d of ["upper", "work", "merged"]) await Deno.mkdir(`${dir}/${d}`);
    const node = new BootedNode(root, dir, options.hostname ?? "svc-node");
    await node.#start();
    return node;
  }

  /** PID (in the host's namespace) of the node's systemd. */
  get pid(): number {
    return this.#pid;
  }

  /** Host path of a node path on the running node (through its mount namespace). */
  hostPath(path: string): string {
    return `/proc/${this.#pid}/root${path}`;
  }

  async #start(): Promise<void> {
    const m = `${this.dir}/merged`;
    const mask = MASKED.map((u) => `ln -sf /dev/null ${m}/etc/systemd/system/${u}`).join("; ");
    const script = `set -e
mount -t overlay overlay -o lowerdir=${this.#root},upperdir=${this.dir}/upper,workdir=${this.dir}/work ${m}
mount -t proc proc ${m}/proc
mount --rbind /sys ${m}/sys
mount --rbind /dev ${m}/dev
mount -t tmpfs tmpfs ${m}/run
mount -t tmpfs tmpfs ${m}/tmp
${mask}
echo ${this.#hostname} > ${m}/etc/hostname
hostname ${this.#hostname}
exec chroot ${m} /lib/systemd/systemd --system`;
    this.#child = new Deno.Command("unshare", {
      args: ["--fork", "--pid", "--mount", "--uts", "--ipc", "--propagation", "private", "sh", "-c", script],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const pump = async (s: ReadableStream<Uint8Array>) => {
      for await (const chunk of s.pipeThrough(new TextDecoderStream())) {
        this.#console = (this.#console + chunk).slice(-20_000);
      }
    };
    void pump(this.#child.stdout).catch(() => {});
    void pump(this.#child.stderr).catch(() => {});
    const unsharePid = this.#child.pid;
    await eventually(
      async () => {
        const children = await Deno.readTextFile(`/proc/${unsharePid}/task/${unsharePid}/children`).catch(
          () => "",
        );
        const pid = Number(children.trim().split(/\s+/)[0]);
        if (!pid) return false;
        const exe = await Deno.readLink(`/proc/${pid}/exe`).catch(() => "");
        if (!exe.endsWith("/systemd")) return false;
        this.#pid = pid;
        return true;
      },
      60_000,
      "the node's systemd started",
      () => this.#console,
    );
    // Running, or degraded (a unit that needs real hardware failed): either way the node is up.
    await eventually(
      async () => {
        const r = await this.exec(["systemctl", "is-system-running"]);
        return /^(running|degraded)/.test(r.stdout);
      },
      120_000,
      "the node finished booting",
      () => this.#console,
    );
  }

  /** Runs a command inside the node as root (`nsenter` into its namespaces and root). */
  exec(argv: string[], options: { stdin?: string } = {}): Promise<CommandResult> {
    const p = this.#pid;
    return run("nsenter", [
      "--target",
      String(p),
      "--mount",
      "--pid",
      "--uts",
      "--ipc",
      `--root=/proc/${p}/root`,
      `--wd=/proc/${p}/root`,
      ...argv,
    ], options);
  }

  /** Runs a shell script inside the node; throws with its output when it fails. */
  async sh(script: string): Promise<string> {
    const r = await this.exec(["/bin/sh", "-c", script]);
    if (r.code !== 0) {
      throw new Error(`in the node, "${script.slice(0, 200)}" exited ${r.code}:\n${r.stdout}\n${r.stderr}`);
    }
    return r.stdout;
  }

  /** The unit's journal (for failure messages). */
  async journal(unit: string, lines = 80): Promise<string> {
    const r = await this.exec([
      "journalctl",
      "-u",
      unit,
      "-n",
      String(lines),
      "--no-pager",
      "-o",
      "short-precise",
    ]);
    return r.stdout + r.stderr;
  }

  /** Power off: SIGKILL to the node's PID 1 ends everything in it. */
  async kill(): Promise<void> {
    if (!this.#child) return;
    try {
      Deno.kill(this.#pid, "SIGKILL");
    } catch {
      // Already gone.
    }
    await this.#child.status;
    this.#child = undefined;
  }

  /** Power cycle: the same disk boots again. */
  async reboot(): Promise<void> {
    await this.kill();
    await Deno.remove(`${this.dir}/work`, { recursive: true }).catch(() => {});
    await Deno.mkdir(`${this.dir}/work`);
    await this.#start();
  }

  /** Kills the node and deletes its disk. */
  async dispose(): Promise<void> {
    await this.kill();
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }
}
