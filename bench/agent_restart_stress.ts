/**
 * Server restarts under a large snapshot, against the real agent (numbers, not pass/fail).
 *
 *   deno run -A bench/agent_restart_stress.ts [--restarts 120] [--policies 40] [--kib 150] [--max-delay-ms 3000]
 *                                            [--seed 1]
 *
 * Starts svc-server as a real process (embedded database), enrolls one real svc-agent, binds `--policies`
 * Firefox policies of about `--kib` KiB each to its group (a snapshot of several MiB), and starts the agent
 * daemon. Then, `--restarts` times: a binding's priority changes (a resync: the whole snapshot goes out again,
 * to the connected agent or on its next connect), a random delay passes, and the server is killed with SIGKILL
 * or stopped with SIGTERM (chosen at random), then started again on the same data directory and ports. A kill
 * lands while the agent connects, while the snapshot streams, while the agent applies it, or after.
 *
 * Counts agent aborts: the process ending by itself (exit by signal, or any exit), or its output naming an
 * nghttp2 assertion. An agent that ends is started again, as its unit would (Restart=on-failure), and the run
 * goes on. At the end the agent must converge on the server's policy set (the merged policies.json holds every
 * policy's extensions) — nothing lost. Prints one line per restart and a summary.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { type ServerProcess, startServerProcess } from "../tests/helpers/process.ts";
import { type AgentProcess, Api, eventually, runAgentOnce } from "../tests/helpers/agent_process.ts";

const args = parseArgs({
  options: {
    restarts: { type: "string", default: "120" },
    policies: { type: "string", default: "40" },
    kib: { type: "string", default: "150" },
    "max-delay-ms": { type: "string", default: "3000" },
    seed: { type: "string", default: String(Date.now() % 100_000) },
    "out-dir": { type: "string", default: "/tmp/svc-agent-restart-stress" },
  },
}).values;
const RESTARTS = Number(args.restarts);
const POLICIES = Number(args.policies);
const KIB = Number(args.kib);
const MAX_DELAY_MS = Number(args["max-delay-ms"]);
const NODE = "stress-node-1";
/** Where the whole output of every agent that ended is kept. */
const OUT_DIR = args["out-dir"]!;
await Deno.mkdir(OUT_DIR, { recursive: true });
/** What the current round did, for the abort record. */
let round = "";
const POLICIES_JSON = "/etc/firefox/policies/policies.json";

