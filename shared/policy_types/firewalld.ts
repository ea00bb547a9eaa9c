/**
 * Firewalld: zone definitions written as XML zone files, one file per zone (policies naming the same zone are
 * combined; the rule and why are in agent/enforcers/firewalld.ts). Zone names become file names;
 * services, protocols, ports, sources, interfaces and rich rules become XML attributes and firewalld input,
 * so each is checked. Rich rules are parsed into a structure and every attribute value is checked by its kind
 * (`shared/firewalld_rich_rule.ts`); the agent renders them from that structure only.
 */
import {
  type FirewalldPolicy,
  FirewalldPolicySchema,
  FirewalldTargetSchema,
} from "../gen/svc/policy/v1/firewalld_pb.ts";
import { defineType, enumNumbers } from "./define.ts";
import { richRuleProblem } from "../firewalld_rich_rule.ts";
import {
  firewalldName,
  firewalldSource,
  firewalldZoneName,
  interfaceName,
  ipAddress,
  maxLength,
  portProtocol,
  portSpec,
  required,
  singleLine,
} from "./sanitizers.ts";

/** The Firewalld policy type. */
export const firewalldType = defineType<FirewalldPolicy>({
  wireName: "Firewalld",
  label: "Firewall",
  description: "firewalld zones: services, ports, targets and rules.",
  schema: FirewalldPolicySchema,
  typedContentCase: "firewalldPolicy",
  merge: "file_per_policy",
  names: "proto",
  check(message, issues) {
    if (message.zones.length === 0) {
      issues.add("zones", "policy content needs at least one setting: add a zone");
    }
    issues.optional("default_zone", message.defaultZone, firewalldZoneName);
    const names = new Map<string, number>();
    message.zones.forEach((zone, i) => {
      const at = `zones[${i}]`;
      issues.optional(`${at}.name`, zone.name, firewalldZoneName);
      const first = names.get(zone.name);
      if (first !== undefined) {
        issues.add(`${at}.name`, `repeats zones[${first}]; put both in one zone entry`);
      } else names.set(zone.name, i);
      issues.enumValue(`${at}.target`, zone.target, enumNumbers(FirewalldTargetSchema), { allowZero: true });
      issues.each(`${at}.services`, zone.services, firewalldName);
      issues.each(`${at}.protocols`, zone.protocols, firewalldName);
      issues.each(`${at}.icmp_blocks`, zone.icmpBlocks, firewalldName);
      issues.each(`${at}.sources`, zone.sources, firewalldSource);
      issues.each(`${at}.interfaces`, zone.interfaces, interfaceName);
      issues.each(`${at}.rich_rules`, zone.richRules, maxLength(4096), richRuleProblem);
      issues.check(`${at}.short`, zone.short, singleLine, maxLength(256));
      // One line: firewalld's own zones describe themselves in one sentence, and a line break would land in
      // the zone file's XML and in `firewall-cmd --info-zone` output.
      issues.check(`${at}.description`, zone.description, singleLine, maxLength(4096));
      for (const [list, ports] of [["ports", zone.ports], ["source_ports", zone.sourcePorts]] as const) {
        ports.forEach((port, j) => {
          issues.check(`${at}.${list}[${j}].port`, port.port, required, portSpec);
          issues.check(`${at}.${list}[${j}].protocol`, port.protocol, required, portProtocol);
        });
      }
      zone.forwardPorts.forEach((fwd, j) => {
        const f = `${at}.forward_ports[${j}]`;
        issues.check(`${f}.port`, fwd.port, required, portSpec);
        issues.check(`${f}.protocol`, fwd.protocol, required, portProtocol);
        issues.optional(`${f}.to_port`, fwd.toPort, portSpec);
        issues.optional(`${f}.to_addr`, fwd.toAddr, ipAddress);
        if (!fwd.toPort && !fwd.toAddr) issues.add(f, "needs to_port, to_addr or both");
      });
    });
  },
});
