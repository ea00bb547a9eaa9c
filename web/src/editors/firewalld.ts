/**
 * Editor of the Firewalld policy type: the zone form generated from the content message, with labels and help
 * for every zone setting. It states the combination rule the agent applies (see `agent/enforcers/firewalld.ts`):
 * one file per zone, several policies naming a zone combine, single values come from the higher binding
 * priority.
 */
import type { FieldInfo } from "../../../shared/policy_types/browser.ts";
import type { EditorSpec } from "./spec.ts";

const ZONES = "Zones";

/** The port and protocol fields of one of a zone's port lists (`ports`, `sourcePorts`, `forwardPorts`). */
function portAndProtocol(list: string, port: string): Record<string, FieldInfo> {
  return {
    [`zones[].${list}[].port`]: { label: "Port", description: port },
    [`zones[].${list}[].protocol`]: { label: "Protocol", description: "tcp, udp, sctp or dccp." },
  };
}

/** The Firewalld editor. */
export const firewalldEditor: EditorSpec = {
  hints: {
    catalogue: {
      groups: [ZONES],
      fieldInfo: {
        zones: {
          group: ZONES,
          label: "Zones",
          merge: "per-member-union",
          description:
            "Each zone becomes /etc/firewalld/zones/<name>.xml. Policies naming the same zone are " +
            "combined: lists are joined, masquerade and ICMP block inversion are on when any policy sets them, " +
            "and the target, short name and description come from the policy bound with the higher priority. " +
            "Settings of a zone no policy sets stay as the node has them; firewalld checks the result before " +
            "it takes effect, and a refused combination is rolled back.",
        },
        "zones[].name": {
          label: "Zone name",
          description:
            "e.g. public, work or a new zone; letters, digits, '_' and '-', at most 17, starting with a " +
            "letter or digit. " +
            "Empty means the node's default zone.",
        },
        "zones[].target": {
          label: "Target",
          description:
            "What happens to packets no rule matches; unset leaves it to other policies or the zone.",
        },
        "zones[].services": { label: "Services", description: "firewalld service names, e.g. ssh, https." },
        "zones[].ports": { label: "Ports", description: "Open ports, e.g. 443/tcp or 5000-6000/udp." },
        ...portAndProtocol("ports", "A port (443) or a range (5000-6000)."),
        "zones[].sourcePorts": {
          label: "Source ports",
          description: "Traffic from these source ports is accepted.",
        },
        ...portAndProtocol("sourcePorts", "A port (53) or a range (1024-2048)."),
        ...portAndProtocol("forwardPorts", "Incoming port or range."),
        "zones[].forwardPorts[].toPort": {
          label: "To port",
          description: "Destination port or range; empty keeps the port.",
        },
        "zones[].forwardPorts[].toAddr": {
          label: "To address",
          description: "Destination IPv4 or IPv6 address; empty forwards to the node itself.",
        },
        "zones[].protocols": { label: "Protocols", description: "IP protocols accepted, e.g. gre." },
        "zones[].icmpBlocks": {
          label: "ICMP blocks",
          description: "ICMP types blocked, e.g. echo-request.",
        },
        "zones[].icmpBlockInversion": {
          label: "Invert ICMP blocks",
          description: "Block every ICMP type except the listed ones.",
        },
        "zones[].masquerade": {
          label: "Masquerade",
          description: "IPv4 masquerading for traffic leaving the zone.",
        },
        "zones[].forwardPorts": {
          label: "Forward ports",
          description: "Port forwarding to another port and/or address.",
        },
        "zones[].richRules": {
          label: "Rich rules",
          description: 'firewalld rich language, e.g. rule family="ipv4" source address="10.0.0.0/8" ' +
            'service name="ssh" accept. Every value is checked by its kind; unknown words are refused.',
        },
        "zones[].sources": {
          label: "Sources",
          description: "Addresses or networks (10.0.0.0/8), mac:<address> or ipset:<name> bound to the zone.",
        },
        "zones[].interfaces": {
          label: "Interfaces",
          description: "Network interfaces bound to the zone, e.g. eth0.",
        },
        "zones[].short": { label: "Short name", description: "Human-readable zone name." },
        "zones[].description": { label: "Description", description: "What the zone is for." },
        defaultZone: {
          group: ZONES,
          label: "Default zone",
          description: "Make this zone the node's default zone; empty leaves the node's default alone.",
        },
      },
    },
  },
};
