/**
 * Shared pieces of the agent tests: a temp root that looks like a node (Firefox installed, an
 * original policies.json), an agent configuration pointing at it, and Firefox policies as the
 * sync engine caches them.
 */
import { create, toJsonString } from "@bufbuild/protobuf";
import { type FirefoxPolicy, FirefoxPolicySchema } from "../../shared/gen/svc/policy/v1/firefox_pb.ts";
import { type AgentConfig, buildAgentConfig } from "../../agent/config.ts";
import { RootFs } from "../../agent/fs.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";
import { Runner } from "../../agent/runner.ts";
import { ManagedFiles } from "../../agent/sync/managed_files.ts";
import { SyncEngine, type SyncEngineOptions } from "../../agent/sync/engine.ts";
import type { CachedPolicy, PolicyResult } from "../../agent/sync/types.ts";
import { enforcerRegistry } from "../../agent/enforcers/mod.ts";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { createPolicyClient, type PolicyClient } from "../../agent/client.ts";
import type { AgentServer } from "../helpers/agents.ts";

/** The original policies.json a node had before svc. */
export const ORIGINAL_POLICIES = `{"policies": {"DisableAppUpdate": false}}\n`;

/** A temp node: `root` (with Firefox installed unless told otherwise) and `dataDir`. */
export interface TempNode {
  root: string;
  dataDir: string;
  config: AgentConfig;
  fs: RootFs;
  cleanup(): Promise<void>;
}

/** Creates a temp node. */
export async function tempNode(
  options: { firefox?: boolean; flatpak?: boolean; original?: string | null } = {},
): Promise<TempNode> {
  const base = await Deno.makeTempDir({ prefix: "svc-agent-test-" });
  const root = `${base}/root`;
  const dataDir = `${base}/data`;
  await Deno.mkdir(root);
  if (options.firefox ?? true) await Deno.mkdir(`${root}/usr/lib/firefox`, { recursive: true });
  if (options.flatpak) {
    await Deno.mkdir(`${root}/var/lib/flatpak/app/org.mozilla.firefox`, { recursive: true });
  }
  const original = options.original === undefined ? ORIGINAL_POLICIES : options.original;
  if (original !== null) {
    await Deno.mkdir(`${root}/etc/firefox/policies`, { recursive: true });
    await Deno.writeTextFile(`${root}/etc/firefox/policies/policies.json`, original);
  }
  const { config } = buildAgentConfig(
    { agent: { root_dir: root, client_id: "node-1" }, enrollment: { data_dir: dataDir } },
    "test.yaml",
  );
  return {
    root,
    dataDir,
    config,
    fs: await RootFs.open(root),
    cleanup: () => Deno.remove(base, { recursive: true }),
  };
}

let counter = 0;

/** A cached Firefox policy with typed content. */
export function firefoxPolicy(
  init: MessageInitShape<typeof FirefoxPolicySchema>,
  options: { id?: string; name?: string; priority?: number; version?: number; typed?: boolean } = {},
): CachedPolicy {
  const message: FirefoxPolicy = create(FirefoxPolicySchema, init);
  const id = options.id ?? `pol-${++counter}`;
  return {
    id,
    name: options.name ?? `policy ${id}`,
    type: "Firefox",
    version: options.version ?? 1,
    priority: options.priority ?? 0,
    content: toJsonString(FirefoxPolicySchema, message),
    typed: options.typed === false ? undefined : message,
  };
}

/** A sync engine on a temp node with the real enforcers; collects compliance reports. */
export async function engineFor(
  node: TempNode,
  extra: Partial<SyncEngineOptions> = {},
): Promise<
  { engine: SyncEngine; reports: Map<string, PolicyResult>; managed: ManagedFiles; runner: Runner }
> {
  const reports = new Map<string, PolicyResult>();
  const managed = await ManagedFiles.load(node.dataDir, SILENT_LOGGER);
  const runner = extra.runner ?? new Runner();
  const engine = new SyncEngine({
    fs: node.fs,
    runner,
    logger: SILENT_LOGGER,
    config: node.config,
    managed,
    enforcers: enforcerRegistry(),
    reportCompliance: (policy, result) => {
      reports.set(policy.id, result);
      return Promise.resolve();
    },
    ...extra,
  });
  return { engine, reports, managed, runner };
}

/** Reads `/etc/firefox/policies/policies.json` under the node's root, parsed. */
export async function readFirefoxFile(node: TempNode): Promise<Record<string, unknown> | undefined> {
  try {
    return JSON.parse(await Deno.readTextFile(`${node.root}/etc/firefox/policies/policies.json`));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

/** The agent's own policy-port client (agent/client.ts) for an agent enrolled on a test server. */
export function agentPolicyClient(
  server: AgentServer,
  cert: { certPem: string; keyPem: string },
): PolicyClient {
  return createPolicyClient("localhost", server.policyPort, { ...cert, caPem: server.ctx.ca.certPem });
}
