/**
 * The node's own life, with real processes (svc-server on PGlite, svc-agent on a temp root, real TLS):
 *
 * - a Firefox policy that arrived before Firefox is INAPPLICABLE; Firefox appearing on the node (its install
 *   directory created, as a package manager does) gets the policy written with no server change, and long
 *   before the periodic re-evaluation (set to a day here) could have done it;
 * - `svc-agent status`, as a user without root, says what is applied from which policy and version;
 * - an agent restarted while the server is down (a reboot on a train) enforces the stored policy set at once:
 *   a hand edit is restored offline, the status says where the policies come from, and nothing is lifted;
 * - when the server is back the agent reconnects and reports.
 */
import assert from "node:assert/strict";
import { e2eNode, e2eServer, enrollE2eNode, POLICIES_JSON } from "../helpers/agent_fixtures.ts";
import { join } from "node:path";
import { type ServerProcess, startServerProcess } from "../helpers/process.ts";
import {
  type AgentProcess,
  Api,
  bindReleasedPolicy,
  eventually,
  type Json,
  spawnAgent,
} from "../helpers/agent_process.ts";
import type { AgentStatus } from "../../agent/status.ts";
import { storySteps } from "../helpers/steps.ts";

const NODE = "life-node-1";

async function readText(path: string): Promise<string | undefined> {
  return await Deno.readTextFile(path).catch(() => undefined);
}

