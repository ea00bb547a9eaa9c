/**
 * Server restarts under a large snapshot, against the real agent: how often does the agent's runtime die?
 * Numbers, not pass/fail.
 *
 *   deno run -A bench/agent_restart_stress.ts [--restarts 200] [--kinds kill,term,stop,handshake]
 *       [--form source|bundled] [--policies 40] [--kib 150] [--max-delay-ms 3000] [--seed 1]
 *       [--agent-flags="--v8-flags=…"] [--agent-env NAME=VALUE]… [--core-dir DIR] [--out-dir DIR]
 *
 * Starts svc-server as a real process (embedded database), enrolls one real svc-agent, binds `--policies`
 * Firefox policies of about `--kib` KiB each to its group (a snapshot of several MiB) and starts the agent
 * daemon: from source (`deno run`), or `--form bundled` as the package runs it (the bundle packaging builds,
 * the launcher's `deno run` arguments and V8 flags, a copy of the runtime). Then, `--restarts` times: a binding's
 * priority changes (a resync: the whole snapshot goes out again), a random delay of 0–`--max-delay-ms` passes,
 * and the server goes away in one of the `--kinds` (picked at random), then starts again on the same data
 * directory and ports:
 *
 * - `kill`: SIGKILL; the kernel closes the connection (FIN, or RST when data was unread).
 * - `term`: SIGTERM, the graceful stop: the server ends the policy stream with UNAVAILABLE, sends GOAWAY on
 *   the connection, and destroys what is left after its grace period (RST_STREAM). Landing mid-snapshot, this
 *   is a GOAWAY and a stream end while megabytes are in flight.
 * - `stop`: SIGSTOP for 1–4 s (a half-open connection: the kernel keeps accepting, nothing answers), then
 *   SIGKILL.
 * - `handshake`: SIGKILL, then the new server is killed again (SIGKILL or SIGTERM) 0–300 ms after the agent
 *   logs that it connects, i.e. during TCP/TLS/HTTP/2 connection setup, before the final start.
 *
 * An agent that ends is counted as an abort (exit code, signal, the runtime's last lines: an nghttp2
 * assertion, a heap check, a Rust panic) and started again, as its unit would (Restart=on-failure); its whole
 * output is kept in `--out-dir`. With `--core-dir` the agent runs with core dumps enabled in that directory
 * (the machine's core_pattern decides the name; only the first core is kept). At the end the agent must
 * converge on the server's set (the merged policies.json holds every policy's extensions): nothing lost.
 * Prints one line per restart and a summary with the abort rate per kind and the machine's load.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { type ServerProcess, startServerProcess } from "../tests/helpers/process.ts";
import { Api, eventually, runAgentOnce, writeAgentConfig } from "../tests/helpers/agent_process.ts";
import { bundleApp, portableRunArgs } from "../packaging/program.ts";

const KINDS = ["kill", "term", "stop", "handshake"] as const;
type Kind = typeof KINDS[number];

const args = parseArgs({
  options: {
    restarts: { type: "string", default: "200" },
    kinds: { type: "string", default: KINDS.join(",") },
    form: { type: "string", default: "source" },
    policies: { type: "string", default: "40" },
    kib: { type: "string", default: "150" },
    "max-delay-ms": { type: "string", default: "3000" },
    seed: { type: "string", default: String(Date.now() % 100_000) },
    "agent-flags": { type: "string", default: "" },
    "agent-env": { type: "string", multiple: true, default: [] },
    "core-dir": { type: "string" },
    "out-dir": { type: "string", default: "/tmp/svc-agent-restart-stress" },
  },
}).values;
const RESTARTS = Number(args.restarts);
const POLICIES = Number(args.policies);
const KIB = Number(args.kib);
const MAX_DELAY_MS = Number(args["max-delay-ms"]);
const kinds = args.kinds!.split(",").map((k) => k.trim()) as Kind[];
for (const kind of kinds) {
  if (!KINDS.includes(kind)) throw new Error(`--kinds: unknown kind "${kind}"; use ${KINDS.join(", ")}`);
}
if (args.form !== "source" && args.form !== "bundled") {
  throw new Error(`--form: "${args.form}" is neither "source" nor "bundled"`);
}
const NODE = "stress-node-1";
const OUT_DIR = args["out-dir"]!;
const CORE_DIR = args["core-dir"];
await Deno.mkdir(OUT_DIR, { recursive: true });
if (CORE_DIR) await Deno.mkdir(CORE_DIR, { recursive: true });
const POLICIES_JSON = "/etc/firefox/policies/policies.json";
const loadAverage = () => Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
const loadAtStart = loadAverage();

/** Deterministic random numbers (mulberry32), so a run can be repeated with `--seed`. */
let seed = Number(args.seed) >>> 0;
function random(): number {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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
await Deno.mkdir(`${root}/usr/lib/firefox`, { recursive: true });
await Deno.mkdir(`${root}/etc/firefox/policies`, { recursive: true });
await Deno.writeTextFile(`${root}/etc/os-release`, 'NAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n');
await Deno.writeTextFile(`${root}/etc/machine-id`, "0123456789abcdef0123456789abcdef\n");

let server: ServerProcess = await startServerProcess();
let api = await Api.login(server);
const ports = { web: server.webPort, policy: server.policyPort, metrics: server.metricsPort };
const dataDir = server.dataDir;
const configPath = join(base, "agent.yaml");
const agentEnv = await writeAgentConfig(configPath, server, {
  clientId: NODE,
  root,
  dataDir: join(base, "agent-data"),
});

// How the agent runs: from source, or as packaged (bundle, launcher arguments, its own copy of the runtime).
const CHECKOUT = new URL("..", import.meta.url).pathname;
const extraFlags = args["agent-flags"] ? args["agent-flags"].split(" ").filter(Boolean) : [];
/** Extra environment of the agent (e.g. MALLOC_PERTURB_=165, so that memory used after free reads garbage). */
const extraEnv = Object.fromEntries(
  args["agent-env"]!.map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
);
let runtime = Deno.execPath();
let agentArgs = ["run", "-A", ...extraFlags, join(CHECKOUT, "agent/main.ts")];
if (args.form === "bundled") {
  const program = await bundleApp("svc-agent", { root: CHECKOUT, workDir: base });
  runtime = join(base, "deno");
  await Deno.copyFile(Deno.execPath(), runtime);
  await Deno.chmod(runtime, 0o755);
  agentArgs = [...portableRunArgs("svc-agent"), ...extraFlags, program];
}

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
    `${RESTARTS} restarts (${kinds.join(", ")}) 0–${MAX_DELAY_MS} ms after a resync; agent ${args.form}` +
    `${extraFlags.length ? ` ${extraFlags.join(" ")}` : ""}; deno ${Deno.version.deno}; load ${loadAtStart}`,
);

