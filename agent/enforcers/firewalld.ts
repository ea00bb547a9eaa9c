/**
 * Firewalld enforcer: writes zone files under `/etc/firewalld/zones/`, checks the whole configuration
 * with firewalld's own tool before it takes effect, reloads a running firewalld, and reads the
 * effective zones back item by item.
 *
 * Combination rule (why zones merge although the spec says "one file per policy"): firewalld knows a
 * zone by its file name, so two files can never define one zone. Policies therefore combine per zone,
 * one file per zone: lists (services, ports, source ports, protocols, ICMP blocks, forward ports, rich
 * rules, sources, interfaces) are unioned in priority order without duplicates; flags (masquerade,
 * ICMP block inversion) are on when any policy sets them; single values (target, short name,
 * description, and the node's default zone) come from the highest-priority policy that sets them, ties
 * broken by the smaller policy id, and the policies that lose are told so per item (INAPPLICABLE).
 *
 * What svc owns in a zone: each kind of element that at least one policy sets, and the target when one
 * sets it. Everything else is taken from the zone as it was before svc (the backed-up original, or the
 * stock zone in `/usr/lib/firewalld/zones`), so interfaces bound by NetworkManager or an admin's own
 * settings of other kinds survive. When no policy names a zone any more, its original comes back.
 *
 * Safety: every value is re-validated here (server data is untrusted), rich rules are parsed into a
 * structure and rendered from it, the XML is produced by a writer that escapes everything. After the
 * files are written `firewall-offline-cmd --check-config` judges the whole configuration; on failure,
 * or when a running firewalld refuses the reload, every file goes back to what it was and all
 * Firewalld policies are reported ERROR with the tool's output.
 *
 * A desktop type over `desktop_enforcer.ts`: re-validation, firewalld missing (INAPPLICABLE and watched), the
 * writing and release, the put-back (its transaction: check, then reload) and the rollup are the skeleton's; this
 * module holds the zone merge, the rendering over the base zone and the reading of firewalld's listings.
 *
 * @module
 */

import { checkedContent } from "./revalidate.ts";
import { type FirewalldPolicy, FirewalldTarget } from "../../shared/gen/svc/policy/v1/firewalld_pb.ts";
import { canonicalRichRule, parseRichRule, richRuleElement } from "../../shared/firewalld_rich_rule.ts";
import { firewalldType } from "../../shared/policy_types/firewalld.ts";
import { sha256Hex } from "../sync/managed_files.ts";
import type { CachedPolicy, EnforcerIO, ItemResult, PolicyResult } from "../sync/types.ts";
import type { RunResult } from "../runner.ts";
import { type Checked, desktopEnforcer, type DesktopPlan, summarize } from "./desktop_enforcer.ts";
import { childText, parseXml, serializeXml, type XmlElement, type XmlNode } from "../xml.ts";

/** Node paths firewalld reads. */
export const FIREWALLD_ETC = "/etc/firewalld";
export const FIREWALLD_ZONES = `${FIREWALLD_ETC}/zones`;
export const FIREWALLD_CONF = `${FIREWALLD_ETC}/firewalld.conf`;
export const FIREWALLD_STOCK = "/usr/lib/firewalld";

/** First comment of every zone file svc writes. */
export const FIREWALLD_MARKER = "This zone is managed by svc; edits are overwritten by policy enforcement.";
const CONF_MARKER = "# DefaultZone is managed by svc; edits are overwritten by policy enforcement.";

const TARGETS: Record<number, string> = {
  [FirewalldTarget.DEFAULT]: "default",
  [FirewalldTarget.ACCEPT]: "ACCEPT",
  [FirewalldTarget.REJECT]: "%%REJECT%%",
  [FirewalldTarget.DROP]: "DROP",
};

/** Whether a zone file is svc's own. */
export function isOwnZone(text: string): boolean {
  return text.slice(0, 300).includes(FIREWALLD_MARKER);
}

/** One value of a merged zone and the policy it came from. */
interface Owned<T> {
  value: T;
  policy: CachedPolicy;
}

/** List kinds: the zone-file element and how an entry is keyed and shown. */
type ListKind =
  | "service"
  | "port"
  | "source-port"
  | "protocol"
  | "icmp-block"
  | "forward-port"
  | "rule"
  | "source"
  | "interface";

/** Zone as the policies want it. */
interface MergedZone {
  name: string;
  lists: Map<ListKind, Map<string, { node: XmlNode; policies: CachedPolicy[] }>>;
  flags: Map<"masquerade" | "icmp-block-inversion", CachedPolicy[]>;
  target?: Owned<string>;
  short?: Owned<string>;
  description?: Owned<string>;
}