/** Deterministic random numbers (mulberry32), so a run can be repeated with `--seed`. */
let seed = Number(args.seed) >>> 0;
function random(): number {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

/** Firefox content of about `kib` KiB: an extension list (each URL names its policy, to check the merge). */
function bigContent(index: number, kib: number): string {
  const install: string[] = [];
  let bytes = 0;
  for (let i = 0; bytes < kib * 1024; i++) {
    const url = `https://addons.example/p${index}/extension-${i}-${"x".repeat(40)}.xpi`;
    install.push(url);
    bytes += url.length + 3;
  }
  return JSON.stringify({ Extensions: { Install: install } });
}

const base = await Deno.makeTempDir({ prefix: "svc-restart-stress-" });
const root = join(base, "root");
const agentData = join(base, "agent-data");
await Deno.mkdir(`${root}/usr/lib/firefox`, { recursive: true });
await Deno.mkdir(`${root}/etc/firefox/policies`, { recursive: true });
await Deno.writeTextFile(`${root}/etc/os-release`, 'NAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n');
await Deno.writeTextFile(`${root}/etc/machine-id`, "0123456789abcdef0123456789abcdef\n");

let server: ServerProcess = await startServerProcess();
let api = await Api.login(server);
const ports = { web: server.webPort, policy: server.policyPort, metrics: server.metricsPort };
const dataDir = server.dataDir;
const configPath = join(base, "agent.yaml");
await Deno.writeTextFile(
  configPath,
  stringify({
    server: { address: "localhost", enrollment_port: ports.web, policy_port: ports.policy },
    agent: { client_id: NODE, root_dir: root },
    enrollment: { data_dir: agentData },
    log: { level: "debug" },
  }),
);
await Deno.chmod(configPath, 0o600);
const agentEnv = { SSL_CERT_FILE: join(dataDir, "pki", "ca", "ca.crt"), SVC_ENROLLMENT_TOKEN: "" };

const group = await api.call("POST", "/api/v1/node-groups", { name: "stress" });
const { token } = await api.call("POST", `/api/v1/node-groups/${group.id}/tokens`);
await Deno.writeTextFile(join(base, "token"), token);
const enrolled = await runAgentOnce(configPath, agentEnv, ["--token-file", join(base, "token")]);
if (enrolled.code !== 0) throw new Error(`enrollment failed:\n${enrolled.stderr}`);

const bindings: string[] = [];
let snapshotBytes = 0;
for (let i = 0; i < POLICIES; i++) {
  const content = bigContent(i, KIB);
  snapshotBytes += content.length;
  const policy = await api.call("POST", "/api/v1/policies/all", {
    name: `big ${i}`,
    type: "Firefox",
    content,
  });
  await api.call("PUT", `/api/v1/policies/all/${policy.id}/state`, { state: "released" });
  const binding = await api.call("POST", "/api/v1/policy-bindings", {
    policy_id: policy.id,
    node_group_id: group.id,
    priority: 10 + i,
  });
  await api.call("PUT", `/api/v1/policy-bindings/${binding.id}`, { state: "enabled" });
  bindings.push(binding.id);
}
console.log(
  `${POLICIES} policies, snapshot ≈ ${(snapshotBytes / 1048576).toFixed(1)} MiB; seed ${args.seed}; ` +
    `${RESTARTS} restarts, kill 0–${MAX_DELAY_MS} ms after a resync`,
);

interface Abort {
  restart: number;
  code: number;
  signal: string;
  tail: string;
}
const aborts: Abort[] = [];
let agentStarts = 0;
let agent: AgentProcess;
let agentExit: { code: number; signal: Deno.Signal | null } | undefined;
function startAgent(): void {
  agentStarts++;
  agentExit = undefined;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("../agent/main.ts", import.meta.url).pathname, "--config", configPath],
    env: { NO_COLOR: "1", ...agentEnv },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let out = "";
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) out += chunk;
  };
  void Promise.all([pump(child.stdout), pump(child.stderr)]);
  child.status.then((s) => agentExit = { code: s.code, signal: s.signal });
  agent = {
    output: () => out,
    waitForLog: (pattern, timeoutMs = 30_000, from = 0) =>
      eventually(() => pattern.test(out.slice(from)), timeoutMs, `agent log ${pattern}`, () => out).then(
        () => {},
      ),
    async stop(signal: Deno.Signal = "SIGTERM") {
      if (!agentExit) child.kill(signal);
      return (await child.status).code;
    },
  };
}

/** What a runtime abort prints (an nghttp2 assertion, a heap check, a Rust panic). */
const LINE = /Assertion .* failed|free\(\): invalid|double free|Segmentation fault|panicked at/;
function checkAgent(restart: number): boolean {
  const crashed = agentExit !== undefined || LINE.test(agent.output());
  if (!crashed) return false;
  if (agentExit === undefined) void agent.stop("SIGKILL");
  const lines = agent.output().split("\n").filter((l) => LINE.test(l) || /error|fatal/i.test(l));
  aborts.push({
    restart,
    code: agentExit?.code ?? -1,
    signal: agentExit?.signal ?? "",
    tail: (lines.slice(-4).join("\n") || agent.output().slice(-800)).slice(-1500),
  });
  const file = join(OUT_DIR, `agent-abort-${aborts.length}.log`);
  Deno.writeTextFileSync(file, `${round}\n${agent.output()}`);
  console.log(
    `  !! agent ended (code ${agentExit?.code}, signal ${agentExit?.signal}; output in ${file}):\n` +
      aborts.at(-1)!.tail,
  );
  return true;
}

