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
 * @module
 */

import { checkedContent, revalidate } from "./revalidate.ts";
import { type FirewalldPolicy, FirewalldTarget } from "../../shared/gen/svc/policy/v1/firewalld_pb.ts";
import { canonicalRichRule, parseRichRule, richRuleElement } from "../../shared/firewalld_rich_rule.ts";
import { firewalldType } from "../../shared/policy_types/firewalld.ts";
import { sha256Hex } from "../sync/managed_files.ts";
import {
  type CachedPolicy,
  type Enforcer,
  type EnforcerIO,
  type ItemResult,
  type PolicyResult,
  rollupMessage,
  rollupStatus,
  type SyncResult,
} from "../sync/types.ts";
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

/** The Firewalld enforcer; see the module documentation. */
export const firewalldEnforcer: Enforcer = {
  type: "Firewalld",
  notifiesUsers: false,
  // firewalld installed after the policy arrived.
  watches: () => [FIREWALLD_ETC, "/usr/bin/firewall-offline-cmd", "/usr/lib/firewalld"],

  async sync(policies: CachedPolicy[], io: EnforcerIO): Promise<SyncResult> {
    const changed: string[] = [];
    const { valid, rejected } = revalidate("Firewalld", policies, { check: message, logger: io.logger });
    const results: PolicyResult[] = rejected;

    if (valid.length === 0 && io.managedPaths().length === 0) return { policies: results, changed };
    const tool = await io.runner.which("firewall-offline-cmd");
    const etc = await io.fs.stat(FIREWALLD_ETC);
    const installed = tool !== undefined && etc?.isDirectory === true;
    const configArgs = ["--system-config", await io.fs.resolve(FIREWALLD_ETC)];
    if (io.fs.root !== "/" && (await io.fs.stat(FIREWALLD_STOCK))?.isDirectory) {
      configArgs.push("--default-config", await io.fs.resolve(FIREWALLD_STOCK));
    }
    const offline = (args: string[]) => io.runner.run("firewall-offline-cmd", [...configArgs, ...args]);
    const running = installed && io.fs.root === "/" &&
      (await io.runner.run("firewall-cmd", ["--state"])).success;

    if (!installed) {
      for (const path of io.managedPaths()) if (await io.releaseManaged(path)) changed.push(path);
      for (const { policy } of valid) {
        results.push({
          policyId: policy.id,
          status: "INAPPLICABLE",
          message: tool === undefined
            ? "firewalld is not installed on this node (no firewall-offline-cmd)"
            : `firewalld is not installed on this node (no ${FIREWALLD_ETC})`,
          items: [],
        });
      }
      return { policies: results, changed };
    }

    const nodeDefault = (await offline(["--get-default-zone"])).stdout.trim() || "public";
    const merge = mergeZones(valid, nodeDefault);

    // Plan every file, then write; remember what was there to put it back on failure.
    const plan = new Map<string, string>();
    try {
      for (const zone of merge.zones.values()) {
        const path = `${FIREWALLD_ZONES}/${zone.name}.xml`;
        plan.set(path, renderZone(zone, await baseZone(io, path, zone.name)));
      }
      if (merge.defaultZone) {
        let current = await io.fs.readTextFile(FIREWALLD_CONF);
        if (io.managedPaths().includes(FIREWALLD_CONF)) {
          const backup = `${io.config.enrollment.dataDir}/state/backups/${await sha256Hex(FIREWALLD_CONF)}`;
          current = await Deno.readTextFile(backup).catch(() => current);
        }
        plan.set(FIREWALLD_CONF, renderConf(current, merge.defaultZone.value));
      }
    } catch (err) {
      const text = `cannot render the zone files: ${(err as Error).message}`;
      for (const { policy } of valid) {
        results.push({ policyId: policy.id, status: "ERROR", message: text, items: [] });
      }
      return { policies: results, changed };
    }

    const before = new Map<string, { managed: boolean; text?: string }>();
    const managedBefore = new Set(io.managedPaths());
    for (const path of new Set([...plan.keys(), ...managedBefore])) {
      before.set(path, { managed: managedBefore.has(path), text: await io.fs.readTextFile(path) });
    }
    const touched: string[] = [];
    const restore = async () => {
      for (const path of touched.reverse()) {
        const was = before.get(path)!;
        try {
          if (!was.managed) await io.releaseManaged(path);
          else if (was.text !== undefined) {
            await io.writeManaged(path, was.text, {
              isOwnContent: (t) => isOwnZone(t) || t.includes(CONF_MARKER),
            });
          }
        } catch (err) {
          io.logger.error("cannot restore a firewalld file", { path, error: (err as Error).message });
        }
      }
    };

    let failure: string | undefined;
    try {
      for (const [path, text] of plan) {
        touched.push(path);
        if (
          await io.writeManaged(path, text, {
            mode: 0o644,
            isOwnContent: (t) => isOwnZone(t) || t.includes(CONF_MARKER),
          })
        ) {
          changed.push(path);
        }
      }
      for (const path of managedBefore) {
        if (plan.has(path)) continue;
        touched.push(path);
        if (await io.releaseManaged(path)) changed.push(path);
      }
    } catch (err) {
      failure = `cannot write the zone files: ${(err as Error).message}`;
    }
    if (!failure && (changed.length > 0 || valid.length > 0)) {
      const check = await offline(["--check-config"]);
      if (!check.success) failure = `firewalld refused the configuration: ${outputOf(check)}`;
    }
    if (!failure && running && changed.length > 0) {
      const reload = await io.runner.run("firewall-cmd", ["--reload"]);
      if (!reload.success) failure = `firewall-cmd --reload failed: ${outputOf(reload)}`;
    }
    if (failure) {
      await restore();
      changed.length = 0;
      if (running) await io.runner.run("firewall-cmd", ["--reload"]);
      io.logger.error("firewalld configuration rolled back", { error: failure });
      for (const { policy } of valid) {
        results.push({
          policyId: policy.id,
          status: "ERROR",
          message: `${failure} (previous files restored)`,
          items: [],
        });
      }
      return { policies: results, changed };
    }
    if (valid.length === 0) return { policies: results, changed };

    // Read back what firewalld itself sees, zone by zone.
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
      : nodeDefault;

    for (const { policy, message: m } of valid) {
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
      const status = rollupStatus(items);
      const where = running
        ? "in the running firewalld"
        : "in the configuration (firewalld is not running; it applies at start)";
      results.push({
        policyId: policy.id,
        status,
        message: status === "COMPLIANT"
          ? `${items.filter((i) => i.status === "COMPLIANT").length} setting(s) in effect ${where}` +
            (items.some((i) => i.status === "INAPPLICABLE")
              ? "; some overridden by higher-priority policies"
              : "")
          : status === "INAPPLICABLE"
          ? "every setting is overridden by higher-priority policies"
          : rollupMessage(items, "setting(s)"),
        items,
      });
    }
    return { policies: results, changed };
  },
};

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
