/**
 * The policy lifecycle as the UI offers it (spec: States and transitions, policy artifact state): which
 * transitions a policy's state allows, which permission each needs, and why the server would refuse one —
 * so the refusal is explained before the person tries. The server enforces the same rules.
 */
import type { PolicyRow } from "./api_types.ts";

/** What a lifecycle action needs to know about a policy, and why it may be refused. */
export interface LifecycleAction {
  label: string;
  target: "released" | "archived" | "draft";
  /** Permissions the server requires, all of them (a state change needs policy:edit, a release also policy:release). */
  permissions: string[];
  /** A reason the server would refuse, shown instead of letting the person try. */
  refusal?: string;
}

/** The transitions the spec allows from a policy's state, with refusals explained up front. */
export function lifecycleActions(p: Pick<PolicyRow, "state" | "enabled_bindings_count">): LifecycleAction[] {
  const bindings = p.enabled_bindings_count;
  const toDraft: LifecycleAction = {
    label: "Move to draft",
    target: "draft",
    permissions: ["policy:edit"],
    refusal: bindings > 0
      ? `${bindings} enabled binding${bindings === 1 ? "" : "s"} deliver${
        bindings === 1 ? "s" : ""
      } it; disable ${bindings === 1 ? "it" : "them"} first`
      : undefined,
  };
  switch (p.state) {
    case "draft":
      return [{ label: "Release", target: "released", permissions: ["policy:edit", "policy:release"] }];
    case "released":
      return [{ label: "Archive", target: "archived", permissions: ["policy:edit"] }, toDraft];
    case "archived":
      return [toDraft];
  }
}
