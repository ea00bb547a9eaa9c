/**
 * What the server does for the Scripts type beyond validation: the shell's own syntax check when a policy is saved
 * ({@link dryRunScripts}) and the signature made at release ({@link signScriptsOnRelease}), which is what lets an
 * agent run a script at all (`shared/scripts_signature.ts`). Who may create and edit such policies is the route's
 * business (`policy:edit_scripts`, the type's `editPermission`).
 *
 * @module
 */

import { create } from "@bufbuild/protobuf";
import { ScriptInterpreter, ScriptsSignatureSchema } from "../../shared/gen/svc/policy/v1/scripts_pb.ts";
import { scriptsType } from "../../shared/policy_types/scripts.ts";
import { scriptsSignedText } from "../../shared/scripts_signature.ts";
import type { Queryable } from "../db/db.ts";
import { DomainError, type DomainFieldError, invalidError } from "../core/errors.ts";

/** Wire name of the type. */
export const SCRIPTS_TYPE = "Scripts";

/** Signs bytes with the server's CA key (`server/pki/content_signer.ts`). */
export type ContentSigner = (data: Uint8Array<ArrayBuffer>) => Promise<Uint8Array>;

/** The shell's complaint in the policy's terms: "line 3: syntax error near unexpected token `fi'". */
function shellWords(text: string): string {
  return text.trim().split("\n").filter((l) => l.trim() !== "").slice(0, 3).map((line) =>
    line.replace(/^(?:\S*\/)?(?:bash|sh|dash): (?:line )?(\d+): /, "line $1: ")
  ).join(" ").slice(0, 500);
}

/** `<shell> -n` reading a script from its input, in an empty environment; refuses when the shell is missing. */
function spawnShell(shell: string): Deno.ChildProcess {
  try {
    return new Deno.Command(shell, {
      args: ["-n"],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
      clearEnv: true,
      env: { PATH: "/usr/bin:/bin", LC_ALL: "C" },
      signal: AbortSignal.timeout(10_000),
    }).spawn();
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
    throw new DomainError(
      "unavailable",
      `the server cannot check the scripts' syntax: ${shell} is not installed where svc-server runs; install ` +
        `${
          shell === "sh" ? "a POSIX shell" : "bash"
        } there (the OCI image has no shell: run svc-server from its package)`,
    );
  }
}

/**
 * Runs `bash -n` (or `sh -n` for SCRIPT_INTERPRETER_SH) on every script of Scripts content: read, never executed.
 * Throws `invalid` naming each script whose syntax the shell refuses (`content.scripts[i].body: line 3: …`).
 * Content of other types, and content that does not parse (the content check names that), pass.
 */
export async function dryRunScripts(type: string, content: string): Promise<void> {
  if (type !== SCRIPTS_TYPE) return;
  let scripts;
  try {
    scripts = scriptsType.parse(content).scripts;
  } catch {
    return;
  }
  const problems: DomainFieldError[] = [];
  for (const [i, script] of scripts.entries()) {
    const shell = script.interpreter === ScriptInterpreter.SH ? "sh" : "bash";
    const child = spawnShell(shell);
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(script.body)).catch(() => {});
    await writer.close().catch(() => {});
    const out = await child.output();
    if (!out.success) {
      const words = shellWords(new TextDecoder().decode(out.stderr)) ||
        `${shell} -n failed (exit ${out.code})`;
      problems.push({ field: `content.scripts[${i}].body`, message: `${shell} -n: ${words}` });
    }
  }
  if (problems.length) {
    throw invalidError(
      `the shell refuses the syntax of ${problems.length} script(s): ${problems[0].field}: ${
        problems[0].message
      }`,
      problems,
    );
  }
}

/**
 * Signs a Scripts policy that is being released, in the caller's transaction: its id, the version it is released
 * as and every script, with the CA's key; the signature is stored in the content (`signature`), replacing any
 * given. Does nothing for other types. Throws when a Scripts policy is released without a signer (a server bug:
 * unsigned scripts would be refused by every node).
 */
export async function signScriptsOnRelease(
  q: Queryable,
  policy: { id: string; type: string; version: number; content: string },
  signer: ContentSigner | undefined,
): Promise<void> {
  if (policy.type !== SCRIPTS_TYPE) return;
  if (!signer) throw new Error(`Scripts policy ${policy.id} is released without the CA signer`);
  const message = scriptsType.parse(policy.content, { ignoreUnknownFields: true });
  const signature = await signer(
    scriptsSignedText({ id: policy.id, version: policy.version }, message.scripts),
  );
  message.signature = create(ScriptsSignatureSchema, {
    policyVersion: policy.version,
    value: btoa(String.fromCharCode(...signature)),
  });
  await q.query("UPDATE policies SET content = $2 WHERE id = $1", [
    policy.id,
    scriptsType.toCanonicalJson(message),
  ]);
}
