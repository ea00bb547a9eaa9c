/**
 * The packaged agent in a booted node (tests/helpers/booted_node.ts), as the booted-node tests set it up: the
 * deploy-agent wizard's own Debian script installs, enrolls and starts it under systemd; policies are released
 * and bound as an admin does; `svc-agent status --json` (run as nobody) reads what the agent reports.
 */
import { deployScript } from "../../web/src/deploy_script.ts";
import type { AgentStatus } from "../../agent/status.ts";
import type { BootedNode } from "./booted_node.ts";
import type { ServerProcess } from "./process.ts";
import { type Api, eventually, type Json } from "./agent_process.ts";

/** The packages of `deno task build --portable`. */
export const DIST = new URL("../../dist/", import.meta.url).pathname;
/** The host's architecture as Debian names it. */
export const HOST_ARCH = Deno.build.arch === "x86_64" ? "amd64" : "arm64";

/** Why the packaged agent cannot be tested here: no packages built. */
export async function packagesUnavailable(): Promise<string | undefined> {
  if (!await Deno.stat(`${DIST}agent-repo/manifest.json`).then(() => true, () => false)) {
    return "dist/agent-repo is absent: run `deno task build --portable` first (CI does)";
  }
  return undefined;
}

/** A released policy with an enabled binding to the group, as an admin makes it; the ids of both. */
export async function releaseAndBind(
  api: Api,
  groupId: string,
  policy: { type: string; name: string; content: unknown; priority?: number; lockoutReason?: string },
): Promise<{ policyId: string; bindingId: string }> {
  const created = await api.call("POST", "/api/v1/policies/all", {
    name: policy.name,
    type: policy.type,
    content: JSON.stringify(policy.content),
  });
  await api.call("PUT", `/api/v1/policies/all/${created.id}/state`, { state: "released" });
  const binding = await api.call("POST", "/api/v1/policy-bindings", {
    policy_id: created.id,
    node_group_id: groupId,
    priority: policy.priority ?? 5,
  });
  await api.call("PUT", `/api/v1/policy-bindings/${binding.id}`, {
    state: "enabled",
    ...(policy.lockoutReason ? { lockout_reason: policy.lockoutReason } : {}),
  });
  return { policyId: created.id, bindingId: binding.id };
}

/** The agent's view of itself, as a user without root reads it; undefined when the command fails. */
export async function agentStatus(node: BootedNode): Promise<AgentStatus | undefined> {
  const r = await node.exec(["runuser", "-u", "nobody", "--", "svc-agent", "status", "--json"]);
  return r.code === 0 ? JSON.parse(r.stdout) : undefined;
}

/** Whether the server lists node `name` online. */
export async function nodeOnline(api: Api, name: string): Promise<boolean> {
  const page = await api.call("GET", `/api/v1/nodes?search=${encodeURIComponent(name)}`);
  return page.items.find((n: Json) => n.name === name)?.status === "online";
}

/**
 * Runs the wizard's Debian script in `node` (CA trust, signed apt repository, `apt-get install svc-agent`,
 * enrollment into a new group, `systemctl enable --now`) and waits until the agent is active and the server sees
 * the node online. Resolves the group's id.
 */
export async function deployAgent(
  node: BootedNode,
  server: ServerProcess,
  api: Api,
  options: { nodeName: string; groupName: string; context?: () => string },
): Promise<string> {
  const group = await api.call("POST", "/api/v1/node-groups", { name: options.groupName });
  const { token } = await api.call("POST", `/api/v1/node-groups/${group.id}/tokens`);
  const manifest = JSON.parse(await Deno.readTextFile(`${DIST}agent-repo/manifest.json`));
  const script = deployScript({
    origin: `https://localhost:${server.webPort}`,
    family: "debian",
    arch: HOST_ARCH,
    caPem: await Deno.readTextFile(`${server.dataDir}/pki/ca/ca.crt`),
    repoKey: await (await fetch(`${server.baseUrl}/agent/repo-key.asc`, { client: api.client })).text(),
    packages: manifest.packages,
    enrollment: { token, policyPort: server.policyPort },
  });
  await Deno.writeTextFile(node.hostPath("/root/deploy.sh"), script);
  const out = await node.sh("sh -e /root/deploy.sh 2>&1");
  if (!out.includes(`Enrolled node "${options.nodeName}"`)) throw new Error(`enrollment failed:\n${out}`);
  await eventually(
    async () => (await node.exec(["systemctl", "is-active", "svc-agent"])).stdout.trim() === "active",
    60_000,
    "svc-agent active",
    options.context,
  );
  await eventually(() => nodeOnline(api, options.nodeName), 60_000, "the node online", options.context);
  return group.id;
}
