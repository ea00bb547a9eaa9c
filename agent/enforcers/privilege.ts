/**
 * Privilege enforcer: who administers the node. Two files, both from the merge of every Privilege policy
 * (`shared/privilege_rules.ts`: per principal the higher priority decides, deny beats allow):
 *
 * - `/etc/sudoers.d/zz-svc-privilege` (mode 0440): grants, then revocations (`!ALL`), so a revocation is the last
 *   line sudo finds. Before it lands `visudo -c -f -` checks it; after it lands (on the node itself) `visudo -c`
 *   checks the whole configuration, and a refusal puts the previous file back. sudo is never left broken: on
 *   failure nothing lands and every policy is ERROR with visudo's words.
 * - `/etc/polkit-1/rules.d/05-svc-privilege.rules`: one `polkit.addAdminRule` returning the administrator
 *   identities (allowed users and groups, and the node's local sudo groups unless revoked), rendered as string
 *   literals and refused unless a JavaScript parser proves it is exactly that call (`polkit_script.ts`). Its marker
 *   differs from the Polkit type's, which never takes it for one of its own files. Written only where polkit is.
 *
 * A desktop type over `desktop_enforcer.ts`: re-validation, sudo missing → INAPPLICABLE and watched, landing, and
 * the rollback of a refused configuration.
 *
 * Compliance reads the node back: both files against the rendering; on the node itself (root `/`) `visudo -c`,
 * `sudo -l -U <user> /usr/bin/true` for every named user and for the local members of every named group (does sudo
 * let them run a command, as the merge says?), and the administrator identities polkitd really offers, asked of it
 * with pkcheck's own text agent (a process of `nobody` asks for an action that needs an administrator; the agent
 * lists whom it would accept, and no password is ever given). A revoked user whom polkit still offers through a
 * group is NON_COMPLIANT: polkit cannot take a member out of a group.
 *
 * @module
 */

import type { PrivilegePolicy } from "../../shared/gen/svc/policy/v1/privilege_pb.ts";
import { privilegeType } from "../../shared/policy_types/privilege.ts";
import {
  POLKIT_ADMIN_MARKER,
  POLKIT_ADMIN_RULES_PATH,
  renderPolkitAdminRule,
} from "../../shared/polkit_js.ts";
import {
  administrators,
  localGroupsRevoked,
  localSudoGroupsOf,
  mergePrivilege,
  type PrivilegeDecision,
  type PrivilegeMerge,
  renderSudoers,
  SUDOERS_MARKER,
  SUDOERS_PATH,
} from "../../shared/privilege_rules.ts";
import { parsePkactionVerbose } from "../catalogue.ts";
import type { EnforcerIO, ItemResult } from "../sync/types.ts";
import {
  type Checked,
  desktopEnforcer,
  type DesktopPlan,
  type Landed,
  summarize,
} from "./desktop_enforcer.ts";
import { accountGroups } from "./node_accounts.ts";
import { checkPolkitAdminScript, PolkitScriptError } from "./polkit_script.ts";
import { checkedContent } from "./revalidate.ts";

/** What a sync of the Privilege policies wants. */
interface PrivilegePlan extends DesktopPlan {
  merge: PrivilegeMerge;
  localGroups: string[];
  sudoers: string;
  /** The polkit file's text, when polkit is on the node. */
  polkit?: string;
  identities: string[];
}

/** What sudo says of one account: may it run a command, and does the account exist. */
type SudoAnswer = "allowed" | "refused" | "unknown-user" | { error: string };

/** What the node shows after the write. */
interface PrivilegeState {
  files: Map<string, { text?: string } | { error: string }>;
  /** `visudo -c` of the whole configuration (root `/` only): undefined when not asked. */
  visudo?: { ok: boolean; words: string };
  /** Account → what `sudo -l -U` answered (root `/` only). */
  sudo: Map<string, SudoAnswer>;
  accounts: Map<string, Set<string>>;
  /** The names polkitd offers as administrators, or why they could not be asked; undefined when not asked. */
  polkit?: { names: string[] } | { error: string };
}

/** The identities polkit is given for the administrators of `merge`; root alone when there are none. */
function polkitIdentities(merge: PrivilegeMerge, localGroups: readonly string[]): string[] {
  const admins = administrators(merge, localGroups).map((a) => `unix-${a.kind}:${a.name}`);
  return admins.length > 0 ? admins : ["unix-user:root"];
}

