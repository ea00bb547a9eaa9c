/**
 * Per-setting provenance on one node: for every key a policy type manages there, the winning value, the
 * policy and the binding that set it, and what it overrode.
 *
 * The agent reports one compliance item per key and policy; a key that lost to a higher-priority policy is
 * INAPPLICABLE with "overridden by higher-priority policy "<name>" (<id>, priority <n>)". Those items name
 * the winner as the agent saw it. Keys not reported yet are predicted with the agent's own rule: the
 * highest priority wins, equal priorities go to the lower policy id.
 */
import { type JsonValue, valueAtKey } from "./content.ts";

/** One policy that reaches the node, with what provenance needs about it. */
export interface ProvenancePolicy {
  id: string;
  name: string;
  type: string;
  /** Highest priority among the enabled bindings that deliver it to this node. */
  priority: number;
  /** That binding. */
  binding: { id: string; nodeGroupName: string } | undefined;
  /** Content in json_name form. */
  content: JsonValue;
  /** Per-item results the node reported for it (empty when not reported yet). */
  items: ReadonlyArray<{ schema_id: string; key: string; status: string; message: string }>;
}

/** Who set or asked for a key. */
export interface Contender {
  policy: ProvenancePolicy;
  value: JsonValue | undefined;
  status: string;
  message: string;
}

/** One key of one type on the node. */
export interface SettingProvenance {
  type: string;
  schemaId: string;
  key: string;
  winner: Contender;
  /** Lower-priority policies that asked for the same key. */
  overridden: Contender[];
  /** True when the winner comes from the node's own report, false when predicted. */
  reported: boolean;
}

const OVERRIDDEN = /^overridden by higher-priority policy .*\(([0-9a-fA-F-]{36}), priority -?\d+\)$/;

/** Compares two policies the way the agent orders them: priority descending, then id ascending. */
function byPrecedence(a: ProvenancePolicy, b: ProvenancePolicy): number {
  return b.priority - a.priority || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

function normalize(status: string): string {
  return status.toLowerCase().replace(/^compliance_status_/, "");
}

/** Computes the provenance of every key of the given policies (all reaching one node). */
export function computeProvenance(policies: readonly ProvenancePolicy[]): SettingProvenance[] {
  const byKey = new Map<
    string,
    { type: string; schemaId: string; key: string; contenders: Contender[]; winnerId?: string }
  >();
  const add = (p: ProvenancePolicy, schemaId: string, key: string, status: string, message: string) => {
    const id = `${p.type}\u0000${key}`;
    let entry = byKey.get(id);
    if (!entry) byKey.set(id, entry = { type: p.type, schemaId, key, contenders: [] });
    if (!entry.schemaId && schemaId) entry.schemaId = schemaId;
    const found = valueAtKey(p.content, key);
    entry.contenders.push({
      policy: p,
      value: found.found ? found.value : undefined,
      status: normalize(status),
      message,
    });
    const m = OVERRIDDEN.exec(message);
    if (m && normalize(status) === "inapplicable") entry.winnerId = m[1];
  };
  for (const p of policies) {
    if (p.items.length > 0) {
      for (const item of p.items) add(p, item.schema_id, item.key, item.status, item.message);
    } else if (p.content && typeof p.content === "object" && !Array.isArray(p.content)) {
      for (const key of Object.keys(p.content)) add(p, "", key, "unknown", "not reported yet");
    }
  }
  const out: SettingProvenance[] = [];
  for (const entry of byKey.values()) {
    const sorted = [...entry.contenders].sort((a, b) => byPrecedence(a.policy, b.policy));
    const reportedWinner = entry.winnerId ? sorted.find((c) => c.policy.id === entry.winnerId) : undefined;
    const notOverridden = sorted.find((c) => !OVERRIDDEN.test(c.message) && c.status !== "unknown");
    const winner = reportedWinner ?? notOverridden ?? sorted[0];
    out.push({
      type: entry.type,
      schemaId: entry.schemaId,
      key: entry.key,
      winner,
      overridden: sorted.filter((c) => c !== winner),
      reported: winner.status !== "unknown",
    });
  }
  return out.sort((a, b) => a.type.localeCompare(b.type) || a.key.localeCompare(b.key));
}