Deno.test({
  name: "agent follows the node: software installed later, status, offline restart, server back",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const node = await e2eNode("svc-e2e-life-", { firefox: false });
    const { base, root, configPath, policiesFile } = node;
    const statusFile = join(base, "run", "status.json");
    const started = await e2eServer(node, {
      clientId: NODE,
      // Only the node watcher can notice the install within this test: the safety net runs once a day here.
      agent: { reevaluate_interval_seconds: 86_400, status_file: statusFile },
    });
    let server: ServerProcess | undefined = started.server;
    let api: Api | undefined = started.api;
    let agent: AgentProcess | undefined;
    const { ports, dataDir, agentEnv } = started;
    const status = async () => JSON.parse(await Deno.readTextFile(statusFile)) as AgentStatus;
    const compliance = async (policyId: string) => {
      const page = await api!.call("GET", `/api/v1/compliance?policy_id=${policyId}`);
      return page.items.find((r: Json) => r.node_name === NODE);
    };

    const step = storySteps(t);
    let policyId = "";
    try {
      await step("a Firefox policy before Firefox is installed: INAPPLICABLE, nothing written", async () => {
        const groupId = await enrollE2eNode(api!, node, agentEnv, "life desktops");
        ({ policyId } = await bindReleasedPolicy(api!, {
          groupId,
          name: "life firefox",
          content: { DisableTelemetry: true },
          priority: 10,
        }));
        agent = spawnAgent(configPath, agentEnv);
        const s = await eventually(
          async () => {
            const s = await status().catch(() => undefined);
            return s?.policies.find((p) => p.id === policyId) ? s : undefined;
          },
          60_000,
          "the policy's result in the status file",
          agent.output,
        );
        const entry = s.policies.find((p) => p.id === policyId)!;
        assert.equal(entry.status, "INAPPLICABLE");
        assert.match(entry.message, /Firefox is not installed/);
        assert.equal(s.source, "server");
        assert.ok(s.watching.includes("/usr/lib/firefox-esr"), `watching ${s.watching}`);
        assert.equal(await readText(policiesFile), undefined);
      });

      await step("Firefox appears on the node: the policy lands with no server change", async () => {
        const mark = agent!.output().length;
        // What dpkg does first when it unpacks firefox-esr: the directory, then its files.
        await Deno.mkdir(`${root}/usr/lib/firefox-esr/browser`, { recursive: true });
        await Deno.writeTextFile(`${root}/usr/lib/firefox-esr/application.ini`, "[App]\nName=Firefox\n");
        const started = Date.now();
        const text = await eventually(
          async () => {
            const text = await readText(policiesFile);
            return text && JSON.parse(text).policies?.DisableTelemetry === true ? text : undefined;
          },
          60_000,
          "the Firefox policy written after Firefox appeared",
          agent!.output,
        );
        console.log(`policy on disk ${Date.now() - started} ms after Firefox appeared`);
        assert.ok(text);
        assert.match(agent!.output().slice(mark), /the node changed; re-evaluating its policies/);
        await eventually(
          async () => (await compliance(policyId))?.status === "compliant",
          30_000,
          "COMPLIANT",
          agent!.output,
        );
        const entry = (await status()).policies.find((p) => p.id === policyId)!;
        assert.equal(entry.status, "COMPLIANT");
        assert.equal(entry.version, 1);
      });

      await step(
        "svc-agent status: policy, version, result; the summary is readable without root",
        async () => {
          await Deno.chmod(base, 0o755);
          await Deno.chmod(join(base, "run"), 0o755);
          // The summary is readable by a user without root (the kernel's own check, not only the mode bits); the
          // booted-node test runs the packaged command itself as nobody.
          const asNobody = await new Deno.Command("runuser", {
            args: ["-u", "nobody", "--", "cat", statusFile],
            stdout: "piped",
            stderr: "piped",
          }).output();
          assert.ok(asNobody.success, new TextDecoder().decode(asNobody.stderr));
          const out = await new Deno.Command(Deno.execPath(), {
            args: [
              "run",
              "-A",
              "--quiet",
              new URL("../../agent/main.ts", import.meta.url).pathname,
              "status",
              "--file",
              statusFile,
            ],
            env: { NO_COLOR: "1" },
            stdout: "piped",
            stderr: "piped",
          }).output();
          const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
          assert.equal(out.code, 0, text);
          assert.match(text, /life firefox \(Firefox, version 1, priority 10\): COMPLIANT/);
          assert.match(text, /Policies from: the server/);
          assert.match(text, new RegExp(`${POLICIES_JSON} \\(Firefox\\)`));
          assert.equal((await Deno.stat(statusFile)).mode! & 0o777, 0o644);
          // Setting names and results only: the policy content (its values) never reaches the summary.
          const summary = JSON.parse(await Deno.readTextFile(statusFile));
          assert.ok(
            summary.policies.every((p: Record<string, unknown>) => !("content" in p) && !("typed" in p)),
          );
        },
      );

      await step(
        "restart without the server: the stored set is enforced, a hand edit restored offline",
        async () => {
          await server!.stop();
          api?.close();
          await agent!.stop();
          agent = spawnAgent(configPath, agentEnv);
          await agent.waitForLog(/enforcing the policy set stored before the restart/, 60_000);
          await eventually(
            async () => (await status()).source === "stored",
            30_000,
            "status source stored",
            agent.output,
          );
          await agent.waitForLog(/sync done/, 60_000);
          await Deno.writeTextFile(policiesFile, `{"policies": {"DisableTelemetry": false}}\n`);
          await eventually(
            async () =>
              JSON.parse((await readText(policiesFile)) ?? "{}").policies?.DisableTelemetry === true,
            60_000,
            "the offline restore",
            agent.output,
          );
          const s = await status();
          assert.notEqual(s.connection.state, "connected");
          assert.equal(s.policies.find((p) => p.id === policyId)?.status, "COMPLIANT");
        },
      );

      await step("the server is back: the agent reconnects and reports", async () => {
        server = await startServerProcess({ dataDir, ports });
        api = await Api.login(server);
        await eventually(
          async () => {
            const s = await status();
            return s.connection.state === "connected" && s.source === "server";
          },
          120_000,
          "connected again",
          agent!.output,
        );
        const page = await api.call("GET", `/api/v1/nodes?search=${NODE}`);
        const node = page.items.find((n: Json) => n.name === NODE);
        await eventually(
          async () => {
            const n = await api!.call("GET", `/api/v1/nodes/${node.id}`);
            return n.status === "online";
          },
          60_000,
          "node online",
          agent!.output,
        );
      });
    } finally {
      await agent?.stop();
      api?.close();
      await server?.stop();
      await Deno.remove(base, { recursive: true }).catch(() => {});
    }
  },
});
