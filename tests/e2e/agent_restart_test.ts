/**
 * An agent that dies (kill -9, or a runtime abort: Deno's HTTP/2 client can die by SIGSEGV or SIGABRT when the
 * server restarts, docs/upstream/) loses nothing, with real processes (svc-server on PGlite, svc-agent on a temp
 * root, real TLS):
 *
 * - the agent is killed with SIGKILL several times while a policy set it has just received is being applied and
 *   stored (a binding enabled, the snapshot arriving, the sync and the store write racing the kill);
 * - started again with the server stopped (its unit restarts it; the server may be away), it enforces a complete
 *   stored set at once: every policy it had ever fully received before the last kill, never a torn or empty one,
 *   and a hand edit is restored offline;
 * - when the server is back it converges on the server's set.
 *
 * And the unit brings a crashed agent back: its Restart= settings restart an agent ended by SIGSEGV or SIGABRT
 * (checked on the unit file, and with systemd-analyze verify), and an agent under a supervisor that follows those
 * settings, killed so mid-sync and with compliance reports it could not deliver, comes back, enforces its stored
 * set without rewriting what is already in place, and every report reaches the server.
 */
import assert from "node:assert/strict";
import { storySteps } from "../helpers/steps.ts";
import {
  e2eNode,
  e2eServer,
  endE2e,
  enrollE2eNode,
  ORIGINAL_POLICIES as ORIGINAL,
} from "../helpers/agent_fixtures.ts";
import { join } from "node:path";
import { type ServerProcess, startServerProcess } from "../helpers/process.ts";
import { type AgentProcess, Api, eventually, type Json, spawnAgent } from "../helpers/agent_process.ts";
import {
  parseUnit,
  superviseAgent,
  systemdRestarts,
  timeSpanMs,
  unitValue,
} from "../helpers/agent_supervisor.ts";

const NODE = "restart-node-1";
const KILLS = 5;

async function managedPolicies(path: string): Promise<Record<string, unknown> | undefined> {
  const text = await Deno.readTextFile(path).catch(() => undefined);
  if (!text) return undefined;
  try {
    return JSON.parse(text).policies;
  } catch {
    return undefined;
  }
}

/**
 * Creates, releases and binds (enabled) to `groupId` a Firefox policy that locks preference `<prefix>.<i>` and
 * installs `extensions` extensions (its size: large enough that receiving, merging and storing the set takes a
 * moment a kill can land in). Returns the policy as created.
 */
async function bindFirefoxPolicy(
  api: Api,
  groupId: string,
  options: { prefix: string; i: number; extensions: number },
): Promise<Json> {
  const { prefix, i } = options;
  const install = Array.from(
    { length: options.extensions },
    (_, n) => `https://addons.example/p${i}/e${n}.xpi`,
  );
  const policy = await api.call("POST", "/api/v1/policies/all", {
    name: `${prefix} ${i}`,
    type: "Firefox",
    content: JSON.stringify({
      Preferences: { [`${prefix}.${i}`]: { Value: true, Status: "locked" } },
      Extensions: { Install: install },
    }),
  });
  await api.call("PUT", `/api/v1/policies/all/${policy.id}/state`, { state: "released" });
  const binding = await api.call("POST", "/api/v1/policy-bindings", {
    policy_id: policy.id,
    node_group_id: groupId,
    priority: 10 + i,
  });
  await api.call("PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled" });
  return policy;
}

