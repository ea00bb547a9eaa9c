/**
 * Child of the "firewalld running" agent test: runs inside a private mount and network namespace where a real
 * firewalld daemon serves a temp `/etc/firewalld` on a private system bus. It syncs Firewalld policies with the
 * agent's real engine and enforcer at root `/` (which, in this namespace, is the temp configuration) and prints
 * what happened as one JSON line: the reports, the commands run, and the runtime `--list-all` of the zone.
 *
 * Usage: deno run -A tests/helpers/firewalld_running_child.ts <data dir>
 */
import { create, toJsonString } from "@bufbuild/protobuf";
import { FirewalldPolicySchema } from "../../shared/gen/svc/policy/v1/firewalld_pb.ts";
import { buildAgentConfig } from "../../agent/config.ts";
import { firewalldEnforcer } from "../../agent/enforcers/firewalld.ts";
import { RootFs } from "../../agent/fs.ts";
import { SILENT_LOGGER } from "../../agent/log.ts";
import { Runner } from "../../agent/runner.ts";
import { SyncEngine } from "../../agent/sync/engine.ts";
import { ManagedFiles } from "../../agent/sync/managed_files.ts";
import type { CachedPolicy, PolicyResult } from "../../agent/sync/types.ts";

const dataDir = Deno.args[0];
const { config } = buildAgentConfig(
  { agent: { root_dir: "/", client_id: "fw-node" }, enrollment: { data_dir: dataDir } },
  "child.yaml",
);
const reports = new Map<string, PolicyResult>();
const runner = new Runner();
const engine = new SyncEngine({
  fs: await RootFs.open("/"),
  runner,
  logger: SILENT_LOGGER,
  config,
  managed: await ManagedFiles.load(dataDir, SILENT_LOGGER),
  enforcers: new Map([[firewalldEnforcer.type, firewalldEnforcer]]),
  reportCompliance: (policy, result) => {
    reports.set(policy.id, result);
    return Promise.resolve();
  },
});

function policy(id: string, services: string[]): CachedPolicy {
  const message = create(FirewalldPolicySchema, { zones: [{ name: "svcrun", services, target: 4 }] });
  return {
    id,
    name: id,
    type: "Firewalld",
    version: 1,
    priority: 0,
    content: toJsonString(FirewalldPolicySchema, message),
    typed: message,
  };
}

async function listAll(): Promise<string> {
  return (await runner.run("firewall-cmd", ["--zone=svcrun", "--list-all"])).stdout;
}

const out: Record<string, unknown> = {};
engine.handleEvent({ kind: "SNAPSHOT", policy: policy("good", ["ssh", "https"]), snapshotComplete: true });
await engine.idle();
out.good = reports.get("good");
out.goodListing = await listAll();
out.reloads = runner.history.filter((c) => c.cmd === "firewall-cmd" && c.args.includes("--reload")).length;

engine.handleEvent({
  kind: "SNAPSHOT",
  policy: policy("broken", ["no-such-service-xyz"]),
  snapshotComplete: true,
});
await engine.idle();
out.broken = reports.get("broken");
out.brokenListing = await listAll();

engine.handleEvent({ kind: "SNAPSHOT", snapshotComplete: true });
await engine.idle();
out.removedState = (await runner.run("firewall-cmd", ["--get-zones"])).stdout;
console.log(JSON.stringify(out));