/** The agent process of the moment, as its unit would run it (restarted when it ends). */
class Agent {
  readonly child: Deno.ChildProcess;
  readonly startedAt = Date.now();
  out = "";
  exit?: { code: number; signal: Deno.Signal | null };
  constructor() {
    const cmd = CORE_DIR
      ? new Deno.Command("sh", {
        args: ["-c", 'ulimit -c unlimited && exec "$@"', "sh", runtime, ...agentArgs, "--config", configPath],
        cwd: CORE_DIR,
        env: { NO_COLOR: "1", ...agentEnv, ...extraEnv },
        stdout: "piped",
        stderr: "piped",
      })
      : new Deno.Command(runtime, {
        args: [...agentArgs, "--config", configPath],
        env: { NO_COLOR: "1", ...agentEnv, ...extraEnv },
        stdout: "piped",
        stderr: "piped",
      });
    this.child = cmd.spawn();
    const pump = async (stream: ReadableStream<Uint8Array>) => {
      for await (const chunk of stream.pipeThrough(new TextDecoderStream())) this.out += chunk;
    };
    void Promise.all([pump(this.child.stdout), pump(this.child.stderr)]);
    this.child.status.then((s) => this.exit = { code: s.code, signal: s.signal });
  }
  /** Waits for `pattern` in the output written after `from`; false when the agent ended or time ran out. */
  async waitFor(pattern: RegExp, from: number, timeoutMs: number): Promise<boolean> {
    const until = Date.now() + timeoutMs;
    while (Date.now() < until && !this.exit) {
      if (pattern.test(this.out.slice(from))) return true;
      await sleep(50);
    }
    return pattern.test(this.out.slice(from));
  }
  async kill(): Promise<void> {
    if (!this.exit) {
      try {
        this.child.kill("SIGKILL");
      } catch { /* gone */ }
    }
    await this.child.status;
  }
}