Deno.test({
  name: "agent killed mid-sync loses nothing: restarted without the server it enforces the stored set",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const node = await e2eNode("svc-e2e-restart-", { original: ORIGINAL });
    const { base, agentData, configPath, policiesFile } = node;
    const started = await e2eServer(node, { clientId: NODE });
    let server: ServerProcess | undefined = started.server;
    let api: Api | undefined = started.api;
    let agent: AgentProcess | undefined;
    const { ports, dataDir, agentEnv } = started;

    const step = storySteps(t);
    /** Keys of the policies bound so far, in order: policy i sets `Preferences` key `svc.restart.i`. */
    const bound: string[] = [];
    let groupId = "";
    const bind = async (i: number) => {
      await bindFirefoxPolicy(api!, groupId, { prefix: "svc.restart", i, extensions: 400 });
      bound.push(`svc.restart.${i}`);
    };
    /** The preference keys in the merged file (undefined while it is not a managed file). */
    const enforcedKeys = async () => {
      const policies = await managedPolicies(policiesFile);
      const prefs = policies?.Preferences as Record<string, unknown> | undefined;
      return prefs ? Object.keys(prefs).sort() : undefined;
    };
    try {
      await step("enrolled agent enforces the first policy and stores it", async () => {
        groupId = await enrollE2eNode(api!, node, agentEnv, "restart desktops");
        await bind(0);
        agent = spawnAgent(configPath, agentEnv);
        await eventually(
          async () => JSON.stringify(await enforcedKeys()) === JSON.stringify(["svc.restart.0"]),
          60_000,
          "the first policy",
          agent.output,
        );
        await eventually(
          () => Deno.stat(join(agentData, "state", "policies.json")).then(() => true),
          30_000,
          "the stored set",
          agent.output,
        );
      });

      /** Sets the agent has fully received (a complete snapshot): a kill may leave any of these stored. */
      const received: string[][] = [["svc.restart.0"]];
      await step(`killed with SIGKILL ${KILLS} times while a new set is applied and stored`, async () => {
        for (let k = 1; k <= KILLS; k++) {
          const mark = agent!.output().length;
          await bind(k);
          received.push([...bound].sort());
          // The snapshot is in: the sync, the merged write and the store write run now; kill in the middle.
          await agent!.waitForLog(new RegExp(`snapshot complete policies=${k + 1}`), 60_000, mark);
          assert.equal(await agent!.stop("SIGKILL"), 137);
          agent = spawnAgent(configPath, agentEnv);
          // Each restart again starts from the stored set, then takes the server's.
          await agent.waitForLog(/enforcing the policy set stored before the restart/, 60_000);
          await eventually(
            async () => JSON.stringify(await enforcedKeys()) === JSON.stringify([...bound].sort()),
            60_000,
            `the set of ${k + 1} policies`,
            agent.output,
          );
        }
        // The last one is killed mid-sync too, and stays down while the server goes away.
        const mark = agent!.output().length;
        await bind(KILLS + 1);
        received.push([...bound].sort());
        await agent!.waitForLog(new RegExp(`snapshot complete policies=${KILLS + 2}`), 60_000, mark);
        assert.equal(await agent!.stop("SIGKILL"), 137);
      });

      await step(
        "started with the server stopped: a complete stored set enforced, a tamper restored",
        async () => {
          api?.close();
          api = undefined;
          await server!.stop("SIGKILL");
          server = undefined;
          agent = spawnAgent(configPath, agentEnv);
          await agent.waitForLog(/enforcing the policy set stored before the restart/, 60_000);
          await agent.waitForLog(/sync done/, 60_000);
          const keys = await enforcedKeys();
          // The set stored before the last kill: the newest complete one, or the one before if the kill beat
          // the store write. Never torn, never empty, never the original file.
          const accepted = received.slice(-2).map((s) => JSON.stringify(s));
          assert.ok(accepted.includes(JSON.stringify(keys)), `enforced ${JSON.stringify(keys)}`);
          const managed = await Deno.readTextFile(policiesFile);
          await new Promise((r) => setTimeout(r, 2200)); // past the own-write suppression window
          await Deno.writeTextFile(policiesFile, ORIGINAL);
          await eventually(
            async () => (await Deno.readTextFile(policiesFile)) === managed,
            60_000,
            "the offline restore",
            agent.output,
          );
          assert.match(agent.output(), /tamper/i);
        },
      );

      await step("the server is back: the agent converges on the server's set", async () => {
        server = await startServerProcess({ dataDir, ports });
        await eventually(
          async () => JSON.stringify(await enforcedKeys()) === JSON.stringify([...bound].sort()),
          120_000,
          "every bound policy",
          agent!.output,
        );
      });
    } finally {
      await endE2e({ agent, api, server }, { base }, dataDir);
    }
  },
});

const UNIT_FILE = new URL("../../packaging/systemd/svc-agent.service", import.meta.url).pathname;

/** The unit's restart settings: Restart=, RestartSec= in ms, and whether systemd ever stops restarting it. */
async function unitRestartSettings() {
  const unit = parseUnit(await Deno.readTextFile(UNIT_FILE));
  return {
    restart: unitValue(unit, "Service", "Restart") ?? "no",
    restartSecMs: timeSpanMs(unitValue(unit, "Service", "RestartSec") ?? "100ms"),
    startLimitIntervalSec: unitValue(unit, "Unit", "StartLimitIntervalSec"),
  };
}