/** What one policy asked for, per zone, for its report. */
interface Intent {
  zone: string;
  items: {
    kind: ListKind | "masquerade" | "icmp-block-inversion" | "target" | "short" | "description";
    key: string;
  }[];
}

function message(policy: CachedPolicy): FirewalldPolicy {
  return checkedContent(policy, firewalldType);
}

function portKey(port: string, protocol: string): string {
  return `${port}/${protocol}`;
}

function forwardKey(f: { port: string; protocol: string; toPort: string; toAddr: string }): string {
  return `port=${f.port}:proto=${f.protocol}:toport=${f.toPort}:toaddr=${f.toAddr}`;
}

function sourceNode(source: string): XmlNode {
  if (source.startsWith("ipset:")) return { name: "source", attrs: { ipset: source.slice(6) } };
  // firewalld writes MAC sources as address= too.
  return {
    name: "source",
    attrs: { address: source.startsWith("mac:") ? source.slice(4).toUpperCase() : source },
  };
}

function sourceKey(source: string): string {
  return source.startsWith("mac:") ? source.slice(4).toUpperCase() : source;
}

/** Merges the valid policies (sorted priority descending, then id) zone by zone. */
function mergeZones(
  valid: { policy: CachedPolicy; message: FirewalldPolicy }[],
  defaultZone: string,
): { zones: Map<string, MergedZone>; intents: Map<string, Intent[]>; defaultZone?: Owned<string> } {
  const zones = new Map<string, MergedZone>();
  const intents = new Map<string, Intent[]>();
  let wantedDefault: Owned<string> | undefined;
  for (const { policy, message: m } of valid) {
    if (m.defaultZone && !wantedDefault) wantedDefault = { value: m.defaultZone, policy };
    const own: Intent[] = [];
    for (const zone of m.zones) {
      const name = zone.name || wantedDefault?.value || defaultZone;
      let merged = zones.get(name);
      if (!merged) zones.set(name, merged = { name, lists: new Map(), flags: new Map() });
      const intent: Intent = { zone: name, items: [] };
      own.push(intent);
      const add = (kind: ListKind, key: string, node: XmlNode) => {
        let list = merged!.lists.get(kind);
        if (!list) merged!.lists.set(kind, list = new Map());
        const entry = list.get(key);
        if (entry) entry.policies.push(policy);
        else list.set(key, { node, policies: [policy] });
        intent.items.push({ kind, key });
      };
      for (const s of zone.services) add("service", s, { name: "service", attrs: { name: s } });
      for (const p of zone.ports) {
        add("port", portKey(p.port, p.protocol), {
          name: "port",
          attrs: { port: p.port, protocol: p.protocol },
        });
      }
      for (const p of zone.sourcePorts) {
        add("source-port", portKey(p.port, p.protocol), {
          name: "source-port",
          attrs: { port: p.port, protocol: p.protocol },
        });
      }
      for (const p of zone.protocols) add("protocol", p, { name: "protocol", attrs: { value: p } });
      for (const i of zone.icmpBlocks) add("icmp-block", i, { name: "icmp-block", attrs: { name: i } });
      for (const f of zone.forwardPorts) {
        const attrs: Record<string, string> = { port: f.port, protocol: f.protocol };
        if (f.toPort) attrs["to-port"] = f.toPort;
        if (f.toAddr) attrs["to-addr"] = f.toAddr;
        add("forward-port", forwardKey(f), { name: "forward-port", attrs });
      }
      for (const text of zone.richRules) {
        const rule = parseRichRule(text);
        add("rule", canonicalRichRule(text), richRuleElement(rule));
      }
      for (const s of zone.sources) add("source", sourceKey(s), sourceNode(s));
      for (const i of zone.interfaces) add("interface", i, { name: "interface", attrs: { name: i } });
      for (
        const [flag, on] of [["masquerade", zone.masquerade], [
          "icmp-block-inversion",
          zone.icmpBlockInversion,
        ]] as const
      ) {
        if (!on) continue;
        merged.flags.set(flag, [...(merged.flags.get(flag) ?? []), policy]);
        intent.items.push({ kind: flag, key: flag });
      }
      if (zone.target !== FirewalldTarget.UNSPECIFIED) {
        merged.target ??= { value: TARGETS[zone.target], policy };
        intent.items.push({ kind: "target", key: TARGETS[zone.target] });
      }
      if (zone.short) {
        merged.short ??= { value: zone.short, policy };
        intent.items.push({ kind: "short", key: zone.short });
      }
      if (zone.description) {
        merged.description ??= { value: zone.description, policy };
        intent.items.push({ kind: "description", key: zone.description });
      }
    }
    intents.set(policy.id, own);
  }
  return { zones, intents, defaultZone: wantedDefault };
}

