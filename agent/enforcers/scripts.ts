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
 * Parts: `scripts/runner.ts` (the runner and its done-files), `scripts/units.ts` (unit rendering), `scripts/plan.ts`
 * (signature check), `scripts/read_back.ts` (starting, done-files, journal).
 *
 * @module
 */

import type { ScriptsPolicy } from "../../shared/gen/svc/policy/v1/scripts_pb.ts";
import { ScriptTrigger } from "../../shared/gen/svc/policy/v1/scripts_pb.ts";
import { scriptsType } from "../../shared/policy_types/scripts.ts";
import type { Enforcer, ItemResult } from "../sync/types.ts";
import { type Checked, desktopEnforcer, summarize } from "./desktop_enforcer.ts";
import { checkedContent } from "./revalidate.ts";
import { planScripts, type ScriptsPlan } from "./scripts/plan.ts";
import { type Outcome, readBackScripts, type ScriptsState, systemdRunning } from "./scripts/read_back.ts";
import { SCRIPTS_MARKER } from "./scripts/runner.ts";
import { type RenderedScript, SYSTEM_UNITS } from "./scripts/units.ts";

/** The unit renderer, which tests/shared/privilege_scripts_types_test.ts checks against the type's limits. */
export { renderScriptUnit } from "./scripts/units.ts";

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
    plan: planScripts,
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
    readBack: (io, p) => readBackScripts(io, p),
    report: (checked, context) => report(checked, context),
  }),
  background: true,
};
