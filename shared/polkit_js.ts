/**
 * Polkit rules files generated from a {@link PolkitPolicy} structure, never by pasting text: every string from
 * the server (action ids, prefixes, user and group names, action-detail keys and values, rule names and
 * descriptions) becomes a JavaScript string literal through {@link jsString}, which escapes quotes,
 * backslashes, every control character, U+2028/U+2029 (line terminators for JavaScript) and `<`/`>`; names and
 * descriptions appear only inside line comments as such literals, so no character can end a comment or a
 * literal. The agent additionally parses the result with a JavaScript parser and refuses anything that is not
 * exactly the expected `polkit.addRule` calls (`agent/enforcers/polkit_script.ts`); the web editor uses the same
 * renderer for its preview.
 *
 * File order is the priority rule: polkitd reads the files of `/etc/polkit-1/rules.d` and
 * `/usr/share/polkit-1/rules.d` in lexical order of their names and the first rule that returns a result
 * decides. {@link polkitFileName} sorts a higher binding priority first, as for every other policy type, and
 * puts svc's files before the distribution's (`50-default.rules`).
 *
 * @module
 */

import { type PolkitPolicy, PolkitResult } from "./gen/svc/policy/v1/polkit_pb.ts";

/** First line of every rules file svc writes. */
export const POLKIT_MARKER = "// This file is managed by svc; edits are overwritten by policy enforcement.";

/** Directory polkitd reads administrator rules from. */
export const POLKIT_RULES_DIR = "/etc/polkit-1/rules.d";

/** `polkit.Result` member per result. */
export const POLKIT_RESULT_NAMES: Record<number, string> = {
  [PolkitResult.NO]: "NO",
  [PolkitResult.YES]: "YES",
  [PolkitResult.AUTH_SELF]: "AUTH_SELF",
  [PolkitResult.AUTH_SELF_KEEP]: "AUTH_SELF_KEEP",
  [PolkitResult.AUTH_ADMIN]: "AUTH_ADMIN",
  [PolkitResult.AUTH_ADMIN_KEEP]: "AUTH_ADMIN_KEEP",
  [PolkitResult.NOT_HANDLED]: "NOT_HANDLED",
};

/**
 * A JavaScript string literal for `value`: JSON's escaping plus `\u` escapes for U+2028, U+2029, `<` and `>`
 * and every character outside printable ASCII, so the literal is one line of ASCII whatever the input.
 */
export function jsString(value: string): string {
  return JSON.stringify(value).replace(
    /[^\x20-\x7e]|[<>]/g,
    (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/**
 * File name of a policy's rules: `10-svc-<inverted priority>-<policy id>.rules`. The priority (int32) is
 * stored as 2147483647 − priority in ten digits, so a higher priority sorts (and is evaluated) first; equal
 * priorities sort by policy id, as the agent orders policies everywhere. Only letters, digits and `-` of the
 * id are kept (at most 64), so the name cannot leave the directory.
 */
export function polkitFileName(policyId: string, priority: number): string {
  const inverted = (2147483647 - Math.trunc(priority)).toString().padStart(10, "0");
  const id = policyId.replace(/[^A-Za-z0-9-]/g, "").slice(0, 64) || "policy";
  return `10-svc-${inverted}-${id}.rules`;
}

function anyOf(parts: string[]): string {
  return `(${parts.join(" || ")})`;
}

/** The JavaScript of one policy's rules file (without a trailing timestamp: the same input gives the same bytes). */
export function renderPolkitRules(
  policy: PolkitPolicy,
  about: { policyId: string; policyName: string },
): string {
  const out: string[] = [
    POLKIT_MARKER,
    `// Policy ${jsString(about.policyName)} (${jsString(about.policyId)})`,
    "",
  ];
  policy.rules.forEach((rule, i) => {
    const result = POLKIT_RESULT_NAMES[rule.result];
    if (!result) throw new Error(`rules[${i}] has no result`);
    out.push(`// Rule ${i}: ${jsString(rule.name)}`);
    if (rule.description) out.push(`// ${jsString(rule.description)}`);
    out.push("polkit.addRule(function (action, subject) {");
    const actions = [
      ...rule.actionIds.map((id) => `action.id === ${jsString(id)}`),
      ...rule.actionPrefixes.map((p) => `action.id.indexOf(${jsString(p)}) === 0`),
    ];
    if (actions.length === 0) throw new Error(`rules[${i}] names no action`);
    out.push(`  if (!${anyOf(actions)}) return;`);
    const m = rule.match;
    if (m) {
      const who = [
        ...m.unixUsers.map((u) => `subject.user === ${jsString(u)}`),
        ...m.unixGroups.map((g) => `subject.isInGroup(${jsString(g)})`),
      ];
      if (who.length) out.push(`  if (!${anyOf(who)}) return;`);
      const not = [
        ...m.excludeUnixUsers.map((u) => `subject.user === ${jsString(u)}`),
        ...m.excludeUnixGroups.map((g) => `subject.isInGroup(${jsString(g)})`),
      ];
      if (not.length) out.push(`  if ${anyOf(not)} return;`);
      if (m.requireLocal) out.push("  if (!subject.local) return;");
      if (m.requireActive) out.push("  if (!subject.active) return;");
    }
    for (const c of rule.actionConditions) {
      out.push(
        `  if (action.lookup(${jsString(c.key)}) ${c.negate ? "===" : "!=="} ${jsString(c.value)}) return;`,
      );
    }
    out.push(`  return polkit.Result.${result};`, "});", "");
  });
  return out.join("\n");
}

/**
 * First line of the administrator-identities file of the Privilege type. Not {@link POLKIT_MARKER}: the Polkit
 * type removes files carrying its marker that none of its policies wants.
 */
export const POLKIT_ADMIN_MARKER =
  "// This file is managed by svc (Privilege); edits are overwritten by policy enforcement.";

/**
 * The administrator-identities file of the Privilege type: polkitd asks its admin rules in file-name order and
 * the first that answers decides, so `05-…` comes before the distribution's (Debian `40-debian-sudo.rules`,
 * upstream `50-default.rules`).
 */
export const POLKIT_ADMIN_RULES_PATH = `${POLKIT_RULES_DIR}/05-svc-privilege.rules`;

/**
 * The rules file naming polkit's administrator identities (`unix-user:alice`, `unix-group:staff`): one
 * `polkit.addAdminRule` whose function returns them, each a {@link jsString} literal.
 */
export function renderPolkitAdminRule(identities: readonly string[]): string {
  return [
    POLKIT_ADMIN_MARKER,
    "// Administrator identities from svc Privilege policies: polkit offers these when it asks for an administrator.",
    "polkit.addAdminRule(function (action, subject) {",
    `  return [${identities.map(jsString).join(", ")}];`,
    "});",
    "",
  ].join("\n");
}
