/**
 * The systemd units of the Scripts type: one per script (system units for machine scripts, user units for login
 * and logout), the script inside as `StandardInputData=`, run once per version through the runner
 * (`runner.ts`), and the drop-ins that pull them in at boot and at every user's login.
 *
 * @module
 */

import type { Script } from "../../../shared/gen/svc/policy/v1/scripts_pb.ts";
import { ScriptTrigger } from "../../../shared/gen/svc/policy/v1/scripts_pb.ts";
import { DEFAULT_SCRIPT_TIMEOUT_SECONDS } from "../../../shared/policy_types/scripts.ts";
import type { CachedPolicy } from "../../sync/types.ts";
import {
  doneName,
  interpreterPath,
  MACHINE_DONE_DIR,
  RUN_SCRIPT_PATH,
  SCRIPTS_MARKER,
  USER_DONE_DIR,
} from "./runner.ts";

export const SYSTEM_UNITS = "/etc/systemd/system";
export const USER_UNITS = "/etc/systemd/user";
export const SYSTEM_WANTS = `${SYSTEM_UNITS}/multi-user.target.d/svc-scripts.conf`;
export const USER_WANTS = `${USER_UNITS}/default.target.d/svc-scripts.conf`;

const TRIGGER_WORDS: Record<number, string> = {
  [ScriptTrigger.MACHINE_STARTUP]: "startup",
  [ScriptTrigger.MACHINE_SHUTDOWN]: "shutdown",
  [ScriptTrigger.USER_LOGIN]: "login",
  [ScriptTrigger.USER_LOGOUT]: "logout",
};

/** Startup and shutdown scripts run as root in system units; login and logout scripts in each user's manager. */
export function isMachine(script: Script): boolean {
  return script.trigger === ScriptTrigger.MACHINE_STARTUP ||
    script.trigger === ScriptTrigger.MACHINE_SHUTDOWN;
}

/** `svc-script-<policy id>-<script name>`: letters, digits, `.`, `_` and `-` only (both parts are checked names). */
export function unitBase(policyId: string, scriptName: string): string {
  const id = policyId.replace(/[^A-Za-z0-9-]/g, "").slice(0, 64) || "policy";
  return `svc-script-${id}-${scriptName.replace(/[^A-Za-z0-9._-]/g, "")}`;
}

/** Base64 of the script in lines of 76 characters (57 bytes each, so every line decodes on its own). */
function base64Lines(text: string): string[] {
  const bytes = new TextEncoder().encode(text);
  const lines: string[] = [];
  for (let i = 0; i < bytes.length; i += 57) {
    lines.push(btoa(String.fromCharCode(...bytes.subarray(i, i + 57))));
  }
  return lines;
}

/** One script of a policy, rendered. */
export interface RenderedScript {
  policy: CachedPolicy;
  index: number;
  script: Script;
  unit: string;
  /** Node path of the unit file. */
  path: string;
  /** Done-file name (machine: under {@link MACHINE_DONE_DIR}; user: under each home's {@link USER_DONE_DIR}). */
  done: string;
  text: string;
  timeout: number;
}

/** The unit of one script; see the module documentation. */
export async function renderScriptUnit(
  policy: CachedPolicy,
  script: Script,
  index: number,
): Promise<RenderedScript> {
  const base = unitBase(policy.id, script.name);
  const unit = `${base}.service`;
  const done = await doneName(base, script);
  const machine = isMachine(script);
  const path = `${machine ? SYSTEM_UNITS : USER_UNITS}/${unit}`;
  const doneFile = machine ? `${MACHINE_DONE_DIR}/${done}` : `%h/${USER_DONE_DIR}/${done}`;
  const timeout = script.timeoutSeconds || DEFAULT_SCRIPT_TIMEOUT_SECONDS;
  const run = `${RUN_SCRIPT_PATH} ${interpreterPath(script)} ${doneFile}`;
  const atStop = script.trigger === ScriptTrigger.MACHINE_SHUTDOWN ||
    script.trigger === ScriptTrigger.USER_LOGOUT;
  const lines = [
    SCRIPTS_MARKER,
    "[Unit]",
    // Only checked names: the policy id is the server's (untrusted) and reaches the unit through unitBase alone.
    `Description=svc ${TRIGGER_WORDS[script.trigger]} script ${base}`,
    `ConditionPathExists=!${doneFile}`,
    ...(machine ? ["Wants=network-online.target", "After=network-online.target"] : []),
    "",
    "[Service]",
    "Type=oneshot",
    ...(atStop
      ? ["RemainAfterExit=yes", "ExecStart=/bin/true", `ExecStop=${run} ${path}`, `TimeoutStopSec=${timeout}`]
      : [`ExecStart=${run}`, `TimeoutStartSec=${timeout}`]),
    ...(machine ? [] : ["WorkingDirectory=~"]),
    "StandardOutput=journal",
    "StandardError=journal",
    ...base64Lines(script.body).map((l) => `StandardInputData=${l}`),
    "",
  ];
  return { policy, index, script, unit, path, done, text: lines.join("\n"), timeout };
}

export function wantsDropIn(units: string[]): string {
  return `${SCRIPTS_MARKER}\n[Unit]\n${units.map((u) => `Wants=${u}`).join("\n")}\n`;
}