interface Abort {
  restart: number;
  kind: Kind;
  code: number;
  signal: string;
  upSeconds: number;
  lines: string;
}
const aborts: Abort[] = [];
let agentStarts = 0;
let agent = new Agent();
agentStarts++;
/** What a runtime abort prints (an nghttp2 assertion, a heap check, a Rust panic). */
const RUNTIME_LINE =
  /Assertion .* failed|free\(\): |double free|corrupted|Segmentation fault|panicked at|Fatal/;
let coreKept = false;

/** Records and replaces an agent that ended; true when it had. */
async function checkAgent(restart: number, kind: Kind, round: string): Promise<boolean> {
  if (!agent.exit) return false;
  await sleep(100); // the last output lines
  const lines = agent.out.split("\n").filter((l) => RUNTIME_LINE.test(l)).slice(-3).join("\n");
  const abort: Abort = {
    restart,
    kind,
    code: agent.exit.code,
    signal: agent.exit.signal ?? "",
    upSeconds: Math.round((Date.now() - agent.startedAt) / 1000),
    lines: lines || "(nothing printed by the runtime)",
  };
  aborts.push(abort);
  const file = join(OUT_DIR, `agent-abort-${aborts.length}.log`);
  Deno.writeTextFileSync(file, `${round}\n${agent.out}`);
  if (CORE_DIR) {
    const cores = [...Deno.readDirSync(CORE_DIR)].filter((e) => /^core/.test(e.name));
    for (const core of cores) {
      if (!coreKept && core.name === "core") {
        Deno.renameSync(join(CORE_DIR, core.name), join(CORE_DIR, `core.abort-${aborts.length}`));
        coreKept = true;
      } else if (!/abort-/.test(core.name)) Deno.removeSync(join(CORE_DIR, core.name));
    }
  }
  console.log(
    `  !! agent ended: code ${abort.code} signal ${
      abort.signal || "-"
    } after ${abort.upSeconds} s (${round}; ` +
      `output in ${file})\n     ${abort.lines}`,
  );
  agent = new Agent();
  agentStarts++;
  return true;
}

async function startServer(): Promise<void> {
  server = await startServerProcess({ dataDir, ports });
  api = await Api.login(server);
}

const started = Date.now();
const perKind = Object.fromEntries(KINDS.map((k) => [k, { restarts: 0, aborts: 0 }])) as Record<
  Kind,
  { restarts: number; aborts: number }