async function plan(valid: Checked<PrivilegePolicy>[], io: EnforcerIO): Promise<PrivilegePlan | string> {
  const localGroups = localSudoGroupsOf((await io.fs.readTextFile("/etc/sudoers")) ?? "");
  const merge = mergePrivilege(valid.map(({ policy, message }) => ({
    id: policy.id,
    name: policy.name,
    priority: policy.priority,
    content: message,
  })));
  const sudoers = renderSudoers(merge, localGroups);
  const identities = polkitIdentities(merge, localGroups);
  // No valid policy: nothing of svc's stays.
  if (valid.length === 0) return { files: new Map(), merge, localGroups, sudoers, identities };
  const files = new Map([[SUDOERS_PATH, sudoers]]);
  let polkit: string | undefined;
  const hasPolkit = (await io.fs.stat("/etc/polkit-1"))?.isDirectory ||
    (await io.fs.stat("/usr/share/polkit-1"))?.isDirectory;
  if (hasPolkit) {
    polkit = renderPolkitAdminRule(identities);
    try {
      checkPolkitAdminScript(polkit, identities.length);
    } catch (err) {
      if (err instanceof PolkitScriptError) {
        return `the polkit administrator rule was refused: ${err.message}`;
      }
      throw err;
    }
    files.set(POLKIT_ADMIN_RULES_PATH, polkit);
  }
  return { files, modes: new Map([[SUDOERS_PATH, 0o440]]), merge, localGroups, sudoers, polkit, identities };
}

/** visudo's words, on one line. */
function visudoWords(r: { stdout: string; stderr: string }): string {
  return (r.stderr || r.stdout).trim().replace(/\s*\n\s*/g, " | ").slice(0, 600);
}

/**
 * `visudo -c -f -` on `text` (never a file sudo reads): resolves visudo's refusal, or undefined when it parses.
 * Exported for the tests that feed it what the sanitizers would never let through.
 */
export async function vetSudoers(io: Pick<EnforcerIO, "runner">, text: string): Promise<string | undefined> {
  const r = await io.runner.run("visudo", ["-c", "-f", "-"], { stdin: text, timeoutMs: 20_000 });
  if (r.success) return undefined;
  return `visudo refused the sudoers file, nothing was written: ${visudoWords(r)}`;
}

/** What sudo answers for `user`: may it run /usr/bin/true as root. */
async function askSudo(io: EnforcerIO, user: string): Promise<SudoAnswer> {
  const r = await io.runner.run("sudo", ["-n", "-l", "-U", user, "/usr/bin/true"], { timeoutMs: 20_000 });
  const words = `${r.stderr}${r.stdout}`;
  if (/unknown user/i.test(words)) return "unknown-user";
  if (r.code === 0) return "allowed";
  if (r.code === 1) return "refused";
  return { error: `sudo -l failed (exit ${r.code}): ${words.trim().slice(0, 300)}` };
}

/** An action whose implicit answer for any subject is an administrator's password, to ask polkit who that is. */
async function adminAction(io: EnforcerIO): Promise<string | undefined> {
  const r = await io.runner.run("pkaction", ["--verbose"], { timeoutMs: 20_000 });
  if (!r.success) return undefined;
  const admin = parsePkactionVerbose(r.stdout).filter((a) => /^auth_admin/.test(a.defaultAny))
    .map((a) => a.actionId).filter((id) => /^[A-Za-z0-9._-]+$/.test(id));
  return admin.includes("org.freedesktop.policykit.exec") ? "org.freedesktop.policykit.exec" : admin[0];
}

/**
 * The names pkcheck's text agent offers for an administrator's password, from its output: "Authenticating as:
 * Alice (alice)" for one, a numbered list for several. A name with a full name shows it in parentheses.
 */
