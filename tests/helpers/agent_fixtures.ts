/**
 * The start every end-to-end agent test makes (tests/e2e/agent_*_test.ts, arm64_emulation_test.ts): a temp
 * node root that looks like a Debian desktop, a real svc-server process with an administrator logged in over
 * REST, and the agent's configuration for that server.
 */
import { join } from "node:path";
import { type ServerProcess, startServerProcess } from "./process.ts";
import { Api, enrollIntoNewGroup, type RestCaller, writeAgentConfig } from "./agent_process.ts";

/** Where Firefox reads its enterprise policies, as a node path. */
export const POLICIES_JSON = "/etc/firefox/policies/policies.json";

/** The policies.json a node had before svc (its own setting, which svc must keep and give back). */
export const ORIGINAL_POLICIES = `{"policies": {"DisableAppUpdate": false}}\n`;

/** The os-release of the Debian release the node claims to run. */
export const DEBIAN_OS_RELEASE = 'NAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n';

/** A temp node: `base` holds the node's `root`, the agent's data directory (not created) and its config. */
export interface E2eNode {
  base: string;
  root: string;
  agentData: string;
  configPath: string;
  /** Host path of {@linkcode POLICIES_JSON} under the root. */
  policiesFile: string;
}

/**
 * Creates a temp node (`prefix` names the temp directory) whose root has Debian's os-release and, unless
 * `firefox: false`, Firefox installed with an empty policies directory (holding `original` as the node's own
 * policies.json when given). Without Firefox the root has `/usr/lib` and `/etc` only.
 */
export async function e2eNode(
  prefix: string,
  options: { firefox?: boolean; original?: string } = {},
): Promise<E2eNode> {
  const base = await Deno.makeTempDir({ prefix });
  const root = join(base, "root");
  const policiesFile = `${root}${POLICIES_JSON}`;
  if (options.firefox ?? true) {
    await Deno.mkdir(`${root}/usr/lib/firefox`, { recursive: true });
    await Deno.mkdir(`${root}/etc/firefox/policies`, { recursive: true });
    if (options.original !== undefined) await Deno.writeTextFile(policiesFile, options.original);
  } else {
    await Deno.mkdir(`${root}/usr/lib`, { recursive: true });
    await Deno.mkdir(`${root}/etc`, { recursive: true });
  }
  await Deno.writeTextFile(`${root}/etc/os-release`, DEBIAN_OS_RELEASE);
  return {
    base,
    root,
    agentData: join(base, "agent-data"),
    configPath: join(base, "agent.yaml"),
    policiesFile,
  };
}

/** A started server, its administrator's REST client, and what starting it again needs. */
export interface E2eServer {
  server: ServerProcess;
  api: Api;
  ports: { web: number; policy: number; metrics: number };
  /** The server's data directory (kept across restarts; the test removes it). */
  dataDir: string;
  /** The environment under which the agent trusts the server's CA. */
  agentEnv: Record<string, string>;
}

/**
 * Starts a real svc-server process, logs the administrator in, and writes the agent's configuration for node
 * `agent.clientId` on `node` (`agent.agent` adds keys to the agent section).
 */
export async function e2eServer(
  node: E2eNode,
  agent: { clientId: string; agent?: Record<string, unknown>; logLevel?: string },
): Promise<E2eServer> {
  const server = await startServerProcess();
  const api = await Api.login(server);
  const ports = { web: server.webPort, policy: server.policyPort, metrics: server.metricsPort };
  const agentEnv = await writeAgentConfig(node.configPath, server, {
    ...agent,
    root: node.root,
    dataDir: node.agentData,
  });
  return { server, api, ports, dataDir: server.dataDir, agentEnv };
}

/** Enrolls the node's agent into a new node group `groupName` (the token in `base`/token); answers its id. */
export function enrollE2eNode(
  api: RestCaller,
  node: E2eNode,
  agentEnv: Record<string, string>,
  groupName: string,
): Promise<string> {
  const { configPath, base } = node;
  return enrollIntoNewGroup(api, { groupName, configPath, env: agentEnv, tokenFile: join(base, "token") });
}

/**
 * Ends what an end-to-end agent test started, whatever state it is in: the agent and the server killed, the
 * REST client closed, the node's and the server's directories removed (kept when SVC_E2E_KEEP=1, to look at).
 */
export async function endE2e(
  parts: { agent?: { stop(signal?: Deno.Signal): Promise<unknown> }; api?: Api; server?: ServerProcess },
  node: { base: string },
  dataDir: string,
): Promise<void> {
  await parts.agent?.stop("SIGKILL").catch(() => {});
  parts.api?.close();
  await parts.server?.stop("SIGKILL").catch(() => {});
  if (Deno.env.get("SVC_E2E_KEEP") !== "1") {
    await Deno.remove(node.base, { recursive: true }).catch(() => {});
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
}
