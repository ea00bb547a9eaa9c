/**
 * The combination rule of the Firewalld type: policies combine per zone, one file per zone (firewalld knows a zone
 * by its file name, so two files can never define one zone). Lists (services, ports, source ports, protocols,
 * ICMP blocks, forward ports, rich rules, sources, interfaces) are unioned in priority order without duplicates;
 * flags (masquerade, ICMP block inversion) are on when any policy sets them; single values (target, short name,
 * description, and the node's default zone) come from the highest-priority policy that sets them, ties broken by
 * the smaller policy id. What each policy asked for is kept per zone for its report.
 *
 * @module
 */

import { type FirewalldPolicy, FirewalldTarget } from "../../../shared/gen/svc/policy/v1/firewalld_pb.ts";
import { canonicalRichRule, parseRichRule, richRuleElement } from "../../../shared/firewalld_rich_rule.ts";
import type { CachedPolicy } from "../../sync/types.ts";
import type { XmlNode } from "../../xml.ts";

const TARGETS: Record<number, string> = {
  [FirewalldTarget.DEFAULT]: "default",
  [FirewalldTarget.ACCEPT]: "ACCEPT",
  [FirewalldTarget.REJECT]: "%%REJECT%%",
  [FirewalldTarget.DROP]: "DROP",
};

/** One value of a merged zone and the policy it came from. */
export interface Owned<T> {
  value: T;
  policy: CachedPolicy;
}

/** List kinds: the zone-file element and how an entry is keyed and shown. */
export type ListKind =
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
export interface MergedZone {
  name: string;
  lists: Map<ListKind, Map<string, { node: XmlNode; policies: CachedPolicy[] }>>;
  flags: Map<"masquerade" | "icmp-block-inversion", CachedPolicy[]>;
  target?: Owned<string>;
  short?: Owned<string>;
  description?: Owned<string>;
}

/** What one policy asked for, per zone, for its report. */
export interface Intent {
  zone: string;
  items: {
    kind: ListKind | "masquerade" | "icmp-block-inversion" | "target" | "short" | "description";
    key: string;
  }[];
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

/** Merges the valid policies (sorted priority descending, then id) zone by zone; see the module documentation. */
export function mergeZones(
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
