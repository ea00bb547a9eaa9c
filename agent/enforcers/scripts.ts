/**
 * Scripts enforcer: machine startup and shutdown scripts (as root) and user login and logout scripts (as the
 * user), each in a systemd unit, so its output is in the journal and systemd stops it at its timeout.
 *
 * Nothing runs unless the server signed it: before anything is written, each policy's signature is checked
 * against the CA certificate the agent pinned at enrollment (`shared/scripts_signature.ts`). A policy whose
 * signature does not verify is ERROR, and its units are withdrawn (a script that ran earlier stays run).
 *
 * What lands, for a policy `P` and a script `s` (unit `svc-script-P-s`):
 *
 * - `/var/lib/svc-scripts/svc-run-script` (0755): the one runner every unit calls, static text: it copies the
 *   script from its standard input to a private temporary file, runs it with the interpreter, and records the exit
 *   status and the unit's invocation id in a done-file named for the script's digest and run-again counter;
 * - machine scripts: `/etc/systemd/system/svc-script-P-s.service` (0600: the script is inside), pulled in at boot
 *   by `/etc/systemd/system/multi-user.target.d/svc-scripts.conf`; startup runs the script (`ExecStart`), shutdown
 *   arms a unit whose `ExecStop` runs it when the node shuts down;
 * - user scripts: `/etc/systemd/user/svc-script-P-s.service`, pulled in by every user's manager at login through
 *   `/etc/systemd/user/default.target.d/svc-scripts.conf`; login runs at the start (`ExecStart`), logout when the
 *   user's manager stops after the last session (`ExecStop`).
 *
 * The script text travels in the unit as `StandardInputData=` (base64), so no separate script file exists that
 * could be changed between the check and the run. Each unit carries `ConditionPathExists=!<done-file>`: a script
 * runs once per digest (its text and interpreter) and run-again counter, machine scripts once per node, user
 * scripts once per user, however often the agent syncs or the node boots. A run that is stopped at its timeout
 * records nothing and is tried again at the next occasion.
 *
 * On the node itself (root `/`, systemd running) the agent reloads systemd after a unit changed, starts every
 * startup script that has not run yet (and waits for it: the type has its own lane) and arms every shutdown
 * script; a unit withdrawn while armed finds its file gone and runs nothing when stopped.
 *
 * Compliance per script: its done-file (exit status) and the last lines of its output from the journal; a script
 * that failed is ERROR with that output. Shutdown, login and logout scripts that have not had their occasion yet
 * are COMPLIANT ("armed", "waits for the next login").
 *
 * @module
 */

import type { Script, ScriptsPolicy } from "../../shared/gen/svc/policy/v1/scripts_pb.ts";
import { ScriptInterpreter, ScriptTrigger } from "../../shared/gen/svc/policy/v1/scripts_pb.ts";
import { DEFAULT_SCRIPT_TIMEOUT_SECONDS, scriptsType } from "../../shared/policy_types/scripts.ts";
import { verifyScriptsSignature } from "../../shared/scripts_signature.ts";
import type { CachedPolicy, Enforcer, EnforcerIO, ItemResult } from "../sync/types.ts";
import { type Checked, desktopEnforcer, type DesktopPlan, summarize } from "./desktop_enforcer.ts";
import { passwdEntries } from "./node_accounts.ts";
import { checkedContent } from "./revalidate.ts";

/** The marker in every file the Scripts type writes. */
export const SCRIPTS_MARKER =
  "# This file is managed by svc (Scripts); edits are overwritten by policy enforcement.";
