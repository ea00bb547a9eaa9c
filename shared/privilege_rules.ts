/**
 * How Privilege policies combine and what they become, shared by the agent (which renders the files) and the
 * server (whose guard refuses a set that leaves a node group without an administrator).
 *
 * Merge: every entry names a principal (a user, a group, or, through `local_sudo_group_not_admin`, the node's
 * local sudo groups). Per principal the policy with the higher priority decides; at equal priority deny beats
 * allow; at equal priority and effect the policy that sorts first (smaller id) is named. Across principals deny
 * also beats allow: the sudoers file lists every revocation after every grant (sudo applies the last line that
 * matches), and polkit is offered no identity a revocation covers.
 *
 * The sudoers text and the polkit identities are built from names the shared sanitizers accepted
 * (`sudoersUserName`, `sudoersGroupName`); a group name's inner spaces are escaped as sudoers(5) asks, and the
 * polkit identities become JavaScript string literals in `shared/polkit_js.ts`.
 *
 * @module
 */

import { PrivilegeEffect, type PrivilegePolicy } from "./gen/svc/policy/v1/privilege_pb.ts";

/** First line of the sudoers file svc writes. */
export const SUDOERS_MARKER =
  "# This file is managed by svc (Privilege); edits are overwritten by policy enforcement.";
/**
 * The sudoers file: in `/etc/sudoers.d`, read after the distribution's `/etc/sudoers` and, named `zz-…`, after
 * the other drop-ins, so its revocations are the last lines that match. No `.` in the name: sudo skips such files.
 */
export const SUDOERS_PATH = "/etc/sudoers.d/zz-svc-privilege";
/** Groups distributions grant every command in `/etc/sudoers`; the server assumes them when it cannot ask a node. */
export const USUAL_SUDO_GROUPS: readonly string[] = ["sudo", "wheel", "admin"];

/** A principal of a Privilege entry. */
export type PrincipalKind = "user" | "group" | "local-sudo-groups";

/** What one policy asks for one principal. */
export interface PrivilegeDecision {
  /** `user:<name>`, `group:<name>` or `local-sudo-groups`. */
  key: string;
  kind: PrincipalKind;
  /** The user or group name; empty for the local sudo groups. */
  name: string;
  allow: boolean;
  nopasswd: boolean;
  policyId: string;
  policyName: string;
  priority: number;
  /** Index of the entry in the policy, or -1 for `local_sudo_group_not_admin`. */
  entry: number;
}

/** A policy as the merge takes it. */
export interface PrivilegeInput {
  id: string;
  name: string;
  priority: number;
  content: PrivilegePolicy;
}

/** The outcome of {@link mergePrivilege}. */
export interface PrivilegeMerge {
  /** Principal key → the decision that applies. */
  winners: Map<string, PrivilegeDecision>;
  /** Policy id → every decision it asked for, in entry order (the option last). */
  byPolicy: Map<string, PrivilegeDecision[]>;
}

/** The decisions one policy asks for. */
export function decisionsOf(policy: PrivilegeInput): PrivilegeDecision[] {
  const base = { policyId: policy.id, policyName: policy.name, priority: policy.priority };
  const out: PrivilegeDecision[] = policy.content.entries.map((e, entry) => {
    const kind = e.user ? "user" : "group";
    const name = e.user || e.group;
    const allow = e.effect === PrivilegeEffect.ALLOW;
    return { ...base, key: `${kind}:${name}`, kind, name, allow, nopasswd: allow && e.sudoNopasswd, entry };
  });
  if (policy.content.localSudoGroupNotAdmin) {
    out.push({
      ...base,
      key: "local-sudo-groups",
      kind: "local-sudo-groups",
      name: "",
      allow: false,
      nopasswd: false,
      entry: -1,
    });
  }
  return out;
}

/** Merges policies per principal; see the module documentation. */
export function mergePrivilege(policies: readonly PrivilegeInput[]): PrivilegeMerge {
  const sorted = [...policies].sort((a, b) =>
    b.priority - a.priority || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  );
  const winners = new Map<string, PrivilegeDecision>();
  const byPolicy = new Map<string, PrivilegeDecision[]>();
  for (const policy of sorted) {
    const decisions = decisionsOf(policy);
    byPolicy.set(policy.id, decisions);
    for (const d of decisions) {
      const current = winners.get(d.key);
      const better = !current || d.priority > current.priority ||
        (d.priority === current.priority && !d.allow && current.allow);
      if (better) winners.set(d.key, d);
    }
  }
  return { winners, byPolicy };
}

