/**
 * The Privilege type's polkit side: the administrator identities the merge gives polkit, the admin rule that
 * names them (rendered by `shared/polkit_js.ts`, proven by `polkit_script.ts` to be exactly that call), and
 * what polkitd really offers, asked of it with pkcheck's own text agent.
 *
 * @module
 */

import { renderPolkitAdminRule } from "../../../shared/polkit_js.ts";
import { administrators, type PrivilegeMerge } from "../../../shared/privilege_rules.ts";
import { parsePkactionVerbose } from "../../catalogue.ts";
import type { EnforcerIO } from "../../sync/types.ts";
import type { RunCommand } from "../polkit/pkcheck.ts";
import { checkPolkitAdminScript, PolkitScriptError } from "../polkit_script.ts";

/** The identities polkit is given for the administrators of `merge`; root alone when there are none. */
export function polkitIdentities(merge: PrivilegeMerge, localGroups: readonly string[]): string[] {
  const admins = administrators(merge, localGroups).map((a) => `unix-${a.kind}:${a.name}`);
  return admins.length > 0 ? admins : ["unix-user:root"];
}

/** The admin rule naming `identities`, or why it was refused (it must be exactly one `addAdminRule` call). */
export function renderAdminRule(identities: string[]): { text: string } | { refused: string } {
  const text = renderPolkitAdminRule(identities);
  try {
    checkPolkitAdminScript(text, identities.length);
  } catch (err) {
    if (err instanceof PolkitScriptError) {
      return { refused: `the polkit administrator rule was refused: ${err.message}` };
    }
    throw err;
  }
  return { text };
}

/** An action whose implicit answer for any subject is an administrator's password, to ask polkit who that is. */
export async function adminAction(io: Pick<EnforcerIO, "runner">): Promise<string | undefined> {
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

/** The characters of a polkit action id (`org.freedesktop.policykit.exec`). */
const POLKIT_ACTION_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/**
 * Asks polkitd which identities it accepts for an administrator's password: pkcheck, as `nobody` and on a
 * pseudo-terminal (`script`), checks its own process for `actionId` with its internal text agent, which prints
 * the identities and then waits for a password that never comes (its input ends after a few seconds).
 */
export async function askPolkitAdmins(
  run: RunCommand,
  actionId: string,
): Promise<{ names: string[] } | { error: string }> {
  // `script` runs its command through a shell, so the id becomes shell text: only polkit's own id alphabet
  // may pass (pkaction prints it, but a package on the node could declare anything).
  if (!POLKIT_ACTION_ID.test(actionId)) {
    return { error: `polkit action id ${JSON.stringify(actionId)} is not an id` };
  }
  const check = "setpriv --reuid=65534 --regid=65534 --clear-groups sh -c " +
    `'exec pkcheck --action-id ${actionId} --process $$ --allow-user-interaction --enable-internal-agent'`;
  const r = await run("sh", ["-c", 'sleep 3 | script -qfec "$0" /dev/null', check]);
  const names = parseOfferedAdmins(r.stdout + r.stderr);
  if (names) return { names };
  return { error: `polkit did not ask for an administrator (${(r.stdout + r.stderr).trim().slice(0, 200)})` };
}

/** On the node itself, with polkit's tools: the administrators polkitd offers, or why they could not be asked. */
export async function offeredAdmins(
  io: Pick<EnforcerIO, "runner">,
): Promise<{ names: string[] } | { error: string } | undefined> {
  const tools = ["pkcheck", "pkaction", "script", "setpriv"];
  if (!(await Promise.all(tools.map((t) => io.runner.which(t)))).every(Boolean)) return undefined;
  const action = await adminAction(io);
  return action
    ? await askPolkitAdmins((cmd, args) => io.runner.run(cmd, args, { timeoutMs: 20_000 }), action)
    : { error: "no polkit action on this node asks for an administrator" };
}
