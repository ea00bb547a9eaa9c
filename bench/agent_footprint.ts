/**
 * Footprint of svc-agent: starts a real svc-server and a real svc-agent (bundled by packaging/program.ts and
 * run with the portable launcher's arguments) on a temp root, and prints the agent's resident memory after 60 s idle
 * with nothing to enforce; then, restarted after its node joined the group 50 policies are bound to (Firefox
 * and Chrome; a connected agent sees a new membership only when it reconnects), the resident memory after
 * that 50-policy sync and the sync's duration as the agent logs it.
 *
 *   deno run -A bench/agent_footprint.ts [--idle-seconds 60] [--policies 50] [--source] [--v8-flags FLAGS]
 *
 * `--source` runs agent/main.ts from the checkout instead of the bundle; `--v8-flags` passes V8 flags to
 * the agent instead of the packaged ones (`V8_FLAGS` in packaging/program.ts; `--v8-flags none` for none).
 * The idle line also splits the RSS (smaps_rollup): PSS, anonymous memory, and file-backed pages (mostly
 * the runtime binary's code, shared and reclaimable; the target is RSS as the issue states it). The agent
 * runs its own copy of the runtime executable, as the package installs one: an agent sharing the server's
 * executable file would share its pages, which the kernel does not reclaim for one process
 * (agent/cold_pages.ts). Numbers, not pass/fail: the targets are < 60 MiB idle on amd64 and < 300 ms for
 * the sync; the last RSS line is the same agent once quiet after that sync.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { startServerProcess } from "../tests/helpers/process.ts";
import { Api, eventually } from "../tests/helpers/agent_process.ts";
import { bundleApp, portableRunArgs, V8_FLAGS } from "../packaging/program.ts";

const { values: args } = parseArgs({
  args: Deno.args,
  options: {
    "idle-seconds": { type: "string", default: "60" },
    policies: { type: "string", default: "50" },
    source: { type: "boolean", default: false },
    // Default: the flags the package's launcher and compiled build pass (packaging/program.ts); "none" for none.
    "v8-flags": { type: "string", default: V8_FLAGS["svc-agent"].join(",") },
  },
});
const IDLE_MS = Number(args["idle-seconds"]) * 1000;
const POLICIES = Number(args.policies);
const MAIN = new URL("../agent/main.ts", import.meta.url).pathname;
const CHECKOUT = new URL("..", import.meta.url).pathname;

async function rssKiB(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]);
}

const mib = (kib: number) => `${(kib / 1024).toFixed(1)} MiB`;

/** RSS split from smaps_rollup: PSS, anonymous (heap, V8) and file-backed (the runtime binary's pages, shared and reclaimable). */
async function breakdown(pid: number): Promise<string> {
  const text = await Deno.readTextFile(`/proc/${pid}/smaps_rollup`).catch(() => "");
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(text)?.[1] ?? NaN);
  const rss = field("Rss"), anon = field("Anonymous");
  return `PSS ${mib(field("Pss"))}, anonymous ${mib(anon)}, file-backed ${mib(rss - anon)}`;
}