/** Whether the node's local sudo groups are revoked by the merge. */
export function localGroupsRevoked(merge: PrivilegeMerge): boolean {
  return merge.winners.get("local-sudo-groups")?.allow === false;
}

/** Whether `decision` (a group) is revoked across principals: the group is one of the revoked local ones. */
function revokedAsLocal(
  merge: PrivilegeMerge,
  decision: PrivilegeDecision,
  localSudoGroups: readonly string[],
) {
  return decision.kind === "group" && localGroupsRevoked(merge) && localSudoGroups.includes(decision.name);
}

/**
 * The principals that administer the node: allowed users and groups the merge did not revoke, and the local sudo
 * groups unless revoked (by the option or by name). Empty means nobody but root.
 */
export function administrators(
  merge: PrivilegeMerge,
  localSudoGroups: readonly string[],
): { kind: "user" | "group"; name: string }[] {
  const out: { kind: "user" | "group"; name: string }[] = [];
  for (const d of [...merge.winners.values()].sort((a, b) => (a.key < b.key ? -1 : 1))) {
    if (d.allow && d.kind !== "local-sudo-groups" && !revokedAsLocal(merge, d, localSudoGroups)) {
      out.push({ kind: d.kind, name: d.name });
    }
  }
  if (!localGroupsRevoked(merge)) {
    for (const group of localSudoGroups) {
      const named = merge.winners.get(`group:${group}`);
      if (!named) out.push({ kind: "group", name: group });
    }
  }
  return out;
}

/** A name as a sudoers word: the inner spaces a group name may have are escaped. */
function sudoersWord(name: string): string {
  return name.replaceAll(" ", "\\ ");
}

/**
 * The sudoers file: grants first, then revocations (sudo applies the last matching line, so a revocation beats
 * any grant, in this file or read before it). `localSudoGroups` are the groups the revocation of the local sudo
 * groups names.
 */
export function renderSudoers(merge: PrivilegeMerge, localSudoGroups: readonly string[]): string {
  const winners = [...merge.winners.values()].sort((a, b) => (a.key < b.key ? -1 : 1));
  const who = (
    d: PrivilegeDecision,
  ) => (d.kind === "group" ? `%${sudoersWord(d.name)}` : sudoersWord(d.name));
  const grants = winners.filter((d) => d.allow).map((d) =>
    `${who(d)} ALL=(ALL:ALL) ${d.nopasswd ? "NOPASSWD: " : ""}ALL`
  );
  const revoked = new Set<string>();
  for (const d of winners) if (!d.allow && d.kind !== "local-sudo-groups") revoked.add(who(d));
  if (localGroupsRevoked(merge)) { for (const g of localSudoGroups) revoked.add(`%${sudoersWord(g)}`); }
  const lines = [
    SUDOERS_MARKER,
    "# Administrators granted by svc Privilege policies.",
    ...grants,
    "# Revoked: listed last, because sudo applies the last line that matches.",
    ...[...revoked].sort().map((w) => `${w} ALL=(ALL:ALL) !ALL`),
  ];
  return `${lines.join("\n")}\n`;
}

/**
 * The local sudo groups of a node: the groups its `/etc/sudoers` grants every command (`%sudo ALL=(ALL:ALL) ALL`,
 * `%wheel ALL=(ALL) ALL`), in the order they appear.
 */
export function localSudoGroupsOf(sudoersText: string): string[] {
  const out: string[] = [];
  for (const line of sudoersText.split("\n")) {
    const m = /^\s*%([A-Za-z0-9_][A-Za-z0-9_.-]*)\s+ALL\s*=\s*(?:\([^)]*\)\s*)?(?:NOPASSWD:\s*)?ALL\s*$/.exec(
      line,
    );
    if (m && !out.includes(m[1])) out.push(m[1]);
  }
  return out;
}