export function parseOfferedAdmins(output: string): string[] | undefined {
  // The agent colours its banner: terminal colour sequences go.
  // deno-lint-ignore no-control-regex
  const text = output.replace(/\r/g, "").replace(/\x1b\[[0-9;]*m/g, "");
  const name = (shown: string) => /\(([^()]+)\)\s*$/.exec(shown.trim())?.[1] ?? shown.trim();
  const one = /Authenticating as: (.+)$/m.exec(text);
  if (one) return [name(one[1])];
  const at = text.indexOf("Multiple identities can be used for authentication:");
  if (at < 0) return undefined;
  const names: string[] = [];
  for (const line of text.slice(at).split("\n").slice(1)) {
    const m = /^\s*\d+\.\s+(.+)$/.exec(line);
    if (!m) break;
    names.push(name(m[1]));
  }
  return names;
}

/**
 * Asks polkitd which identities it accepts for an administrator's password: pkcheck, as `nobody` and on a
 * pseudo-terminal (`script`), checks its own process for `actionId` with its internal text agent, which prints
 * the identities and then waits for a password that never comes (its input ends after a few seconds).
 */
export async function askPolkitAdmins(
  run: (cmd: string, args: string[]) => Promise<{ code: number; stdout: string; stderr: string }>,
  actionId: string,
): Promise<{ names: string[] } | { error: string }> {
  const check = "setpriv --reuid=65534 --regid=65534 --clear-groups sh -c " +
    `'exec pkcheck --action-id ${actionId} --process $$ --allow-user-interaction --enable-internal-agent'`;
  const r = await run("sh", ["-c", 'sleep 3 | script -qfec "$0" /dev/null', check]);
  const names = parseOfferedAdmins(r.stdout + r.stderr);
  if (names) return { names };
  return { error: `polkit did not ask for an administrator (${(r.stdout + r.stderr).trim().slice(0, 200)})` };
}

async function readBack(io: EnforcerIO, p: PrivilegePlan, landed: Landed): Promise<PrivilegeState> {
  const state: PrivilegeState = { files: new Map(), sudo: new Map(), accounts: await accountGroups(io) };
  for (const path of p.files.keys()) {
    const error = landed.failed.get(path);
    state.files.set(
      path,
      error ? { error } : await io.fs.readTextFile(path).then((text) => ({ text }), (err) => ({
        error: `cannot read ${path}: ${(err as Error).message}`,
      })),
    );
  }
  if (io.fs.root !== "/") return state;
  const check = await io.runner.run("visudo", ["-c"], { timeoutMs: 20_000 });
  state.visudo = { ok: check.success, words: visudoWords(check) };
  if (await io.runner.which("sudo")) {
    for (const user of accountsToAsk(p, state.accounts)) state.sudo.set(user, await askSudo(io, user));
  }
  const tools = ["pkcheck", "pkaction", "script", "setpriv"];
  if (p.polkit && (await Promise.all(tools.map((t) => io.runner.which(t)))).every(Boolean)) {
    const action = await adminAction(io);
    state.polkit = action
      ? await askPolkitAdmins((cmd, args) => io.runner.run(cmd, args, { timeoutMs: 20_000 }), action)
      : { error: "no polkit action on this node asks for an administrator" };
  }
  return state;
}

/** The local members of `group` (primary or listed), in name order. */
function membersOf(accounts: ReadonlyMap<string, ReadonlySet<string>>, group: string): string[] {
  return [...accounts].filter(([, groups]) => groups.has(group)).map(([name]) => name).sort();
}

/** How many members of a group are asked about (the first in name order). */
const MEMBERS_ASKED = 5;

/** The accounts sudo is asked about: every named user, and the first local members of every named group. */
function accountsToAsk(p: PrivilegePlan, accounts: Map<string, Set<string>>): string[] {
  const out = new Set<string>();
  for (const decisions of p.merge.byPolicy.values()) {
    for (const d of decisions) for (const user of subjectsOf(d, p, accounts)) out.add(user);
  }
  return [...out];
}

/** The accounts a decision is checked with: the user, or the group's first local members. */
function subjectsOf(d: PrivilegeDecision, p: PrivilegePlan, accounts: Map<string, Set<string>>): string[] {
  if (d.kind === "user") return [d.name];
  const groups = d.kind === "group" ? [d.name] : p.localGroups;
  return [...new Set(groups.flatMap((g) => membersOf(accounts, g)))].slice(0, MEMBERS_ASKED);
}

/**
 * What the merge means for one account: `refused` when a revocation covers it (by name, through a group, or as
 * a member of a revoked local sudo group), `allowed` when a grant covers it, undefined when svc says nothing.
 */
function expectedFor(
  user: string,
  groups: ReadonlySet<string>,
  p: PrivilegePlan,
): "allowed" | "refused" | undefined {
  const { winners } = p.merge;
  const named = [winners.get(`user:${user}`), ...[...groups].map((g) => winners.get(`group:${g}`))]
    .filter((d) => d !== undefined);
  const localRevoked = localGroupsRevoked(p.merge) && p.localGroups.some((g) => groups.has(g));
  if (localRevoked || named.some((d) => !d.allow)) return "refused";
  return named.some((d) => d.allow) ? "allowed" : undefined;
}

/** Why `user` is refused although `decision` allows it: the revocation that covers it. */
function revokedBy(user: string, groups: ReadonlySet<string>, p: PrivilegePlan): string {
  const { winners } = p.merge;
  if (winners.get(`user:${user}`)?.allow === false) return `the user ${user} is revoked`;
  const group = [...groups].find((g) => winners.get(`group:${g}`)?.allow === false);
  if (group) return `the group ${group} is revoked (deny beats allow)`;
  return "the local sudo groups are revoked (deny beats allow)";
}

function label(d: PrivilegeDecision): string {
  return d.kind === "local-sudo-groups" ? "the local sudo groups" : `${d.kind} ${d.name}`;
}

function report(
  { policy }: Checked<PrivilegePolicy>,
  { plan: p, state }: { plan: PrivilegePlan; state: PrivilegeState },
) {
  const items: ItemResult[] = [];
  const sudoFile = state.files.get(SUDOERS_PATH)!;
  if ("error" in sudoFile) return { status: "ERROR" as const, message: sudoFile.error, items };
  const sudoIntact = sudoFile.text === p.sudoers;
  if (state.visudo && !state.visudo.ok) {
    return {
      status: "ERROR" as const,
      message: `visudo -c refuses the node's sudo configuration: ${state.visudo.words}`,
      items,
    };
  }
  const polkitFile = p.polkit === undefined ? undefined : state.files.get(POLKIT_ADMIN_RULES_PATH);
  for (const d of p.merge.byPolicy.get(policy.id) ?? []) {
    const schemaId = `privilege:${
      d.kind === "local-sudo-groups" ? "local-sudo-groups" : `${d.kind}:${d.name}`
    }`;
    const key = d.entry >= 0 ? `entries[${d.entry}]` : "local_sudo_group_not_admin";
    const winner = p.merge.winners.get(d.key)!;
    if (winner.policyId !== policy.id) {
      items.push({
        schemaId,
        key,
        status: "INAPPLICABLE",
        message: `overridden by policy "${winner.policyName}" (priority ${winner.priority}), which ` +
          `${winner.allow ? "allows" : "revokes"} ${label(d)}`,
      });
      continue;
    }
    items.push({
      schemaId,
      key: `${key}.sudoers`,
      status: sudoIntact ? "COMPLIANT" : "NON_COMPLIANT",
      message: sudoIntact
        ? `${d.allow ? "granted" : "revoked"} in ${SUDOERS_PATH}`
        : `${SUDOERS_PATH} does not hold the lines as generated (missing or edited)`,
    });
    for (const user of state.sudo.size ? subjectsOf(d, p, state.accounts) : []) {
      items.push(sudoItem(schemaId, `${key}.sudo:${user}`, user, d, p, state));
    }
    if (polkitFile) items.push(...polkitItems(schemaId, key, d, p, state));
  }
  const summary = summarize(items, {
    inEffect: (ok, skipped) =>
      `${ok} check(s) in effect` + (skipped ? `; ${skipped} overridden or not on this node` : ""),
    none: "entry",
  });
  return { ...summary, items };
}

function sudoItem(
  schemaId: string,
  key: string,
  user: string,
  d: PrivilegeDecision,
  p: PrivilegePlan,
  state: PrivilegeState,
): ItemResult {
  const answer = state.sudo.get(user);
  const groups = state.accounts.get(user) ?? new Set<string>();
  const expected = expectedFor(user, groups, p);
  if (answer === undefined) {
    return { schemaId, key, status: "UNKNOWN", message: `sudo was not asked about ${user}` };
  }
  if (typeof answer === "object") return { schemaId, key, status: "UNKNOWN", message: answer.error };
  if (answer === "unknown-user") {
    return { schemaId, key, status: "INAPPLICABLE", message: `no account ${user} on this node` };
  }
  if (d.allow && expected === "refused") {
    return {
      schemaId,
      key,
      status: answer === "refused" ? "INAPPLICABLE" : "NON_COMPLIANT",
      message: answer === "refused"
        ? `${user} is not an administrator: ${revokedBy(user, groups, p)}`
        : `sudo lets ${user} run commands although ${revokedBy(user, groups, p)}`,
    };
  }
  const want = d.allow ? "allowed" : "refused";
  return {
    schemaId,
    key,
    status: answer === want ? "COMPLIANT" : "NON_COMPLIANT",
    message: answer === want
      ? `sudo -l: ${user} ${want === "allowed" ? "may" : "may not"} run commands as root`
      : `sudo -l: ${user} ${
        answer === "allowed" ? "may" : "may not"
      } run commands as root, the policy says ` +
        `${want === "allowed" ? "may" : "may not"}: another sudoers file decides`,
  };
}

function polkitItems(
  schemaId: string,
  key: string,
  d: PrivilegeDecision,
  p: PrivilegePlan,
  state: PrivilegeState,
): ItemResult[] {
  const file = state.files.get(POLKIT_ADMIN_RULES_PATH)!;
  const intact = "text" in file && file.text === p.polkit;
  const items: ItemResult[] = [{
    schemaId,
    key: `${key}.polkit`,
    status: intact ? "COMPLIANT" : "NON_COMPLIANT",
    message: intact
      ? `polkit administrators in ${POLKIT_ADMIN_RULES_PATH}: ${p.identities.join(", ")}`
      : "error" in file
      ? file.error
      : `${POLKIT_ADMIN_RULES_PATH} does not hold the rule as generated (missing or edited)`,
  }];
  if (!intact || !state.polkit) return items;
  if ("error" in state.polkit) {
    items.push({ schemaId, key: `${key}.pkcheck`, status: "UNKNOWN", message: state.polkit.error });
    return items;
  }
  const offered = new Set(state.polkit.names);
  for (const user of subjectsOf(d, p, state.accounts)) {
    if (state.sudo.get(user) === "unknown-user" || !state.accounts.has(user)) continue;
    const groups = state.accounts.get(user) ?? new Set<string>();
    const want = expectedFor(user, groups, p) === "allowed";
    const is = offered.has(user);
    const through = is && !want
      ? [...groups].find((g) => p.identities.includes(`unix-group:${g}`))
      : undefined;
    items.push({
      schemaId,
      key: `${key}.pkcheck:${user}`,
      status: is === want ? "COMPLIANT" : "NON_COMPLIANT",
      message: is === want
        ? `polkit ${is ? "offers" : "does not offer"} ${user} as an administrator`
        : is
        ? `polkit still offers ${user} as an administrator${
          through ? ` as a member of ${through}: remove ${user} from ${through} or revoke the group` : ""
        }`
        : `polkit does not offer ${user} as an administrator: an earlier admin rule decides`,
    });
  }
  return items;
}

/** Whether a file under svc's Privilege paths is svc's own. */
export function isOwnPrivilegeFile(text: string): boolean {
  return text.startsWith(SUDOERS_MARKER) || text.startsWith(POLKIT_ADMIN_MARKER);
}

/** The Privilege enforcer; see the module documentation. */
export const privilegeEnforcer = desktopEnforcer<PrivilegePolicy, PrivilegePlan, PrivilegeState>({
  type: privilegeType.wireName,
  notifiesUsers: false,
  check: (policy) => checkedContent(policy, privilegeType),
  needs: [
    { anyOf: ["/etc/sudoers"], missing: "sudo is not installed on this node (no /etc/sudoers)" },
    { command: "visudo", missing: "visudo is not installed on this node (Debian package sudo)" },
  ],
  // Group members change what sudo and polkit answer; polkit or pkcheck may arrive later.
  reads: ["/etc/group", "/etc/passwd", "/etc/polkit-1", "/usr/bin/pkcheck"],
  isOwnContent: isOwnPrivilegeFile,
  plan,
  vet: (io, p) => vetSudoers(io, p.sudoers),
  transaction: {
    what: "the sudoers file",
    // On the node itself the whole configuration is checked with the new file in place; anything else than a
    // clean check puts the previous file back, so sudo keeps working.
    activate: async (io) => {
      if (io.fs.root !== "/") return undefined;
      const r = await io.runner.run("visudo", ["-c"], { timeoutMs: 20_000 });
      return r.success ? undefined : `visudo -c refused the configuration with svc's file: ${visudoWords(r)}`;
    },
    reactivate: () => Promise.resolve(),
    note: " (the previous sudoers file is back; sudo is as it was)",
  },
  readBack: (io, p, landed) => readBack(io, p, landed),
  report: (checked, context) => report(checked, context),
});