Deno.test("the agent's unit restarts it after a crash (SIGSEGV, SIGABRT), 30 s later, and never gives up", async () => {
  const { restart, restartSecMs, startLimitIntervalSec } = await unitRestartSettings();
  for (const end of [{ code: 139, signal: "SIGSEGV" }, { code: 134, signal: "SIGABRT" }] as const) {
    assert.ok(
      systemdRestarts(restart, end),
      `Restart=${restart} does not restart an agent ended by ${end.signal}`,
    );
  }
  // A clean stop (systemctl stop sends SIGTERM, the agent exits 0) is not undone.
  assert.ok(
    !systemdRestarts(restart, { code: 0, signal: null }),
    `Restart=${restart} restarts a stopped agent`,
  );
  // spec, Limits: "Agent service restart after failure: 30 seconds".
  assert.equal(restartSecMs, 30_000);
  // Rate limiting off: a crash loop already waits RestartSec between starts, and a policy agent that systemd
  // gave up on would leave the node unmanaged until someone notices.
  assert.equal(startLimitIntervalSec, "0");

  // systemd-analyze verify loads the unit as systemd would (unknown keys, bad values); its ExecStart program is
  // not installed here, so a copy runs /bin/true.
  const found = await new Deno.Command("sh", { args: ["-c", "command -v systemd-analyze"], stdout: "null" })
    .output();
  if (!found.success) {
    console.log("systemd-analyze is not installed: the unit's syntax is not verified here");
    return;
  }
  const dir = await Deno.makeTempDir({ prefix: "svc-unit-verify-" });
  try {
    const text = (await Deno.readTextFile(UNIT_FILE)).replace(/^ExecStart=\S+/m, "ExecStart=/bin/true");
    await Deno.writeTextFile(`${dir}/svc-agent.service`, text);
    const out = await new Deno.Command("systemd-analyze", {
      args: ["verify", `${dir}/svc-agent.service`],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.ok(out.success && stderr.trim() === "", `systemd-analyze verify svc-agent.service:\n${stderr}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "agent crashing (SIGSEGV, SIGABRT) mid-sync comes back under its unit's settings and loses no report",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const node = await e2eNode("svc-e2e-crash-");
    const { base, configPath, policiesFile } = node;
    const started = await e2eServer(node, { clientId: "crash-node-1" });
    let server: ServerProcess | undefined = started.server;
    let api: Api | undefined = started.api;
    const { ports, dataDir, agentEnv } = started;
    const { restart, restartSecMs } = await unitRestartSettings();
    // The unit's own settings decide whether the agent comes back; its 30 s delay is scaled to 1 s here (the
    // delay itself is checked on the unit above).
    const agent = superviseAgent({ configPath, env: agentEnv, restart, restartDelayMs: restartSecMs / 30 });

    const step = storySteps(t);
    let groupId = "";
    let nodeId = "";
    /** Bound policies: id and version. */
    const policies: { id: string; version: number }[] = [];
    const bind = async (i: number) => {
      // About 120 KiB each: receiving, merging, writing and reading back the set takes a moment to land in.
      const policy = await bindFirefoxPolicy(api!, groupId, { prefix: "svc.crash", i, extensions: 3000 });
      policies.push({ id: policy.id, version: policy.version });
    };
    const enforcedKeys = async () => {
      const prefs = (await managedPolicies(policiesFile))?.Preferences as Record<string, unknown> | undefined;
      return prefs ? Object.keys(prefs).sort() : [];
    };
    const expectedKeys = () => policies.map((_, i) => `svc.crash.${i}`).sort();
    /** The node's compliance results that are COMPLIANT for the current version of every bound policy. */
    const allReported = async (after = 0) => {
      const { results } = await api!.call("GET", `/api/v1/nodes/${nodeId}/compliance`);
      return policies.every((p) =>
        results.some((r: Json) =>
          r.policy_id === p.id && r.policy_version === p.version && r.status === "compliant" &&
          Date.parse(r.reported_at) >= after
        )
      );
    };
    /** The managed file's identity: a rewrite (temporary file renamed over it) changes inode and mtime. */
    const fileIdentity = async () => {
      const info = await Deno.stat(policiesFile);
      return `${info.ino}@${info.mtime?.getTime()}`;
    };
    try {
      await step("enrolled agent under the supervisor enforces and reports a first policy", async () => {
        groupId = await enrollE2eNode(api!, node, agentEnv, "crash desktops");
        const page = await api!.call("GET", "/api/v1/nodes?search=crash-node-1");
        nodeId = page.items.find((n: Json) => n.name === "crash-node-1").id;
        await bind(0);
        await eventually(async () => (await allReported()) && true, 90_000, "the first report", agent.output);
        assert.deepEqual(await enforcedKeys(), expectedKeys());
      });

      await step(
        "SIGSEGV while a new set is synced: restarted, it converges and every report arrives",
        async () => {
          const mark = agent.output().length;
          await bind(1);
          // The snapshot is in: the sync, the merged write, the store write and the reports run now.
          await agent.waitForLog(/snapshot complete policies=2/, 60_000, mark);
          const ended = agent.ends().length;
          await agent.segfault();
          await agent.waitForStart(agent.starts() + 1, 60_000);
          assert.deepEqual(agent.ends()[ended], { code: 139, signal: "SIGSEGV" });
          await agent.waitForLog(/enforcing the policy set stored before the restart/, 60_000, mark);
          await eventually(
            async () =>
              JSON.stringify(await enforcedKeys()) === JSON.stringify(expectedKeys()) && allReported(),
            120_000,
            "both policies enforced and reported",
            agent.output,
          );
        },
      );

      await step(
        "SIGABRT with undelivered reports (server down): restarted, nothing rewritten, every report re-sent",
        async () => {
          await agent.waitForLog(/policy stream is in sync/, 60_000, agent.output().lastIndexOf("--- start"));
          api!.close();
          api = undefined;
          await server!.stop("SIGKILL");
          server = undefined;
          // A hand edit while the server is away: restored at once, its reports cannot be delivered.
          const managed = await Deno.readTextFile(policiesFile);
          await new Promise((r) => setTimeout(r, 2200)); // past the own-write suppression window
          const mark = agent.output().length;
          await Deno.writeTextFile(policiesFile, ORIGINAL);
          await agent.waitForLog(
            /sync done reason="tamper restore[^\n]*restored=\/etc\/firefox/,
            60_000,
            mark,
          );
          assert.equal(await Deno.readTextFile(policiesFile), managed);
          await agent.waitForLog(/compliance report failed/, 30_000, mark);
          const restored = await fileIdentity();
          const ended = agent.ends().length;
          agent.kill("SIGABRT");
          await agent.waitForStart(agent.starts() + 1, 60_000);
          assert.deepEqual(agent.ends()[ended], { code: 134, signal: "SIGABRT" });
          const restartMark = agent.output().lastIndexOf("--- start");
          await agent.waitForLog(
            /sync done reason="agent started with the stored policy set"/,
            60_000,
            restartMark,
          );
          // The stored set is what is on disk already: enforced again without a write.
          assert.match(
            agent.output().slice(restartMark),
            /sync done reason="agent started[^\n]* written=none/,
          );
          assert.equal(await fileIdentity(), restored);

          const back = Date.now();
          server = await startServerProcess({ dataDir, ports });
          api = await Api.login(server);
          // Every report is sent again by the restarted agent (the dead one could reach no server).
          await eventually(() => allReported(back), 120_000, "every report after the restart", agent.output);
          assert.equal(
            await fileIdentity(),
            restored,
            "the server's snapshot made the agent rewrite the file",
          );
          assert.doesNotMatch(agent.output().slice(restartMark), /written=\/etc\/firefox/);
        },
      );
    } finally {
      await agent.stop();
      if (step.failed) {
        const file = `${base}.agent.log`;
        await Deno.writeTextFile(file, agent.output());
        console.log(`the agent's output of every start: ${file}`);
      }
      api?.close();
      await server?.stop("SIGKILL").catch(() => {});
      if (Deno.env.get("SVC_E2E_KEEP") !== "1") {
        await Deno.remove(base, { recursive: true }).catch(() => {});
        await Deno.remove(dataDir, { recursive: true }).catch(() => {});
      }
    }
  },
});
