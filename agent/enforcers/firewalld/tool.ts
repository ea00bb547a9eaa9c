/**
 * firewalld's own tools as the Firewalld type drives them: `firewall-offline-cmd` on the configuration under the
 * root (check, default zone, listings while firewalld is not running), `firewall-cmd` for the running daemon
 * (reload, runtime listings), and the read-back of the zones (their `--list-all` output parsed, their files).
 *
 * @module
 */

import { canonicalRichRule } from "../../../shared/firewalld_rich_rule.ts";
import type { RunResult } from "../../runner.ts";
import type { EnforcerIO } from "../../sync/types.ts";
import { parseXml, type XmlElement } from "../../xml.ts";
import { FIREWALLD_ETC, FIREWALLD_STOCK, FIREWALLD_ZONES } from "./zone_file.ts";
import type { ListKind } from "./zones.ts";

/** `firewall-offline-cmd` with `args` on the configuration under the agent's root. */
export type OfflineCmd = (args: string[]) => Promise<RunResult>;

/** The offline tool pointed at the root's configuration (and stock files, under a test root). */
export async function offlineCmd(io: EnforcerIO): Promise<OfflineCmd> {
  const configArgs = ["--system-config", await io.fs.resolve(FIREWALLD_ETC)];
  if (io.fs.root !== "/" && (await io.fs.stat(FIREWALLD_STOCK))?.isDirectory) {
    configArgs.push("--default-config", await io.fs.resolve(FIREWALLD_STOCK));
  }
  return (args) => io.runner.run("firewall-offline-cmd", [...configArgs, ...args]);
}

/** What a tool said, for a message: its non-empty lines (without the fallback-config noise), capped. */
export function outputOf(r: { stdout: string; stderr: string; code: number }): string {
  const text = `${r.stderr}\n${r.stdout}`.split("\n")
    .filter((l) =>
      l.trim() !== "" && !/Failed to load '.*firewalld\.conf'|Using fallback firewalld configuration/.test(l)
    )
    .join("; ").trim();
  return (text || `exit code ${r.code}`).slice(0, 2000);
}

/** What firewalld itself sees, zone by zone. */
export interface FirewalldState {
  listings: Map<string, ZoneListing | string>;
  /** Zone → its file under /etc/firewalld/zones as parsed (undefined when missing or broken). */
  files: Map<string, XmlElement | undefined>;
  effectiveDefault: string;
}

/**
 * Reads `zones` back as firewalld lists them (the running daemon, or the offline tool), their files, and the
 * default zone in effect (asked only when a policy sets it; `nodeDefault` otherwise).
 */
export async function readZones(
  io: EnforcerIO,
  zones: readonly string[],
  via: { running: boolean; offline: OfflineCmd; defaultZone?: unknown; nodeDefault: string },
): Promise<FirewalldState> {
  const listings = new Map<string, ZoneListing | string>();
  for (const zone of zones) {
    const r = via.running
      ? await io.runner.run("firewall-cmd", [`--zone=${zone}`, "--list-all"])
      : await via.offline([`--zone=${zone}`, "--list-all"]);
    listings.set(zone, r.success ? parseListing(r.stdout) : `cannot list zone ${zone}: ${outputOf(r)}`);
  }
  const files = new Map<string, XmlElement | undefined>();
  for (const zone of zones) {
    const text = await io.fs.readTextFile(`${FIREWALLD_ZONES}/${zone}.xml`);
    try {
      files.set(zone, text === undefined ? undefined : parseXml(text));
    } catch {
      files.set(zone, undefined);
    }
  }
  const effectiveDefault = via.defaultZone
    ? (await via.offline(["--get-default-zone"])).stdout.trim()
    : via.nodeDefault;
  return { listings, files, effectiveDefault };
}

/** Parsed `--list-all` output. */
export interface ZoneListing {
  target: string;
  flags: Record<string, boolean>;
  lists: Map<ListKind, Set<string>>;
}

const LISTING_FIELDS: Record<string, ListKind> = {
  services: "service",
  ports: "port",
  "source-ports": "source-port",
  protocols: "protocol",
  "icmp-blocks": "icmp-block",
  "forward-ports": "forward-port",
  "rich rules": "rule",
  sources: "source",
  interfaces: "interface",
};

/** Parses `firewall-cmd --zone=Z --list-all` output. */
export function parseListing(text: string): ZoneListing {
  const listing: ZoneListing = { target: "", flags: {}, lists: new Map() };
  let current: ListKind | undefined;
  for (const line of text.split("\n")) {
    if (line.startsWith("\t")) {
      const value = line.trim();
      if (current && value) {
        listing.lists.get(current)!.add(current === "rule" ? safeCanonical(value) : value);
      }
      continue;
    }
    const m = /^\s+([a-z -]+):\s?(.*)$/.exec(line);
    if (!m) continue;
    const [, key, value] = m;
    current = undefined;
    if (key === "target") listing.target = value.trim();
    else if (key === "masquerade" || key === "icmp-block-inversion") {
      listing.flags[key] = value.trim() === "yes";
    } else if (key in LISTING_FIELDS) {
      current = LISTING_FIELDS[key];
      const set = new Set(
        value.trim() === ""
          ? []
          : current === "rule" || current === "forward-port"
          ? [value.trim()]
          : value.trim().split(/\s+/),
      );
      listing.lists.set(current, set);
    }
  }
  return listing;
}

function safeCanonical(text: string): string {
  try {
    return canonicalRichRule(text);
  } catch {
    return text;
  }
}
