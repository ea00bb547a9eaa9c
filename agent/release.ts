/**
 * `svc-agent release`: takes back everything svc did on this node, as an empty policy set would — every
 * managed file is put back to its original (or removed when there was none), and the effects that are not
 * files (installed Flatpaks, remotes, the session timer) are undone by their types. The stored policy set is
 * deleted, so a later start does not enforce it again before the server answers.
 *
 * The package runs it when the agent is removed (after the service stopped, so there is one writer): a node
 * that leaves management is left as it was before svc, not frozen with policies nobody manages any more.
 *
 * @module
 */

import type { AgentConfig } from "./config.ts";
import { enforcerRegistry } from "./enforcers/mod.ts";
import { RootFs } from "./fs.ts";
import type { Logger } from "./log.ts";
import { Runner } from "./runner.ts";
import { SyncEngine } from "./sync/engine.ts";
import { ManagedFiles } from "./sync/managed_files.ts";
import { PolicyStore } from "./sync/policy_store.ts";

/** What {@linkcode releaseAll} left behind: node paths still managed (a release failed), empty when clean. */
export interface ReleaseOutcome {
  released: string[];
  remaining: string[];
}

/** Undoes every effect of svc on the node; see the module documentation. */
export async function releaseAll(config: AgentConfig, logger: Logger): Promise<ReleaseOutcome> {
  const dataDir = config.enrollment.dataDir;
  const fs = await RootFs.open(config.agent.rootDir);
  const managed = await ManagedFiles.load(dataDir, logger);
  const before = managed.list().map((r) => r.path);
  const engine = new SyncEngine({
    fs,
    runner: new Runner(),
    logger,
    config,
    managed,
    enforcers: enforcerRegistry(),
    // Nobody to report to: the node is leaving management.
    reportCompliance: () => Promise.resolve(),
  });
  engine.restore([]);
  await engine.idle();
  const remaining = managed.list().map((r) => r.path);
  if (remaining.length === 0) await Deno.remove(new PolicyStore(dataDir, logger).path).catch(() => {});
  return { released: before.filter((p) => !remaining.includes(p)), remaining };
}