/** Where svc's script state lives on the node. */
export const SCRIPTS_DIR = "/var/lib/svc-scripts";
/** The runner every script unit calls. */
export const RUN_SCRIPT_PATH = `${SCRIPTS_DIR}/svc-run-script`;
/** Done-files of machine scripts. */
export const MACHINE_DONE_DIR = `${SCRIPTS_DIR}/done`;
/** Done-files of user scripts, under each user's home. */
export const USER_DONE_DIR = ".local/state/svc-scripts";
const SYSTEM_UNITS = "/etc/systemd/system";
const USER_UNITS = "/etc/systemd/user";
const SYSTEM_WANTS = `${SYSTEM_UNITS}/multi-user.target.d/svc-scripts.conf`;
const USER_WANTS = `${USER_UNITS}/default.target.d/svc-scripts.conf`;

/**
 * The runner (static text: nothing of a policy is in it). `$1` is the interpreter, `$2` the done-file, `$3` (shutdown
 * and logout) the unit file, whose absence means the unit was withdrawn while armed: then nothing runs.
 */
export const RUN_SCRIPT = `#!/bin/sh
${SCRIPTS_MARKER}
# Runs one svc script. Its systemd unit passes the script on standard input; it runs with the interpreter "$1"
# from a private temporary file, and its exit status and the unit's invocation id are recorded in "$2", which the
# unit's condition reads to run each version once.
set -u
interpreter="$1"
done_file="$2"
if [ -n "\${3:-}" ] && [ ! -e "$3" ]; then
  echo "svc: $3 was withdrawn; the script does not run"
  exit 0
fi
script="$(mktemp)" || exit 70
trap 'rm -f "$script"' EXIT
trap 'rm -f "$script"; exit 143' TERM INT
cat > "$script"
"$interpreter" "$script" < /dev/null
status=$?
mkdir -p "$(dirname "$done_file")" &&
  printf '%s %s\\n' "$status" "\${INVOCATION_ID:-}" > "$done_file.tmp" &&
  mv -f "$done_file.tmp" "$done_file"
exit "$status"
`;

const TRIGGER_WORDS: Record<number, string> = {
  [ScriptTrigger.MACHINE_STARTUP]: "startup",
  [ScriptTrigger.MACHINE_SHUTDOWN]: "shutdown",
  [ScriptTrigger.USER_LOGIN]: "login",
  [ScriptTrigger.USER_LOGOUT]: "logout",
};

function isMachine(script: Script): boolean {
  return script.trigger === ScriptTrigger.MACHINE_STARTUP ||
    script.trigger === ScriptTrigger.MACHINE_SHUTDOWN;
}

function interpreterPath(script: Script): string {
  return script.interpreter === ScriptInterpreter.SH ? "/bin/sh" : "/bin/bash";
}

