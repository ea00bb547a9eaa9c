/**
 * What happened to each script on the node: on the node itself with systemd running, startup scripts that have
 * not run are started now (and waited for) and shutdown scripts armed; then each script's done-file (its exit
 * status, per user for user scripts) and the last lines of its run from the journal.
 *
 * @module
 */

import { ScriptTrigger } from "../../../shared/gen/svc/policy/v1/scripts_pb.ts";
import type { EnforcerIO } from "../../sync/types.ts";
import { passwdEntries } from "../node_accounts.ts";
import type { ScriptsPlan } from "./plan.ts";
import { MACHINE_DONE_DIR, parseDone, USER_DONE_DIR } from "./runner.ts";
import { isMachine, type RenderedScript } from "./units.ts";

/** What happened to one script on the node. */
export type Outcome =
  | { kind: "done"; code: number; lines: string; user?: string }
  | { kind: "failed"; words: string }
  | { kind: "waiting"; words: string };

export interface ScriptsState {
  /** Unit → outcome(s): one for a machine script, one per user who ran it for a user script. */
  outcomes: Map<string, Outcome[]>;
  files: Map<string, string | undefined>;
}

/** Whether the agent can start units: on the node itself, with systemd running. */
export async function systemdRunning(io: EnforcerIO): Promise<boolean> {
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

export async function readBackScripts(io: EnforcerIO, p: ScriptsPlan): Promise<ScriptsState> {
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
