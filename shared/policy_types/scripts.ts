/**
 * Scripts: machine startup/shutdown scripts (root) and user login/logout scripts. Script names become systemd
 * unit and file names, bodies are run by a shell, so names are plain identifiers, unique in the policy, and
 * bodies are text with Unix line ends and no control or bidirectional characters. The shell's own syntax check
 * (`bash -n`) runs on the server when the policy is saved (`server/domain/scripts_policy.ts`); the signature is
 * the server's, made at release, and only checked here for form. Creating or editing a policy of this type
 * needs `policy:edit_scripts`.
 */
import {
  ScriptInterpreterSchema,
  type ScriptsPolicy,
  ScriptsPolicySchema,
  ScriptTriggerSchema,
} from "../gen/svc/policy/v1/scripts_pb.ts";
import { defineType, enumNumbers } from "./define.ts";
import { base64Text, identifier, maxLength, required, scriptText } from "./sanitizers.ts";

/** Longest script body, in characters (the unit file carries it base64-encoded). */
export const MAX_SCRIPT_LENGTH = 64 * 1024;
/** Longest timeout a script may ask for, in seconds. */
export const MAX_SCRIPT_TIMEOUT_SECONDS = 3600;
/** The timeout of a script that states none, in seconds. */
export const DEFAULT_SCRIPT_TIMEOUT_SECONDS = 300;

/** The Scripts policy type. */
export const scriptsType = defineType<ScriptsPolicy>({
  wireName: "Scripts",
  label: "Scripts",
  description: "Startup, shutdown, login and logout scripts, signed by the server.",
  schema: ScriptsPolicySchema,
  typedContentCase: "scriptsPolicy",
  merge: "file_per_policy",
  names: "proto",
  editPermission: "policy:edit_scripts",
  check(message, issues) {
    if (message.scripts.length === 0) {
      issues.add("scripts", "policy content needs at least one setting (a script)");
    }
    const names = new Set<string>();
    message.scripts.forEach((script, i) => {
      const at = `scripts[${i}]`;
      if (issues.check(`${at}.name`, script.name, required, identifier(48)) && names.has(script.name)) {
        issues.add(
          `${at}.name`,
          `"${script.name}" is used by another script of this policy; names must be unique`,
        );
      }
      names.add(script.name);
      issues.enumValue(`${at}.trigger`, script.trigger, enumNumbers(ScriptTriggerSchema), {
        hint: "choose when the script runs, e.g. SCRIPT_TRIGGER_MACHINE_STARTUP",
      });
      issues.enumValue(`${at}.interpreter`, script.interpreter, enumNumbers(ScriptInterpreterSchema), {
        allowZero: true,
      });
      issues.check(`${at}.body`, script.body, scriptText, maxLength(MAX_SCRIPT_LENGTH));
      if (script.timeoutSeconds > MAX_SCRIPT_TIMEOUT_SECONDS) {
        issues.add(
          `${at}.timeout_seconds`,
          `must be at most ${MAX_SCRIPT_TIMEOUT_SECONDS} seconds (0 means 300)`,
        );
      }
    });
    if (message.signature) {
      issues.optional("signature.value", message.signature.value, base64Text, maxLength(4096));
    }
  },
});
