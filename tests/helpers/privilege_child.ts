/**
 * Runs the Privilege enforcer against the machine's real sudo and a real polkitd, inside a private mount namespace
 * that tests/agent/privilege_test.ts prepares (`unshare -m`): `/etc/sudoers.d` is an empty tmpfs,
 * `/etc/polkit-1/rules.d` a temp directory, `/etc/passwd` and `/etc/group` copies with the test's accounts, so
 * nothing of the machine's own configuration is touched. This process starts a private system bus and polkitd (as
 * tests/agent/polkit_test.ts does), then plays the scenario's steps through the sync engine with the agent's root
 * at `/`, and prints one JSON line per step: the compliance reports, the files, and what `sudo -l` says.
 *
 * Usage: deno run -A tests/helpers/privilege_child.ts <temp dir> <scenario.json>
 */
import { buildAgentConfig } from "../../agent/config.ts";
import { RootFs } from "../../agent/fs.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";
import { Runner } from "../../agent/runner.ts";
import { ManagedFiles } from "../../agent/sync/managed_files.ts";
import { SyncEngine } from "../../agent/sync/engine.ts";
import type { CachedPolicy, PolicyResult } from "../../agent/sync/types.ts";
import { privilegeEnforcer } from "../../agent/enforcers/privilege.ts";

/** One step: the policies the node has, and files another admin writes first (null removes). */
export interface PrivilegeStep {
  policies: CachedPolicy[];
  foreign?: Record<string, string | null>;
  /** Accounts whose `sudo -l -U <user> /usr/bin/true` answer is recorded. */
  ask: string[];
}

/** What a step printed. */
export interface PrivilegeStepResult {
  reports: Record<string, PolicyResult>;
  files: Record<string, string | null>;
  modes: Record<string, number | null>;
  sudo: Record<string, number>;
  visudo: number;
}

const [dir, scenarioPath] = Deno.args;
const steps = JSON.parse(await Deno.readTextFile(scenarioPath)) as PrivilegeStep[];
const children: Deno.ChildProcess[] = [];
const text = (b: Uint8Array) => new TextDecoder().decode(b);

async function run(cmd: string, args: string[]): Promise<{ code: number; out: string }> {
  const o = await new Deno.Command("timeout", {
    args: ["20", cmd, ...args],
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  return { code: o.code, out: text(o.stdout) + text(o.stderr) };
}

try {
  children.push(
    new Deno.Command("dbus-daemon", { args: [`--config-file=${dir}/bus.conf`, "--nofork"], stderr: "null" })
      .spawn(),
  );
  for (let i = 0; i < 100 && !(await Deno.stat(`${dir}/bus.sock`).then(() => true, () => false)); i++) {
    await new Promise((r) => setTimeout(r, 100));
  }
  children.push(
    new Deno.Command("/usr/lib/polkit-1/polkitd", { args: ["--no-debug"], stdout: "null", stderr: "null" })
      .spawn(),
  );
  let ready = false;
  for (let i = 0; i < 100 && !ready; i++) {
    ready = (await run("pkaction", [])).out.includes("org.freedesktop");
    if (!ready) await new Promise((r) => setTimeout(r, 200));
  }
  if (!ready) throw new Error("polkitd did not answer on the private bus");

  const dataDir = `${dir}/data`;
  const { config } = buildAgentConfig(
    { agent: { root_dir: "/", client_id: "node-1" }, enrollment: { data_dir: dataDir } },
    "test.yaml",
  );
  const managed = await ManagedFiles.load(dataDir, SILENT_LOGGER);
  const reports = new Map<string, PolicyResult>();
  const engine = new SyncEngine({
    fs: await RootFs.open("/"),
    runner: new Runner(),
    logger: SILENT_LOGGER,
    config,
    managed,
    enforcers: new Map([[privilegeEnforcer.type, privilegeEnforcer]]),
    reportCompliance: (policy, result) => {
      reports.set(policy.id, result);
      return Promise.resolve();
    },
  });
  for (const step of steps) {
    for (const [path, content] of Object.entries(step.foreign ?? {})) {
      if (content === null) await Deno.remove(path).catch(() => {});
      else await Deno.writeTextFile(path, content, { mode: 0o440 });
    }
    reports.clear();
    step.policies.forEach((p, i) =>
      engine.handleEvent({ kind: "SNAPSHOT", policy: p, snapshotComplete: i === step.policies.length - 1 })
    );
    if (step.policies.length === 0) engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
    await engine.idle();
    const result: PrivilegeStepResult = { reports: {}, files: {}, modes: {}, sudo: {}, visudo: 0 };
    for (const [id, r] of reports) result.reports[id] = r;
    for (const path of ["/etc/sudoers.d/zz-svc-privilege", "/etc/polkit-1/rules.d/05-svc-privilege.rules"]) {
      result.files[path] = await Deno.readTextFile(path).catch(() => null);
      result.modes[path] = await Deno.stat(path).then((s) => (s.mode ?? 0) & 0o777, () => null);
    }
    for (const user of step.ask) {
      result.sudo[user] = (await run("sudo", ["-n", "-l", "-U", user, "/usr/bin/true"])).code;
    }
    result.visudo = (await run("visudo", ["-c"])).code;
    console.log(JSON.stringify(result));
  }
} finally {
  for (const child of children) {
    try {
      child.kill("SIGTERM");
    } catch {
      // already gone
    }
    await child.status;
  }
}