/** `svc-script-<policy id>-<script name>`: letters, digits, `.`, `_` and `-` only (both parts are checked names). */
export function unitBase(policyId: string, scriptName: string): string {
  const id = policyId.replace(/[^A-Za-z0-9-]/g, "").slice(0, 64) || "policy";
  return `svc-script-${id}-${scriptName.replace(/[^A-Za-z0-9._-]/g, "")}`;
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The done-file name of one version of a script: its unit, the digest of interpreter and text, the counter. */
export async function doneName(base: string, script: Script): Promise<string> {
  const digest = (await sha256Hex(`${interpreterPath(script)}\n${script.body}`)).slice(0, 16);
  return `${base}-${digest}-r${script.runAgain}`;
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

function wantsDropIn(units: string[]): string {
  return `${SCRIPTS_MARKER}\n[Unit]\n${units.map((u) => `Wants=${u}`).join("\n")}\n`;
}

/** A policy whose signature checked out, rendered; or the reason it was refused. */
interface PolicyPlan {
  refused?: string;
  scripts: RenderedScript[];
}

interface ScriptsPlan extends DesktopPlan {
  byPolicy: Map<string, PolicyPlan>;
  /** Units managed before this sync that no policy wants any more (stopped after the reload). */
  withdrawn: string[];
}

/** What happened to one script on the node. */
type Outcome =
  | { kind: "done"; code: number; lines: string; user?: string }
  | { kind: "failed"; words: string }
  | { kind: "waiting"; words: string };

interface ScriptsState {
  /** Unit → outcome(s): one for a machine script, one per user who ran it for a user script. */
  outcomes: Map<string, Outcome[]>;
  files: Map<string, string | undefined>;
}

/** The CA certificate the agent pinned at enrollment (a host path of the data directory). */
async function pinnedCa(io: EnforcerIO): Promise<string | undefined> {
  return await Deno.readTextFile(`${io.config.enrollment.dataDir}/ca.crt`).catch(() => undefined);
}

async function plan(valid: Checked<ScriptsPolicy>[], io: EnforcerIO): Promise<ScriptsPlan> {
  const ca = await pinnedCa(io);
  const byPolicy = new Map<string, PolicyPlan>();
  const files = new Map<string, string>();
  const modes = new Map<string, number>([[RUN_SCRIPT_PATH, 0o755]]);
  const systemUnits: string[] = [];
  const userUnits: string[] = [];
  for (const { policy, message } of valid) {
    const refused = ca === undefined
      ? "the agent has no CA certificate to check the server's signature with (enroll again)"
      : await verifyScriptsSignature(ca, { id: policy.id, version: policy.version }, message);
    if (refused) {
      io.logger.warn("Scripts policy refused: its signature does not verify", { policy: policy.id, refused });
      byPolicy.set(policy.id, { refused, scripts: [] });
      continue;
    }
    const scripts = await Promise.all(message.scripts.map((s, i) => renderScriptUnit(policy, s, i)));
    for (const r of scripts) {
      files.set(r.path, r.text);
      if (isMachine(r.script)) {
        modes.set(r.path, 0o600);
        systemUnits.push(r.unit);
      } else userUnits.push(r.unit);
    }
    byPolicy.set(policy.id, { scripts });
  }
  if (files.size > 0) files.set(RUN_SCRIPT_PATH, RUN_SCRIPT);
  if (systemUnits.length) files.set(SYSTEM_WANTS, wantsDropIn(systemUnits));
  if (userUnits.length) files.set(USER_WANTS, wantsDropIn(userUnits));
  const withdrawn = io.managedPaths().filter((p) =>
    p.startsWith(`${SYSTEM_UNITS}/svc-script-`) && !files.has(p)
  )
    .map((p) => p.slice(SYSTEM_UNITS.length + 1));
  return { files, modes, byPolicy, withdrawn };
}

/** Whether the agent can start units: on the node itself, with systemd running. */
async function systemdRunning(io: EnforcerIO): Promise<boolean> {
  return io.fs.root === "/" && (await io.fs.stat("/run/systemd/system"))?.isDirectory === true;
}

/** The last lines a unit's run wrote to the journal, for the report. */
async function lastLines(io: EnforcerIO, match: string[]): Promise<string> {
  if (io.fs.root !== "/") return "";
  // What journald has received but not yet written is written first, so a run that just ended shows its lines.
  await io.runner.run("journalctl", ["--sync"], { timeoutMs: 10_000 });
  const r = await io.runner.run("journalctl", ["--no-pager", "-o", "cat", "-n", "10", ...match], {
    timeoutMs: 20_000,
  });
  if (!r.success) return "";
  return r.stdout.split("\n").filter((l) => l.trim() !== "").slice(-10).map((l) => l.slice(0, 200)).join(
    " | ",
  )
    .slice(0, 1500);
}

/** A done-file's content: `<exit status> <invocation id>`. */
function parseDone(text: string | undefined): { code: number; invocation: string } | undefined {
  const m = /^(\d{1,3}) ([0-9a-f]{32})?\s*$/.exec(text ?? "");
  return m ? { code: Number(m[1]), invocation: m[2] ?? "" } : undefined;
}

/** Local users with a home directory: the ones login scripts run for. */
async function localUsers(io: EnforcerIO): Promise<{ name: string; uid: number; home: string }[]> {
  return (await passwdEntries(io))
    .filter(({ uid, home }) =>
      /^\d+$/.test(uid) && Number(uid) >= 1000 && Number(uid) < 60000 && home.startsWith("/")
    )
    .map(({ name, uid, home }) => ({ name, uid: Number(uid), home }));
}

async function machineOutcome(io: EnforcerIO, r: RenderedScript, started?: string): Promise<Outcome> {
  const done = parseDone(await io.fs.readTextFile(`${MACHINE_DONE_DIR}/${r.done}`));
  if (done) {
    const match = done.invocation ? [`_SYSTEMD_INVOCATION_ID=${done.invocation}`] : ["-u", r.unit];
    return { kind: "done", code: done.code, lines: await lastLines(io, match) };
  }
  if (started) return { kind: "failed", words: `${started}: ${await lastLines(io, ["-u", r.unit])}` };
  if (r.script.trigger === ScriptTrigger.MACHINE_SHUTDOWN) {
    return { kind: "waiting", words: "armed: runs at the next shutdown" };
  }
  return {
    kind: "waiting",
    words: io.fs.root === "/"
      ? "waits for systemd to run it at the next boot (systemd is not running)"
      : "not run: the agent's root is not the node's",
  };
}

async function userOutcomes(io: EnforcerIO, r: RenderedScript): Promise<Outcome[]> {
  const out: Outcome[] = [];
  for (const user of await localUsers(io)) {
    const done = parseDone(await io.fs.readTextFile(`${user.home}/${USER_DONE_DIR}/${r.done}`));
    if (!done) continue;
    const lines = await lastLines(io, [`_UID=${user.uid}`, `_SYSTEMD_USER_UNIT=${r.unit}`]);
    out.push({ kind: "done", code: done.code, lines, user: user.name });
  }
  if (out.length === 0) {
    const when = r.script.trigger === ScriptTrigger.USER_LOGIN ? "login" : "logout";
    out.push({ kind: "waiting", words: `waits for the next ${when} of each user` });
  }
  return out;
}

async function readBack(io: EnforcerIO, p: ScriptsPlan): Promise<ScriptsState> {
  const state: ScriptsState = { outcomes: new Map(), files: new Map() };
  for (const path of p.files.keys()) {
    state.files.set(
      path,
      await io.fs.readTextFile(path).catch(() => undefined),
    );
  }
  const running = await systemdRunning(io);
  for (const { scripts } of p.byPolicy.values()) {
    for (const r of scripts) {
      let started: string | undefined;
      if (running && isMachine(r.script) && !(await io.fs.exists(`${MACHINE_DONE_DIR}/${r.done}`))) {
        // Startup scripts run now (systemctl waits for a oneshot); shutdown scripts are armed.
        const s = await io.runner.run("systemctl", ["start", r.unit], { timeoutMs: (r.timeout + 60) * 1000 });
        if (!s.success) {
          started = `systemctl start ${r.unit} failed: ${(s.stderr || s.stdout).trim().slice(0, 300)}`;
        }
      }
      state.outcomes.set(
        r.unit,
        isMachine(r.script) ? [await machineOutcome(io, r, started)] : await userOutcomes(io, r),
      );
    }
  }
  return state;
}

function scriptItem(r: RenderedScript, outcomes: Outcome[], intact: boolean): ItemResult {
  const schemaId = `script:${r.script.name}`;
  const key = `scripts[${r.index}]`;
  if (!intact) {
    return {
      schemaId,
      key,
      status: "NON_COMPLIANT",
      message: `${r.path} does not hold the unit as generated`,
    };
  }
  const failed = outcomes.filter((o) => o.kind === "failed" || (o.kind === "done" && o.code !== 0));
  if (failed.length) {
    const words = failed.slice(0, 3).map((o) =>
      o.kind === "done"
        ? `${o.user ? `${o.user}: ` : ""}exit ${o.code}${o.lines ? `: ${o.lines}` : ""}`
        : o.words
    );
    return { schemaId, key, status: "ERROR", message: `${r.unit} failed: ${words.join("; ")}` };
  }
  const done = outcomes.filter((o) => o.kind === "done");
  if (done.length) {
    const users = done.map((o) => o.user).filter(Boolean);
    const lines = done[0].kind === "done" && done[0].lines ? `; output: ${done[0].lines}` : "";
    return {
      schemaId,
      key,
      status: "COMPLIANT",
      message: `ran (exit 0)${users.length ? ` for ${users.join(", ")}` : ""} in ${r.unit}${lines}`,
    };
  }
  const waiting = outcomes[0]?.kind === "waiting" ? outcomes[0].words : "not run yet";
  const status = r.script.trigger === ScriptTrigger.MACHINE_STARTUP ? "UNKNOWN" : "COMPLIANT";
  return { schemaId, key, status, message: `${r.unit}: ${waiting}` };
}

function report(
  { policy }: Checked<ScriptsPolicy>,
  { plan: p, state }: { plan: ScriptsPlan; state: ScriptsState },
) {
  const planned = p.byPolicy.get(policy.id)!;
  if (planned.refused) {
    return {
      status: "ERROR" as const,
      message: `refused, nothing of this policy runs on this node: ${planned.refused}`,
      items: [],
    };
  }
  const items = planned.scripts.map((r) =>
    scriptItem(r, state.outcomes.get(r.unit) ?? [], state.files.get(r.path) === r.text)
  );
  return {
    ...summarize(items, {
      inEffect: (ok) => `${ok} script(s) ran or are armed`,
      noun: "script(s)",
      otherwise: (list) => {
        const bad = list.filter((i) => i.status === "ERROR" || i.status === "NON_COMPLIANT");
        if (bad.length === 0) return list.map((i) => i.message).join("; ").slice(0, 2000);
        return bad.slice(0, 3).map((i) => i.message).join("; ").slice(0, 2000);
      },
    }),
    items,
  };
}

/** Whether a file under svc's Scripts paths is svc's own. */
export function isOwnScriptsFile(text: string): boolean {
  return text.split("\n", 2).includes(SCRIPTS_MARKER);
}

/** The Scripts enforcer (in its own lane: a script may run for an hour); see the module documentation. */
export const scriptsEnforcer: Enforcer = {
  ...desktopEnforcer<ScriptsPolicy, ScriptsPlan, ScriptsState>({
    type: scriptsType.wireName,
    notifiesUsers: false,
    check: (policy) => checkedContent(policy, scriptsType),
    needs: [
      { command: "systemctl", missing: "systemd is not installed on this node (no systemctl)" },
      {
        anyOf: [SYSTEM_UNITS, "/usr/lib/systemd/system", "/lib/systemd/system"],
        directory: true,
        missing: "systemd is not installed on this node (no unit directory)",
      },
    ],
    isOwnContent: isOwnScriptsFile,
    strays: { dir: SYSTEM_UNITS, suffix: ".service" },
    plan,
    transaction: {
      what: "the script units",
      // systemd reads the units anew; units withdrawn while armed are stopped (their runner finds the file gone).
      activate: async (io, p, { changed }) => {
        if (!(await systemdRunning(io)) || changed.length === 0) return undefined;
        const reload = await io.runner.run("systemctl", ["daemon-reload"], { timeoutMs: 60_000 });
        if (!reload.success) {
          return `systemctl daemon-reload failed: ${(reload.stderr || reload.stdout).trim()}`;
        }
        for (const unit of p.withdrawn) {
          await io.runner.run("systemctl", ["stop", unit], { timeoutMs: 120_000 });
        }
        return undefined;
      },
      reactivate: async (io) => {
        if (await systemdRunning(io)) {
          await io.runner.run("systemctl", ["daemon-reload"], { timeoutMs: 60_000 });
        }
      },
      note: " (the previous units are back)",
    },
    readBack: (io, p) => readBack(io, p),
    report: (checked, context) => report(checked, context),
  }),
  background: true,
};
