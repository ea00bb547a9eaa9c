/**
 * svc-agent against a real svc-server process, for the behaviour an operator sees over time:
 *
 * - reconnect: a reconnect that receives nothing new (equal revision) counts as healthy, so after the
 *   server is killed again the agent starts over at 1 s (server restarted twice within a minute); every
 *   failed reconnect is one WARN line, never JavaScript error text; every sync is one INFO line naming
 *   the files written, removed and restored;
 * - revocation: the agent says once what the administrator must do, keeps its key and the enforced
 *   files, and the Re-enroll token from REST run through `svc-agent` brings the same node back online
 *   without restarting the daemon.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { type ServerProcess, startServerProcess } from "../helpers/process.ts";
import {
  type AgentProcess,
  Api,
  bindReleasedPolicy,
  enrollIntoNewGroup,
  eventually,
  type Json,
  runAgentOnce,
  spawnAgent,
  writeAgentConfig,
} from "../helpers/agent_process.ts";

const NODE = "hardening-node";
const POLICIES_JSON = "/etc/firefox/policies/policies.json";

interface Fleet {
  base: string;
  root: string;
  agentData: string;
  configPath: string;
  agentEnv: Record<string, string>;
  server: ServerProcess;
  api: Api;
  groupId: string;
  nodeId: string;
  agent: AgentProcess;
  restartServer(): Promise<void>;
  cleanup(): Promise<void>;
}

/** Server + enrolled agent (log level info, as shipped) + one released Firefox policy bound to its group. */
async function startFleet(
  logLevel = "info",
  beforeAgent: (api: Api) => Promise<void> = () => Promise.resolve(),
): Promise<Fleet> {
  const base = await Deno.makeTempDir({ prefix: "svc-e2e-hardening-" });
  const root = join(base, "root");
  const agentData = join(base, "agent-data");
  await Deno.mkdir(`${root}/usr/lib/firefox`, { recursive: true });
  let server = await startServerProcess();
  const ports = { web: server.webPort, policy: server.policyPort, metrics: server.metricsPort };
  const fleet: Partial<Fleet> = { base, root, agentData, server };
  fleet.api = await Api.login(server);
  const configPath = join(base, "agent.yaml");
  const agentEnv = await writeAgentConfig(configPath, server, {
    clientId: NODE,
    root,
    dataDir: agentData,
    logLevel,
  });
  const api = fleet.api;
  const groupId = await enrollIntoNewGroup(api, {
    groupName: "hardening",
    configPath,
    env: agentEnv,
    tokenFile: join(base, "token"),
  });
  const { policyId } = await bindReleasedPolicy(api, {
    groupId,
    name: "Baseline",
    content: { DisableTelemetry: true },
    priority: 10,
  });
  await beforeAgent(api);
  const agent = spawnAgent(configPath, agentEnv);
  const node = await waitNode(api, (n) => n.status === "online", agent);
  await agent.waitForLog(/INFO sync done .*written=\/etc\/firefox\/policies\/policies\.json/, 30_000);
  // The start is over only when the server holds the policy's report: a test that kills the server earlier
  // would see that report fail and be sent again after the reconnect.
  await eventually(
    async () => {
      const { results } = await api.call("GET", `/api/v1/nodes/${node.id}/compliance`);
      return (results as Json[]).some((r) => r.policy_id === policyId && r.reported_version !== null) ||
        undefined;
    },
    60_000,
    "the first compliance report reaches the server",
    agent.output,
  );
  return Object.assign(fleet, {
    configPath,
    agentEnv,
    groupId,
    nodeId: node.id,
    agent,
    async restartServer() {
      fleet.api?.close();
      server = fleet.server = await startServerProcess({ dataDir: server.dataDir, ports });
      fleet.api = await Api.login(server);
    },
    async cleanup() {
      await fleet.agent?.stop("SIGKILL").catch(() => {});
      fleet.api?.close();
      await fleet.server?.stop("SIGKILL").catch(() => {});
      await Deno.remove(base, { recursive: true }).catch(() => {});
      await Deno.remove(server.dataDir, { recursive: true }).catch(() => {});
    },
  }) as Fleet;
}

async function waitNode(api: Api, ok: (node: Json) => boolean, agent: AgentProcess): Promise<Json> {
  return await eventually(
    async () => {
      const page = await api.call("GET", `/api/v1/nodes?search=${NODE}`);
      const node = page.items.find((n: Json) => n.name === NODE);
      return node && ok(node) ? node : undefined;
    },
    60_000,
    "the node's status",
    agent.output,
  );
}

/** Lines of the agent's output after `mark`. */
function linesAfter(agent: AgentProcess, mark: number): string[] {
  return agent.output().slice(mark).split("\n").filter((l) => l.trim() !== "");
}