const LIST_ORDER: ListKind[] = [
  "service",
  "port",
  "protocol",
  "icmp-block",
  "forward-port",
  "source-port",
  "rule",
  "interface",
  "source",
];

/** Renders a zone file: the base zone with the kinds svc owns replaced. */
export function renderZone(zone: MergedZone, base: XmlElement | undefined): string {
  const owned = new Set<string>([...zone.lists.keys(), ...zone.flags.keys()]);
  if (zone.short) owned.add("short");
  if (zone.description) owned.add("description");
  const attrs: Record<string, string> = {};
  for (const [k, v] of Object.entries(base?.attrs ?? {})) if (k !== "target" || !zone.target) attrs[k] = v;
  if (zone.target && zone.target.value !== "default") attrs.target = zone.target.value;
  const children: XmlNode[] = [];
  const short = zone.short?.value ?? (base ? childText(base, "short") : "");
  const description = zone.description?.value ?? (base ? childText(base, "description") : "");
  if (short) children.push({ name: "short", text: short });
  if (description) children.push({ name: "description", text: description });
  for (const child of base?.children ?? []) {
    if (child.name === "short" || child.name === "description" || owned.has(child.name)) continue;
    children.push(toNode(child));
  }
  for (const kind of LIST_ORDER) {
    for (const { node } of zone.lists.get(kind)?.values() ?? []) children.push(node);
  }
  for (const flag of zone.flags.keys()) children.push({ name: flag });
  return serializeXml({ name: "zone", attrs, children }, { leading: [{ comment: FIREWALLD_MARKER }] });
}

function toNode(element: XmlElement): XmlNode {
  const text = element.children.length ? undefined : element.text.trim() || undefined;
  return { name: element.name, attrs: { ...element.attrs }, children: element.children.map(toNode), text };
}

/** The zone as it was before svc: the backed-up original, the current foreign file, or the stock zone. */
async function baseZone(io: EnforcerIO, path: string, name: string): Promise<XmlElement | undefined> {
  let text: string | undefined;
  if (io.managedPaths().includes(path)) {
    // The sync engine keeps originals under {data_dir}/state/backups/<sha256 of the node path>.
    const backup = `${io.config.enrollment.dataDir}/state/backups/${await sha256Hex(path)}`;
    text = await Deno.readTextFile(backup).catch(() => undefined);
  } else {
    const current = await io.fs.readTextFile(path);
    if (current !== undefined && !isOwnZone(current)) text = current;
  }
  text ??= await io.fs.readTextFile(`${FIREWALLD_STOCK}/zones/${name}.xml`);
  if (text === undefined) return undefined;
  try {
    const root = parseXml(text, { maxLength: 1 << 20 });
    return root.name === "zone" ? root : undefined;
  } catch (err) {
    io.logger.warn("existing firewalld zone does not parse; only svc's settings are kept", {
      path,
      error: (err as Error).message,
    });
    return undefined;
  }
}

