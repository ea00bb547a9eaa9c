/**
 * How the console names each policy type to an admin: a label and one line saying what it manages, for the
 * type tiles of a new policy and the policy picker. Both are declared with the type in the shared registry
 * (shared/policy_types/<type>.ts); a type the console does not know (a newer server) shows its wire name.
 */
import { getPolicyType, listPolicyTypes } from "../../../shared/policy_types/mod.ts";

/** An admin's name for a policy type and what it manages. */
export interface PolicyTypeInfo {
  wireName: string;
  label: string;
  /** One line: what a policy of this type manages on a node. */
  description: string;
}

/** The label and description of `wireName`; its wire name when the console does not describe it. */
export function policyTypeInfo(wireName: string): PolicyTypeInfo {
  const def = getPolicyType(wireName);
  return { wireName, label: def?.label ?? wireName, description: def?.description ?? "" };
}

/** Wire names of the known types whose wire name or label contains `text` (case-insensitive). */
export function typesMatching(text: string): string[] {
  const q = text.trim().toLowerCase();
  if (!q) return [];
  return listPolicyTypes().map((t) => t.wireName).filter((t) =>
    t.toLowerCase().includes(q) || policyTypeInfo(t).label.toLowerCase().includes(q)
  );
}
