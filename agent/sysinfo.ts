/**
 * Node facts for the heartbeat: host name, primary address, operating system
 * (`/etc/os-release`), desktop environments (session files in `/usr/share/xsessions` and
 * `/usr/share/wayland-sessions`, GNOME's version file), agent version and machine id. Files are
 * read under the agent's root directory; anything missing is simply left empty.
 *
 * @module
 */

import { VERSION } from "../shared/version.ts";
import { gnomeVersion } from "./catalogue.ts";
import type { RootFs } from "./fs.ts";
import type { Runner } from "./runner.ts";

/** What the heartbeat says about the node. */
export interface NodeFacts {
  fqdn: string;
  ipAddress: string;
  osName: string;
  osVersion: string;
  desktopEnvironments: string[];
  agentVersion: string;
  machineId: string;
}

/** Parses `KEY=value` lines of os-release (quotes and escapes removed). */
export function parseOsRelease(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line);
    if (!m) continue;
    let value = m[2];
    if (/^(["']).*\1$/.test(value)) value = value.slice(1, -1).replace(/\\(["'$`\\])/g, "$1");
    out[m[1]] = value;
  }
  return out;
}

/** Parses the `[Desktop Entry]` group of a `.desktop` file. */
export function parseDesktopEntry(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  let inEntry = false;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("[")) {
      inEntry = line === "[Desktop Entry]";
      continue;
    }
    const eq = line.indexOf("=");
    if (inEntry && eq > 0 && !line.startsWith("#")) out[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  return out;
}

const DESKTOP_NAMES: Record<string, string> = {
  GNOME: "GNOME",
  KDE: "KDE Plasma",
  XFCE: "Xfce",
  "X-Cinnamon": "Cinnamon",
  MATE: "MATE",
  LXQt: "LXQt",
  Budgie: "Budgie",
  Pantheon: "Pantheon",
  COSMIC: "COSMIC",
};

/** Desktop environments offered at login, with versions where known (e.g. `GNOME 47.2`). */
export async function desktopEnvironments(fs: RootFs, runner?: Runner): Promise<string[]> {
  const names = new Set<string>();
  for (const dir of ["/usr/share/xsessions", "/usr/share/wayland-sessions"]) {
    for (const file of await fs.readDir(dir)) {
      if (!file.endsWith(".desktop")) continue;
      const entry = parseDesktopEntry(await fs.readTextFile(`${dir}/${file}`).catch(() => undefined) ?? "");
      if (entry.Hidden === "true" || entry.NoDisplay === "true") continue;
      const desktop = (entry.DesktopNames ?? "").split(";").find((d) => d !== "");
      const name = desktop ? DESKTOP_NAMES[desktop] ?? desktop : entry.Name;
      if (name) names.add(name.replace(/\s*\((X11|Wayland)\)$/i, ""));
    }
  }
  const out: string[] = [];
  for (const name of [...names].sort()) {
    let version = "";
    if (name === "GNOME") {
      version = await gnomeVersion(fs);
    } else if (name === "KDE Plasma" && runner && fs.root === "/") {
      const result = await runner.run("plasmashell", ["--version"], { timeoutMs: 5000 });
      if (result.success) version = /(\d+(?:\.\d+)+)/.exec(result.stdout)?.[1] ?? "";
    }
    out.push(version ? `${name} ${version}` : name);
  }
  return out;
}

async function primaryAddress(): Promise<string> {
  // The interface of the default route, from the kernel's routing table.
  let iface = "";
  try {
    for (const line of (await Deno.readTextFile("/proc/net/route")).split("\n").slice(1)) {
      const [name, destination] = line.trim().split(/\s+/);
      if (destination === "00000000") {
        iface = name;
        break;
      }
    }
  } catch {
    // No procfs: fall back to the first non-loopback address.
  }
  const candidates = Deno.networkInterfaces().filter((i) =>
    i.family === "IPv4" && !i.address.startsWith("127.")
  );
  return (candidates.find((i) => i.name === iface) ?? candidates[0])?.address ?? "";
}

/** Collects the heartbeat facts. */
export async function collectNodeFacts(fs: RootFs, runner: Runner): Promise<NodeFacts> {
  const osRelease = parseOsRelease(
    await fs.readTextFile("/etc/os-release").catch(() => undefined) ??
      await fs.readTextFile("/usr/lib/os-release").catch(() => undefined) ?? "",
  );
  let fqdn = Deno.hostname();
  if (fs.root === "/") {
    const result = await runner.run("hostname", ["--fqdn"], { timeoutMs: 5000 });
    const name = result.stdout.trim();
    if (result.success && /^[A-Za-z0-9.-]+$/.test(name)) fqdn = name;
  }
  return {
    fqdn,
    ipAddress: await primaryAddress(),
    osName: osRelease.NAME ?? osRelease.ID ?? "",
    osVersion: osRelease.VERSION_ID ?? osRelease.VERSION ?? "",
    desktopEnvironments: await desktopEnvironments(fs, runner),
    agentVersion: VERSION,
    machineId: (await fs.readTextFile("/etc/machine-id").catch(() => undefined) ?? "").trim(),
  };
}