>;
let midSnapshot = 0;
let stopping = false;
Deno.addSignalListener("SIGINT", () => stopping = true);
Deno.addSignalListener("SIGTERM", () => stopping = true);
let done = 0;
try {
  await agent.waitFor(/snapshot complete policies=/, 0, 240_000);
  for (let i = 1; i <= RESTARTS && !stopping; i++) {
    const mark = agent.out.length;
    const marked = agent;
    // A resync: the whole snapshot goes out again (to the open stream, or on the next connect).
    await api.call("PUT", `/api/v1/policy-bindings/${bindings[i % bindings.length]}`, { priority: 1000 + i });
    const delay = Math.round(random() * MAX_DELAY_MS);
    await sleep(delay);
    const kind = kinds[Math.floor(random() * kinds.length)];
    perKind[kind].restarts++;
    const inFlight = agent === marked && !/snapshot complete/.test(agent.out.slice(mark));
    if (inFlight) midSnapshot++;
    let round = `restart ${i}: ${kind} after ${delay} ms${inFlight ? " (snapshot in flight)" : ""}`;
    const before = aborts.length;
    api.close();
    if (kind === "stop") {
      server.signal("SIGSTOP");
      const stoppedMs = 1000 + Math.round(random() * 3000);
      round += `, stopped ${stoppedMs} ms`;
      await sleep(stoppedMs);
      await server.stop("SIGKILL");
    } else {
      await server.stop(kind === "term" ? "SIGTERM" : "SIGKILL");
    }
    await sleep(300); // the agent reacts to the GOAWAY / reset before the next server is up
    await checkAgent(i, kind, round);
    if (kind === "handshake") {
      // Killed again while the agent sets the connection up (it logs "connecting" before the TLS handshake).
      const from = agent.out.length;
      await startServer();
      await agent.waitFor(/connecting to the policy service/, from, 30_000);
      const setupMs = Math.round(random() * 300);
      const signal = random() < 0.5 ? "SIGKILL" : "SIGTERM";
      round += `; the next server ${signal} ${setupMs} ms into the agent's connect`;
      await sleep(setupMs);
      api.close();
      await server.stop(signal);
      await sleep(300);
      await checkAgent(i, kind, round);
    }
    const from = agent.out.length;
    await startServer();
    await checkAgent(i, kind, round);
    // Back in sync before the next round, so the next kill again meets a connecting or streaming agent.
    const synced = await agent.waitFor(
      /policy stream is in sync/,
      agent.out.length < from ? 0 : from,
      120_000,
    );
    await checkAgent(i, kind, round);
    perKind[kind].aborts += aborts.length - before;
    done = i;
    console.log(
      `${round}; ${synced ? "in sync again" : "NOT in sync after 120 s"}; aborts so far ${aborts.length}`,
    );
  }
  // Nothing lost: the agent converges on every policy (each one's extensions in the merged file).
  await eventually(
    async () => {
      const text = await Deno.readTextFile(`${root}${POLICIES_JSON}`).catch(() => "");
      const install: string[] = text ? JSON.parse(text).policies?.Extensions?.Install ?? [] : [];
      return new Set(install.map((u) => u.match(/\/p(\d+)\//)?.[1])).size === POLICIES;
    },
    240_000,
    "every policy in the merged policies.json",
    () => agent.out,
  );
  console.log("converged: every policy is in the merged policies.json");
} finally {
  const minutes = ((Date.now() - started) / 60_000).toFixed(1);
  const rate = (n: number, of: number) => of ? `${n}/${of} = ${(100 * n / of).toFixed(1)} per 100` : "-";
  console.log(
    `\nSUMMARY agent ${args.form}${
      extraFlags.length ? ` ${extraFlags.join(" ")}` : ""
    }, deno ${Deno.version.deno}, ` +
      `seed ${args.seed}: restarts ${done} (snapshot in flight at ${midSnapshot}), agent aborts ` +
      `${
        rate(aborts.length, done)
      }, agent starts ${agentStarts}, ${minutes} min, load ${loadAtStart} → ${loadAverage()}`,
  );
  for (const kind of kinds) {
    console.log(`  ${kind.padEnd(9)} aborts ${rate(perKind[kind].aborts, perKind[kind].restarts)}`);
  }
  const bySignature = new Map<string, number>();
  for (const a of aborts) {
    const key = `code ${a.code} ${a.signal || "-"}: ${a.lines.split("\n").at(-1)}`;
    bySignature.set(key, (bySignature.get(key) ?? 0) + 1);
  }
  for (const [key, n] of bySignature) console.log(`  ${n} × ${key}`);
  await agent.kill();
  api.close();
  await server.stop("SIGKILL").catch(() => {});
  if (Deno.env.get("SVC_E2E_KEEP") !== "1") {
    await Deno.remove(base, { recursive: true }).catch(() => {});
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
}