startAgent();
await agent!.waitForLog(/snapshot complete policies=/, 240_000);
const started = Date.now();
const kinds = { SIGKILL: 0, SIGTERM: 0 };
let midSnapshot = 0;
try {
  for (let i = 1; i <= RESTARTS; i++) {
    const mark = agent!.output().length;
    // A resync: the whole snapshot goes out again (to the open stream, or on the next connect).
    await api.call("PUT", `/api/v1/policy-bindings/${bindings[i % bindings.length]}`, {
      priority: 1000 + i,
    });
    const delay = Math.round(random() * MAX_DELAY_MS);
    await new Promise((r) => setTimeout(r, delay));
    const signal: "SIGKILL" | "SIGTERM" = random() < 0.5 ? "SIGKILL" : "SIGTERM";
    kinds[signal]++;
    round = `restart ${i}: ${signal} after ${delay} ms`;
    const seen = agent!.output().slice(mark);
    const t0 = performance.now();
    // The resync snapshot had not fully arrived (or been applied) when the server went away.
    const inFlight = !/snapshot complete/.test(seen);
    if (inFlight) midSnapshot++;
    api.close();
    await server.stop(signal);
    // Give the agent a moment to react to the GOAWAY / reset before the next server is up.
    await new Promise((r) => setTimeout(r, 300));
    if (checkAgent(i)) startAgent();
    const t1 = performance.now();
    server = await startServerProcess({ dataDir, ports });
    const t2 = performance.now();
    api = await Api.login(server);
    if (checkAgent(i)) startAgent();
    // Let the agent come back (it may be in a backoff of a few seconds) before the next round, so the next
    // kill again meets a connecting or streaming agent rather than one sleeping.
    await agent!.waitForLog(/policy stream is in sync/, 120_000, mark).catch(() => {});
    if (checkAgent(i)) startAgent();
    console.log(
      `restart ${i}: ${signal} after ${delay} ms${
        inFlight ? " (snapshot in flight)" : ""
      }; aborts so far ${aborts.length} ` +
        `(stop ${Math.round(t1 - t0)} ms, start ${Math.round(t2 - t1)} ms, resync ${
          Math.round(performance.now() - t2)
        } ms)`,
    );
  }
  // Nothing lost: the agent converges on every policy (each one's extensions in the merged file).
  await eventually(
    async () => {
      const text = await Deno.readTextFile(`${root}${POLICIES_JSON}`).catch(() => "");
      const install: string[] = text ? JSON.parse(text).policies?.Extensions?.Install ?? [] : [];
      const names = new Set(install.map((u) => u.match(/\/p(\d+)\//)?.[1]));
      return names.size === POLICIES;
    },
    240_000,
    "every policy in the merged policies.json",
    () => agent.output(),
  );
  console.log("converged: every policy is in the merged policies.json");
} finally {
  const minutes = ((Date.now() - started) / 60_000).toFixed(1);
  console.log(
    `\nSUMMARY restarts=${RESTARTS} (SIGKILL ${kinds.SIGKILL}, SIGTERM ${kinds.SIGTERM}, snapshot in flight ${midSnapshot}) ` +
      `agent aborts=${aborts.length} agent starts=${agentStarts} minutes=${minutes} deno=${Deno.version.deno}`,
  );
  for (const a of aborts) {
    console.log(`abort at restart ${a.restart}: code ${a.code} signal ${a.signal}\n${a.tail}`);
  }
  await agent!.stop("SIGKILL").catch(() => {});
  api.close();
  await server.stop("SIGKILL").catch(() => {});
  if (Deno.env.get("SVC_E2E_KEEP") !== "1") {
    await Deno.remove(base, { recursive: true }).catch(() => {});
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
}