const base = await Deno.makeTempDir({ prefix: "svc-bench-agent-" });
const server = await startServerProcess();
const children: Deno.ChildProcess[] = [];
try {
  if (args["v8-flags"] === "none") args["v8-flags"] = "";
  const v8Flags = args["v8-flags"] ? args["v8-flags"].split(",") : [];
  // As the package runs it: the bundle packaging builds, with the launcher's `deno run` arguments.
  const program = args.source ? MAIN : await bundleApp("svc-agent", { root: CHECKOUT, workDir: base });
  const runFlags = args.source
    ? ["run", "-A", ...(v8Flags.length ? [`--v8-flags=${v8Flags.join(",")}`] : [])]
    : portableRunArgs("svc-agent", v8Flags);
  const runtime = join(base, "runtime", "deno");
  await Deno.mkdir(join(base, "runtime"));
  await Deno.copyFile(Deno.execPath(), runtime);
  const root = join(base, "root");
  for (const dir of ["usr/lib/firefox", "usr/lib/chromium", "etc"]) {
    await Deno.mkdir(join(root, dir), { recursive: true });
  }
  const configPath = join(base, "agent.yaml");
  await Deno.writeTextFile(
    configPath,
    stringify({
      server: { address: "localhost", enrollment_port: server.webPort, policy_port: server.policyPort },
      agent: { client_id: "bench-node", root_dir: root },
      enrollment: { data_dir: join(base, "data") },
    }),
    { mode: 0o600 },
  );
  const env = {
    NO_COLOR: "1",
    SSL_CERT_FILE: join(server.dataDir, "pki", "ca", "ca.crt"),
    SVC_ENROLLMENT_TOKEN: "",
  };
  const api = await Api.login(server);
  const home = await api.call("POST", "/api/v1/node-groups", { name: "bench home" });
  const fleet = await api.call("POST", "/api/v1/node-groups", { name: "bench fleet" });
  const { token } = await api.call("POST", `/api/v1/node-groups/${home.id}/tokens`);
  await Deno.writeTextFile(join(base, "token"), token);
  const enrolled = await new Deno.Command(runtime, {
    args: [...runFlags, program, "--config", configPath, "--token-file", join(base, "token")],
    env,
  }).output();
  if (!enrolled.success) throw new Error(`enrollment failed: ${new TextDecoder().decode(enrolled.stderr)}`);

  for (let i = 0; i < POLICIES; i++) {
    const firefox = i % 5 !== 4;
    const content = firefox
      ? { DisableTelemetry: i % 2 === 0, Homepage: { URL: `https://intranet.example/${i}`, Locked: true } }
      : { HomepageLocation: `https://intranet.example/${i}`, BookmarkBarEnabled: i % 2 === 0 };
    const policy = await api.call("POST", "/api/v1/policies/all", {
      name: `bench ${i}`,
      type: firefox ? "Firefox" : "Chrome",
      content: JSON.stringify(content),
    });
    await api.call("PUT", `/api/v1/policies/all/${policy.id}/state`, { state: "released" });
    const binding = await api.call("POST", "/api/v1/policy-bindings", {
      policy_id: policy.id,
      node_group_id: fleet.id,
      priority: i,
    });
    await api.call("PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled" });
  }

  const start = () => {
    const child = new Deno.Command(runtime, {
      args: [...runFlags, program, "--config", configPath],
      env,
      stdout: "null",
      stderr: "piped",
    }).spawn();
    children.push(child);
    const proc = { child, out: "" };
    void (async () => {
      for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) proc.out += chunk;
    })();
    return proc;
  };

  const idle = start();
  await eventually(
    () => /policy stream is in sync/.test(idle.out),
    60_000,
    "the agent in sync",
    () => idle.out,
  );
  const inSyncRss = await rssKiB(idle.child.pid);
  await new Promise((r) => setTimeout(r, IDLE_MS));
  const idleRss = await rssKiB(idle.child.pid);
  const idleSplit = await breakdown(idle.child.pid);
  idle.child.kill("SIGTERM");
  await idle.child.status;

  const node = (await api.call("GET", "/api/v1/nodes?search=bench-node")).items[0];
  await api.call("POST", `/api/v1/node-groups/${fleet.id}/members`, { node_ids: [node.id] });
  api.close();
  const started = performance.now();
  const busy = start();
  const line = await eventually(
    () => new RegExp(`INFO sync done policies=${POLICIES} .*`).exec(busy.out)?.[0],
    120_000,
    `the ${POLICIES}-policy sync`,
    () => busy.out,
  );
  const startToSynced = performance.now() - started;
  await new Promise((r) => setTimeout(r, 5000));
  const syncedRss = await rssKiB(busy.child.pid);
  const syncedSplit = await breakdown(busy.child.pid);
  await new Promise((r) => setTimeout(r, IDLE_MS));
  const quietRss = await rssKiB(busy.child.pid);
  const quietSplit = await breakdown(busy.child.pid);

  const form = args.source ? "from source" : "bundled, as packaged";
  const flags = args["v8-flags"] ? `, V8 flags ${args["v8-flags"]}` : "";
  console.log(`svc-agent footprint (${form}${flags}; ${Deno.build.arch})`);
  console.log(`  RSS when in sync (no policies):  ${mib(inSyncRss)}`);
  console.log(`  RSS after ${IDLE_MS / 1000} s idle:              ${mib(idleRss)}   (target < 60 MiB)`);
  console.log(`    ${idleSplit}`);
  console.log(`  RSS after a ${POLICIES}-policy sync:        ${mib(syncedRss)}`);
  console.log(`    ${syncedSplit}`);
  console.log(`  RSS ${IDLE_MS / 1000} s after that sync:       ${mib(quietRss)}`);
  console.log(`    ${quietSplit}`);
  console.log(
    `  ${POLICIES}-policy sync (agent's ms):     ${
      / ms=(\d+)/.exec(line)?.[1] ?? "?"
    } ms   (target < 300 ms)`,
  );
  console.log(`  agent start → sync done:         ${Math.round(startToSynced)} ms`);
  console.log(`  ${line.replace(/^\S+ /, "")}`);
} finally {
  for (const child of children) {
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
    await child.status;
  }
  await server.stop("SIGKILL");
  await Deno.remove(base, { recursive: true }).catch(() => {});
  await Deno.remove(server.dataDir, { recursive: true }).catch(() => {});
}
