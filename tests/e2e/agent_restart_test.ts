/**
 * An agent that dies (kill -9, as a runtime abort would end it) loses nothing, with real processes (svc-server on
 * PGlite, svc-agent on a temp root, real TLS):
 *
 * - the agent is killed with SIGKILL several times while a policy set it has just received is being applied and
 *   stored (a binding enabled, the snapshot arriving, the sync and the store write racing the kill);
 * - started again with the server stopped (its unit restarts it; the server may be away), it enforces a complete
 *   stored set at once: every policy it had ever fully received before the last kill, never a torn or empty one,
 *   and a hand edit is restored offline;
 * - when the server is back it converges on the server's set.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { type ServerProcess, startServerProcess } from "../helpers/process.ts";
import {
  type AgentProcess,
  Api,
  eventually,
  runAgentOnce,
  spawnAgent,
  writeAgentConfig,
} from "../helpers/agent_process.ts";

const NODE = "restart-node-1";
const POLICIES_JSON = "/etc/firefox/policies/policies.json";
const ORIGINAL = `{"policies": {"DisableAppUpdate": false}}\n`;
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

Deno.test({
  name: "agent killed mid-sync loses nothing: restarted without the server it enforces the stored set",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const base = await Deno.makeTempDir({ prefix: "svc-e2e-restart-" });
    const root = join(base, "root");
    const agentData = join(base, "agent-data");
    const policiesFile = `${root}${POLICIES_JSON}`;
    await Deno.mkdir(`${root}/usr/lib/firefox`, { recursive: true });
    await Deno.mkdir(`${root}/etc/firefox/policies`, { recursive: true });
    await Deno.writeTextFile(policiesFile, ORIGINAL);
    await Deno.writeTextFile(
      `${root}/etc/os-release`,
      'NAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n',
    );

    let server: ServerProcess | undefined = await startServerProcess();
    let api: Api | undefined = await Api.login(server);
    let agent: AgentProcess | undefined;
    const ports = { web: server.webPort, policy: server.policyPort, metrics: server.metricsPort };
    const dataDir = server.dataDir;
    const configPath = join(base, "agent.yaml");
    const agentEnv = await writeAgentConfig(configPath, server, {
      clientId: NODE,
      root,
      dataDir: agentData,
    });

    let failed = false;
    const step = async (name: string, fn: () => Promise<void>) => {
      if (failed) return;
      if (!(await t.step(name, fn))) failed = true;
    };
    /** Keys of the policies bound so far, in order: policy i sets `Preferences` key `svc.restart.i`. */
    const bound: string[] = [];
    let groupId = "";
    const bind = async (i: number) => {
      // Large enough that receiving, merging and storing the set takes a moment the kill can land in.
      const install = Array.from({ length: 400 }, (_, n) => `https://addons.example/p${i}/e${n}.xpi`);
      const policy = await api!.call("POST", "/api/v1/policies/all", {
        name: `restart ${i}`,
        type: "Firefox",
        content: JSON.stringify({
          Preferences: { [`svc.restart.${i}`]: { Value: true, Status: "locked" } },
          Extensions: { Install: install },
        }),
      });
      await api!.call("PUT", `/api/v1/policies/all/${policy.id}/state`, { state: "released" });
      const binding = await api!.call("POST", "/api/v1/policy-bindings", {
        policy_id: policy.id,
        node_group_id: groupId,
        priority: 10 + i,
      });
      await api!.call("PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled" });
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
        groupId = (await api!.call("POST", "/api/v1/node-groups", { name: "restart desktops" })).id;
        const { token } = await api!.call("POST", `/api/v1/node-groups/${groupId}/tokens`);
        await Deno.writeTextFile(join(base, "token"), token);
        const enrolled = await runAgentOnce(configPath, agentEnv, ["--token-file", join(base, "token")]);
        assert.equal(enrolled.code, 0, enrolled.stderr);
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
      await agent?.stop("SIGKILL").catch(() => {});
      api?.close();
      await server?.stop("SIGKILL").catch(() => {});
      if (Deno.env.get("SVC_E2E_KEEP") !== "1") {
        await Deno.remove(base, { recursive: true }).catch(() => {});
        await Deno.remove(dataDir, { recursive: true }).catch(() => {});
      }
    }
  },
});
