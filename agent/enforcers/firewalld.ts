/**
 * Firewalld enforcer: writes zone files under `/etc/firewalld/zones/`, checks the whole configuration
 * with firewalld's own tool before it takes effect, reloads a running firewalld, and reads the
 * effective zones back item by item.
 *
 * Combination rule (why zones merge although the spec says "one file per policy"): policies combine per zone,
 * one file per zone, lists unioned, flags ORed, single values from the highest-priority policy
 * (`firewalld/zones.ts`); the policies that lose are told so per item (INAPPLICABLE). What svc owns in a zone is
 * each kind of element at least one policy sets, and the target when one sets it; the rest comes from the zone as
 * it was before svc (`firewalld/zone_file.ts`). When no policy names a zone any more, its original comes back. A
 * policy whose zone names nothing to enforce is UNKNOWN (`0 of 0 setting(s) in effect`), like any empty policy.
 *
 * Safety: every value is re-validated here (server data is untrusted), rich rules are parsed into a
 * structure and rendered from it, the XML is produced by a writer that escapes everything. After the
 * files are written `firewall-offline-cmd --check-config` judges the whole configuration; on failure,
 * or when a running firewalld refuses the reload, every file goes back to what it was and all
 * Firewalld policies are reported ERROR with the tool's output.
 *
 * A desktop type over `desktop_enforcer.ts`: re-validation, firewalld missing (INAPPLICABLE and watched), the
 * writing and release, the put-back (its transaction: check, then reload) and the rollup are the skeleton's; this
 * module holds the plan, the activation and the report against firewalld's listings (`firewalld/tool.ts`).
 *
 * @module
 */

import { checkedContent } from "./revalidate.ts";
import type { FirewalldPolicy } from "../../shared/gen/svc/policy/v1/firewalld_pb.ts";
import { firewalldType } from "../../shared/policy_types/firewalld.ts";
import type { CachedPolicy, EnforcerIO, ItemResult, PolicyResult } from "../sync/types.ts";
import {
  type Checked,
  desktopEnforcer,
  type DesktopPlan,
  originalText,
  summarize,
} from "./desktop_enforcer.ts";
import { childText } from "../xml.ts";
import { mergeZones, type Owned } from "./firewalld/zones.ts";
import {
  baseZone,
  CONF_MARKER,
  FIREWALLD_CONF,
  FIREWALLD_ETC,
  FIREWALLD_STOCK,
  FIREWALLD_ZONES,
  isOwnZone,
  renderConf,
  renderZone,
} from "./firewalld/zone_file.ts";
import { type FirewalldState, type OfflineCmd, offlineCmd, outputOf, readZones } from "./firewalld/tool.ts";

export { isOwnZone } from "./firewalld/zone_file.ts";

function message(policy: CachedPolicy): FirewalldPolicy {
  return checkedContent(policy, firewalldType);
}

function describeKind(kind: string): string {
  return kind === "rule" ? "rich rule" : kind;
}

/** What the Firewalld type lands, and how it reaches firewalld. */
interface FirewalldPlan extends DesktopPlan {
  merge: ReturnType<typeof mergeZones>;
  nodeDefault: string;
  /** Whether firewalld runs on this node (it is reloaded and asked); otherwise the offline tool is. */
  running: boolean;
  offline: OfflineCmd;
}

async function planFiles(valid: Checked<FirewalldPolicy>[], io: EnforcerIO): Promise<FirewalldPlan | string> {
  const offline = await offlineCmd(io);
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
      const current = await originalText(io, FIREWALLD_CONF) ?? await io.fs.readTextFile(FIREWALLD_CONF);
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
  type: firewalldType.wireName,
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
  readBack: (io, { merge, running, offline, nodeDefault }) =>
    readZones(io, [...merge.zones.keys()], { running, offline, defaultZone: merge.defaultZone, nodeDefault }),
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
