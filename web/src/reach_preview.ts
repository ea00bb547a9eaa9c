/**
 * What releasing a policy to some node groups will do there, before it is done: for each group, the other
 * enabled policies of the same type its nodes already receive, and who wins where they meet — by the type's
 * combination rule (spec: combination rule) and the agent's precedence (higher priority, then the lower
 * policy id; `provenance.ts`). Pure, so it is tested without a browser; the guided flow's review shows it.
 */
import { getPolicyType } from "../../shared/policy_types/mod.ts";
import type { JsonObject } from "./content.ts";
import { computeProvenance, type ProvenancePolicy } from "./provenance.ts";
import { settingLabel } from "./setting_diff.ts";

/** A policy as the preview weighs it. */
export interface Contender {
  id: string;
  name: string;
  /** Priority of the binding that delivers it to the group. */
  priority: number;
  value: JsonObject;
}

/** One setting both the new policy and another one set, and who wins it. */
export interface Overlap {
  key: string;
  label: string;
  winner: string;
  losers: string[];
}

/** The outcome in one group. */
export interface GroupPreview {
  /** The other policies of the type already enabled for the group, by precedence. */
  others: Array<{ name: string; priority: number }>;
  /** How the policies combine there, in one sentence. */
  rule: string;
  /** Settings set by more than one of them, with the winner (key-by-key types only). */
  overlaps: Overlap[];
  /** Whether the new policy wins every overlap (true without overlaps). */
  winsAll: boolean;
}

/** Agent precedence: priority descending, then id ascending. */
function before(a: Contender, b: Contender): number {
  return b.priority - a.priority || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** The preview for one group: `policy` released there at its priority beside `others`. */
export function previewGroup(type: string, policy: Contender, others: readonly Contender[]): GroupPreview {
  const sorted = [...others].sort(before);
  const list = sorted.map((o) => ({ name: o.name, priority: o.priority }));
  const merge = getPolicyType(type)?.merge;
  if (others.length === 0) {
    return {
      others: list,
      rule: "No other policy of this type reaches these nodes.",
      overlaps: [],
      winsAll: true,
    };
  }
  if (merge === "file_per_policy") {
    return {
      others: list,
      rule:
        "Each policy of this type writes its own file: they apply side by side, nobody overrides anybody.",
      overlaps: [],
      winsAll: true,
    };
  }
  if (merge === "union") {
    return {
      others: list,
      rule: "Policies of this type are combined: the rules of all of them apply together.",
      overlaps: [],
      winsAll: true,
    };
  }
  const all = [policy, ...others];
  const provenance = computeProvenance(all.map((p): ProvenancePolicy => ({
    id: p.id,
    name: p.name,
    type,
    priority: p.priority,
    binding: undefined,
    content: p.value,
    items: [],
  })));
  const overlaps = provenance
    .filter((s) => s.overridden.length > 0)
    .map((s) => ({
      key: s.key,
      label: settingLabel(type, s.key),
      winner: s.winner.policy.name,
      losers: s.overridden.map((c) => c.policy.name),
    }))
    .filter((o) => o.winner === policy.name || o.losers.includes(policy.name));
  const top = [policy, ...sorted].sort(before)[0];
  return {
    others: list,
    rule: top.id === policy.id
      ? `Where they set the same setting, this policy wins (priority ${policy.priority}).`
      : `Where they set the same setting, "${top.name}" wins (priority ${top.priority} over ${policy.priority}).`,
    overlaps,
    winsAll: overlaps.every((o) => o.winner === policy.name),
  };
}
