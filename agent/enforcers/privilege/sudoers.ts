/**
 * The Privilege type's sudo driver: visudo vets the rendered drop-in before it lands and the whole configuration
 * after, and `sudo -l` says whether an account may run a command as root.
 *
 * @module
 */

import type { EnforcerIO } from "../../sync/types.ts";

/** What sudo says of one account: may it run a command, and does the account exist. */
export type SudoAnswer = "allowed" | "refused" | "unknown-user" | { error: string };

/** visudo's words, on one line. */
export function visudoWords(r: { stdout: string; stderr: string }): string {
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

/** `visudo -c` of the node's whole sudo configuration, as it is now. */
export async function checkSudoConfig(
  io: Pick<EnforcerIO, "runner">,
): Promise<{ ok: boolean; words: string }> {
  const r = await io.runner.run("visudo", ["-c"], { timeoutMs: 20_000 });
  return { ok: r.success, words: visudoWords(r) };
}

/** What sudo answers for `user`: may it run /usr/bin/true as root. */
export async function askSudo(io: Pick<EnforcerIO, "runner">, user: string): Promise<SudoAnswer> {
  const r = await io.runner.run("sudo", ["-n", "-l", "-U", user, "/usr/bin/true"], { timeoutMs: 20_000 });
  const words = `${r.stderr}${r.stdout}`;
  if (/unknown user/i.test(words)) return "unknown-user";
  if (r.code === 0) return "allowed";
  if (r.code === 1) return "refused";
  return { error: `sudo -l failed (exit ${r.code}): ${words.trim().slice(0, 300)}` };
}