/** `firewalld.conf` with `DefaultZone=` set to `zone`. */
export function renderConf(current: string | undefined, zone: string): string {
  const lines = (current ?? "").split("\n").filter((l) => l !== CONF_MARKER);
  const at = lines.findIndex((l) => /^\s*DefaultZone\s*=/.test(l));
  const entry = [CONF_MARKER, `DefaultZone=${zone}`];
  if (at >= 0) lines.splice(at, 1, ...entry);
  else lines.unshift(...entry);
  const text = lines.join("\n");
  return text.endsWith("\n") ? text : `${text}\n`;
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

function describeKind(kind: string): string {
  return kind === "rule" ? "rich rule" : kind;
}

function outputOf(r: { stdout: string; stderr: string; code: number }): string {
  const text = `${r.stderr}\n${r.stdout}`.split("\n")
    .filter((l) =>
      l.trim() !== "" && !/Failed to load '.*firewalld\.conf'|Using fallback firewalld configuration/.test(l)
    )
    .join("; ").trim();
  return (text || `exit code ${r.code}`).slice(0, 2000);
}

/** What the Firewalld type lands, and how it reaches firewalld. */
interface FirewalldPlan extends DesktopPlan {
  merge: ReturnType<typeof mergeZones>;
  nodeDefault: string;
  /** Whether firewalld runs on this node (it is reloaded and asked); otherwise the offline tool is. */
  running: boolean;
  offline(args: string[]): Promise<RunResult>;
}

async function planFiles(valid: Checked<FirewalldPolicy>[], io: EnforcerIO): Promise<FirewalldPlan | string> {
  const configArgs = ["--system-config", await io.fs.resolve(FIREWALLD_ETC)];
  if (io.fs.root !== "/" && (await io.fs.stat(FIREWALLD_STOCK))?.isDirectory) {
    configArgs.push("--default-config", await io.fs.resolve(FIREWALLD_STOCK));
  }
  const offline = (args: string[]) => io.runner.run("firewall-offline-cmd", [...configArgs, ...args]);
  const files = new Map<string, string>();
  // Nothing to write and nothing to undo: no command to run.
  if (valid.length === 0 && io.managedPaths().length === 0) {
    return { files, merge: mergeZones([], ""), nodeDefault: "", running: false, offline };
  }
  const running = io.fs.root === "/" && (await io.runner.run("firewall-cmd", ["--state"])).success;
  const nodeDefault = valid.length ? (await offline(["--get-default-zone"])).stdout.trim() || "public" : "";
  const merge = mergeZones(valid, nodeDefault);
  try {
    for (const zone of merge.zones.values()) {
      const path = `${FIREWALLD_ZONES}/${zone.name}.xml`;
      files.set(path, renderZone(zone, await baseZone(io, path, zone.name)));
    }
    if (merge.defaultZone) {
      let current = await io.fs.readTextFile(FIREWALLD_CONF);
      if (io.managedPaths().includes(FIREWALLD_CONF)) {
        const backup = `${io.config.enrollment.dataDir}/state/backups/${await sha256Hex(FIREWALLD_CONF)}`;
        current = await Deno.readTextFile(backup).catch(() => current);
      }
      files.set(FIREWALLD_CONF, renderConf(current, merge.defaultZone.value));
    }
  } catch (err) {
    return `cannot render the zone files: ${(err as Error).message}`;
  }
  return { files, merge, nodeDefault, running, offline };
}

/** Whether firewalld takes the landed files: the offline check of the whole configuration, then a reload. */
async function activate(
  io: EnforcerIO,
  plan: FirewalldPlan,
  { changed, policies }: { changed: readonly string[]; policies: number },
): Promise<string | undefined> {
  if (changed.length === 0 && policies === 0) return undefined;
  const check = await plan.offline(["--check-config"]);
  if (!check.success) return `firewalld refused the configuration: ${outputOf(check)}`;
  if (!plan.running || changed.length === 0) return undefined;
  const reload = await io.runner.run("firewall-cmd", ["--reload"]);
  return reload.success ? undefined : `firewall-cmd --reload failed: ${outputOf(reload)}`;
}

/** What firewalld itself sees, zone by zone. */
interface FirewalldState {
  listings: Map<string, ZoneListing | string>;
  files: Map<string, XmlElement | undefined>;
  effectiveDefault: string;
}

async function readBack(io: EnforcerIO, plan: FirewalldPlan): Promise<FirewalldState> {
  const { merge, running, offline } = plan;
  const listings = new Map<string, ZoneListing | string>();
  for (const zone of merge.zones.keys()) {
    const r = running
      ? await io.runner.run("firewall-cmd", [`--zone=${zone}`, "--list-all"])
      : await offline([`--zone=${zone}`, "--list-all"]);
    listings.set(zone, r.success ? parseListing(r.stdout) : `cannot list zone ${zone}: ${outputOf(r)}`);
  }
  const files = new Map<string, XmlElement | undefined>();
  for (const zone of merge.zones.keys()) {
    const text = await io.fs.readTextFile(`${FIREWALLD_ZONES}/${zone}.xml`);
    try {
      files.set(zone, text === undefined ? undefined : parseXml(text));
    } catch {
      files.set(zone, undefined);
    }
  }
  const effectiveDefault = merge.defaultZone
    ? (await offline(["--get-default-zone"])).stdout.trim()
    : plan.nodeDefault;
  return { listings, files, effectiveDefault };
}

/** One policy's zone items against what firewalld lists. */
function report(
  { policy, message: m }: Checked<FirewalldPolicy>,
  { merge, running }: FirewalldPlan,
  { listings, files, effectiveDefault }: FirewalldState,
): Omit<PolicyResult, "policyId"> {
  const items: ItemResult[] = [];
  if (m.defaultZone) {
    const winner = merge.defaultZone!;
    items.push(
      winner.policy.id !== policy.id && winner.value !== m.defaultZone
        ? overridden("firewalld.conf", "default-zone", winner)
        : {
          schemaId: "firewalld.conf",
          key: "default-zone",
          status: effectiveDefault === m.defaultZone ? "COMPLIANT" : "NON_COMPLIANT",
          message: effectiveDefault === m.defaultZone
            ? `default zone is ${m.defaultZone}`
            : `default zone is ${effectiveDefault}, not ${m.defaultZone}`,
        },
    );
  }
  for (const intent of merge.intents.get(policy.id) ?? []) {
    const schemaId = `zone:${intent.zone}`;
    const listing = listings.get(intent.zone)!;
    const zone = merge.zones.get(intent.zone)!;
    for (const { kind, key } of intent.items) {
      const itemKey = `${describeKind(kind)}:${key}`;
      if (typeof listing === "string") {
        items.push({ schemaId, key: itemKey, status: "ERROR", message: listing });
        continue;
      }
      if (kind === "target" || kind === "short" || kind === "description") {
        const winner = zone[kind]!;
        if (winner.policy.id !== policy.id && winner.value !== key) {
          items.push(overridden(schemaId, kind, winner));
          continue;
        }
        const actual = kind === "target"
          ? listing.target
          : childText(files.get(intent.zone) ?? { name: "", attrs: {}, children: [], text: "" }, kind);
        const ok = actual === key;
        items.push({
          schemaId,
          key: kind,
          status: ok ? "COMPLIANT" : "NON_COMPLIANT",
          message: ok
            ? `${kind} is ${JSON.stringify(key)}`
            : `${kind} is ${JSON.stringify(actual)}, not ${JSON.stringify(key)}`,
        });
      } else if (kind === "masquerade" || kind === "icmp-block-inversion") {
        const ok = listing.flags[kind] === true;
        items.push({
          schemaId,
          key: kind,
          status: ok ? "COMPLIANT" : "NON_COMPLIANT",
          message: ok ? `${kind} is on` : `${kind} is off in firewalld`,
        });
      } else {
        const ok = listing.lists.get(kind)?.has(key) === true;
        items.push({
          schemaId,
          key: itemKey,
          status: ok ? "COMPLIANT" : "NON_COMPLIANT",
          message: ok
            ? `${describeKind(kind)} ${key} is in effect`
            : `firewalld does not list ${describeKind(kind)} ${key} in zone ${intent.zone}`,
        });
      }
    }
  }
  const where = running
    ? "in the running firewalld"
    : "in the configuration (firewalld is not running; it applies at start)";
  const summary = summarize(items, {
    inEffect: (ok, skipped) =>
      `${ok} setting(s) in effect ${where}` +
      (skipped ? "; some overridden by higher-priority policies" : ""),
    noneApplies: () => "every setting is overridden by higher-priority policies",
  });
  return { ...summary, items };
}

/** The Firewalld enforcer; see the module documentation. */
export const firewalldEnforcer = desktopEnforcer({
  type: "Firewalld",
  notifiesUsers: false,
  check: message,
  needs: [
    {
      command: "firewall-offline-cmd",
      missing: "firewalld is not installed on this node (no firewall-offline-cmd)",
    },
    {
      anyOf: [FIREWALLD_ETC],
      directory: true,
      missing: `firewalld is not installed on this node (no ${FIREWALLD_ETC})`,
    },
  ],
  // Stock zones and services installed later change what a zone file means.
  reads: [FIREWALLD_STOCK],
  isOwnContent: (text) => isOwnZone(text) || text.includes(CONF_MARKER),
  plan: planFiles,
  transaction: {
    what: "the zone files",
    activate,
    async reactivate(io, plan) {
      if (plan.running) await io.runner.run("firewall-cmd", ["--reload"]);
    },
    note: " (previous files restored)",
  },
  readBack: (io, plan) => readBack(io, plan),
  report: (checked, { plan, state }) => report(checked, plan, state),
});

function overridden(schemaId: string, key: string, winner: Owned<string>): ItemResult {
  return {
    schemaId,
    key,
    status: "INAPPLICABLE",
    message: `overridden by higher-priority policy "${winner.policy.name}" (${winner.policy.id}): ${
      JSON.stringify(winner.value)
    }`,
  };
}