const JS_ERROR_TEXT =
  /Cannot read properties|is not a function|is not defined|TypeError|ReferenceError|undefined \(reading/;

Deno.test({
  name:
    "agent reconnect: an equal-revision answer resets the backoff (server restarted twice); one WARN per failed reconnect",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const fleet = await startFleet();
    try {
      const { agent } = fleet;
      for (const round of [1, 2]) {
        const mark = agent.output().length;
        await fleet.server.stop("SIGKILL");
        // The backoff grows while the server is away: 1 s, then 2 s.
        await agent.waitForLog(/WARN .*reconnect_in_ms=2000/, 60_000, mark);
        await fleet.restartServer();
        // Same revision as before the kill: the server has nothing to send and says so.
        await agent.waitForLog(/policy stream is in sync how="up to date"/, 60_000, mark);
        const lines = linesAfter(agent, mark);
        const delays = lines.flatMap((l) => /WARN .*reconnect_in_ms=(\d+)/.exec(l)?.[1] ?? []).map(Number);
        assert.deepEqual(
          delays.slice(0, 2),
          [1000, 2000],
          `round ${round}: the backoff starts at 1 s\n${lines.join("\n")}`,
        );
        const warns = lines.filter((l) => / WARN /.test(l));
        const attempts = lines.filter((l) => /INFO connecting to the policy service/.test(l));
        assert.equal(warns.length, attempts.length, `one WARN per failed connection\n${lines.join("\n")}`);
        assert.ok(warns.every((l) => /reconnect_in_ms=/.test(l)), warns.join("\n"));
        await waitNode(fleet.api, (n) => n.status === "online", agent);
      }
      assert.doesNotMatch(agent.output(), JS_ERROR_TEXT);
      // Nothing changed on the server: no sync ran after the reconnects, and the one sync line of the
      // start named what it wrote.
      const syncs = agent.output().split("\n").filter((l) => /INFO sync done/.test(l));
      assert.equal(syncs.length, 1, syncs.join("\n"));
      assert.match(
        syncs[0],
        /policies=1 written=\/etc\/firefox\/policies\/policies\.json removed=none restored=none/,
      );
    } finally {
      await fleet.cleanup();
    }
  },
});

Deno.test({
  name:
    "agent revocation: said once with the fix, key and files kept, Re-enroll token brings the same node back",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const fleet = await startFleet("debug");
    try {
      const { agent, api, nodeId, agentData } = fleet;
      const policiesFile = `${fleet.root}${POLICIES_JSON}`;
      const enforced = await Deno.readTextFile(policiesFile);
      const keyBefore = await Deno.readTextFile(join(agentData, "agent.key"));
      const mark = agent.output().length;
      await api.call("POST", `/api/v1/nodes/${nodeId}/revoke`, { reason: "e2e" });
      await agent.waitForLog(
        /ERROR the server refuses this node's certificate: an administrator must re-enroll/,
        30_000,
        mark,
      );
      // Several refused retries later there is still exactly one such line, and no per-retry WARN.
      const refusals = () =>
        linesAfter(agent, mark).filter((l) => /DEBUG the server still refuses/.test(l)).length;
      await eventually(() => refusals() >= 3, 60_000, "three refused retries", agent.output);
      const lines = linesAfter(agent, mark);
      assert.equal(lines.filter((l) => / WARN /.test(l)).length, 0, lines.join("\n"));
      assert.equal(
        lines.filter((l) => /ERROR the server refuses/.test(l)).length,
        1,
        lines.join("\n"),
      );
      assert.match(lines.join("\n"), /Nodes → hardening-node → Re-enroll/);
      assert.doesNotMatch(lines.join("\n"), JS_ERROR_TEXT);
      // The agent keeps enforcing what it had and keeps its identity.
      assert.equal(await Deno.readTextFile(policiesFile), enforced);
      assert.equal(await Deno.readTextFile(join(agentData, "agent.key")), keyBefore);

      const reEnroll = await fleet.api.call("POST", `/api/v1/nodes/${nodeId}/re-enroll`);
      assert.equal(reEnroll.node_name, NODE);
      await Deno.writeTextFile(join(fleet.base, "token"), reEnroll.token);
      const result = await runAgentOnce(fleet.configPath, fleet.agentEnv, [
        "--token-file",
        join(fleet.base, "token"),
      ]);
      assert.equal(result.code, 0, result.stderr);
      assert.notEqual(await Deno.readTextFile(join(agentData, "agent.key")), keyBefore);
      // The running daemon picks the new certificate up at its next retry: same node, online again.
      await agent.waitForLog(/the server accepts this node's certificate again/, 90_000, mark);
      const node = await waitNode(fleet.api, (n) => n.status === "online", agent);
      assert.equal(node.id, nodeId);
      const detail = await fleet.api.call("GET", `/api/v1/nodes/${nodeId}`);
      assert.equal(detail.cert_revoked, false);
    } finally {
      await fleet.cleanup();
    }
  },
});

Deno.test({
  name: "agent notifications: what GET /api/v1/settings/agent shows is exactly what the agent receives",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    let shown: Json;
    const fleet = await startFleet("debug", async (api) => {
      // Chrome's message emptied: the admin's default message applies to it, not a built-in text.
      const saved = await api.call("PUT", "/api/v1/settings/agent", {
        enabled: true,
        cooldown_seconds: 120,
        message: "Please log out and back in.",
        messages_by_type: { Firefox: "Restart Firefox, please.", Chrome: "" },
      });
      shown = await api.call("GET", "/api/v1/settings/agent");
      assert.deepEqual(shown, saved);
      assert.deepEqual(shown.messages_by_type, { Firefox: "Restart Firefox, please." });
    });
    try {
      await fleet.agent.waitForLog(/notification settings from the server settings=/, 30_000);
      const line = fleet.agent.output().split("\n").find((l) =>
        l.includes("notification settings from the server")
      )!;
      const received = JSON.parse(/settings=(\{.*\})\s*$/.exec(line)![1]);
      assert.deepEqual(received, {
        enabled: shown.enabled,
        cooldownSeconds: shown.cooldown_seconds,
        defaultMessage: shown.message,
        messageByType: shown.messages_by_type,
      });
    } finally {
      await fleet.cleanup();
    }
  },
});
