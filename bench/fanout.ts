/**
 * Policy fan-out benchmark (numbers, not pass/fail).
 *
 *   deno run -A bench/fanout.ts [--nodes 1000] [--procs 2] [--policies 1] [--policy-bytes 2048] [--rounds 3]
 *                               [--workers 1] [--database-url postgres://postgres@127.0.0.1:5432/postgres]
 *   deno run -A bench/fanout.ts --server https://host:8443 --policy-port 8444 --ca-file ca.crt \
 *                               --database-url postgres://…/svc
 *   (the second form targets an already running server and its database)
 *
 * Starts svc-server as a real process on a fresh PostgreSQL database (or targets `--server`), enrolls N
 * simulated agents through the enrollment service, keeps N mTLS policy streams open from P client processes
 * (one TLS connection per agent), enables one binding that reaches all of them (then changes its priority,
 * once per further round), and prints the time from the commit to each agent's `snapshot_complete`
 * (p50/p99/max), snapshots per second, and the server's CPU time and RSS. In the same run it measures the
 * ceiling: a bare grpc-js server with the policy port's TLS settings writing the same encoded snapshot to the
 * same number of streams.
 *
 * `--workers N` sets `server.policy_workers` (N processes sharing the policy port). CPU and RSS are summed
 * over the server and its worker processes, and reported as CPU-seconds per 10,000 stream messages (next to
 * the bare server's, measured the same way in this process) and RSS per 1,000 streams, so efficiency compares
 * even when clients and server share the machine.
 */
import { join } from "node:path";
import { stringify } from "yaml";
import { type Db, openPostgres } from "../server/db/mod.ts";
import { updateBinding } from "../server/domain/bindings.ts";
import { buildSnapshot } from "../server/hub/snapshot.ts";
import { createLogger } from "../server/core/log.ts";
import { benchFleet, createBenchDatabase } from "./bench_fleet.ts";
import { startBarePolicyServer } from "./bare_policy_server.ts";
import { childPids, killSurvivors, processStats } from "./proc_stats.ts";
import { expect, now, spawnWorker, type WorkerHandle } from "./sim_agents.ts";

import { DEFAULT_DATABASE_URL, parseFlags } from "./bench_args.ts";
const USAGE =
  `usage: deno run -A bench/fanout.ts [--nodes N] [--procs P] [--policies K] [--policy-bytes B] [--rounds R]
       [--workers W] [--database-url URL] [--server https://host:port --policy-port PORT --ca-file FILE]`;

interface Options {
  nodes: number;
  procs: number;
  policies: number;
  policyBytes: number;
  rounds: number;
  workers: number;
  databaseUrl: string;
  server?: string;
  policyPort: number;
  caFile?: string;
}

function parseArgs(args: string[]): Options {
  const o = parseFlags<Options>(args, USAGE, {
    nodes: 1000,
    procs: 2,
    policies: 1,
    policyBytes: 2048,
    rounds: 3,
    workers: 1,
    databaseUrl: DEFAULT_DATABASE_URL,
    policyPort: 8444,
  }, {
    ints: ["nodes", "procs", "policies", "policyBytes", "rounds", "workers", "policyPort"],
    strings: ["databaseUrl", "server", "caFile"],
  });
  if (o.server && !o.caFile) throw new Error(`--server needs --ca-file (the server's internal CA)\n${USAGE}`);
  return o;
}

/** CPU and RSS summed over the server process and its workers. */
async function serverStats(pid: number): Promise<{ cpu: number; rssMiB: number; processes: number }> {
  const pids = [pid, ...await childPids(pid)];
  const stats = await Promise.all(pids.map(processStats));
  return {
    cpu: stats.reduce((sum, x) => sum + x.cpu, 0),
    rssMiB: stats.reduce((sum, x) => sum + x.rssMiB, 0),
    processes: pids.length,
  };
}

/** CPU-seconds per 10,000 messages written. */
function cpuPer10k(cpu: number, messages: number): string {
  return (cpu / messages * 10_000).toFixed(3);
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** Prints percentiles; for one round also the rate (snapshots delivered per second of that round). */
function summarize(label: string, latencies: number[], options: { rate?: boolean } = {}): { max: number } {
  const sorted = [...latencies].sort((a, b) => a - b);
  const max = sorted.at(-1)!;
  const rate = options.rate === false ? "" : `   ${(sorted.length / (max / 1000)).toFixed(0)} snapshots/s`;
  console.log(
    `${label.padEnd(14)}p50 ${percentile(sorted, 50).toFixed(1)} ms   p99 ${
      percentile(sorted, 99).toFixed(1)
    } ms   ` +
      `max ${max.toFixed(1)} ms${rate}`,
  );
  return { max };
}

interface Target {
  webTarget: string;
  policyTarget: string;
  caPem: string;
  db: Db;
  pid?: number;
  stop(): Promise<void>;
}

/** Starts svc-server (server/main.ts) on a fresh database and waits until it answers. */
async function startTarget(options: Options): Promise<Target> {
  if (options.server) {
    const url = new URL(options.server);
    return {
      webTarget: `${url.hostname}:${url.port || 443}`,
      policyTarget: `${url.hostname}:${options.policyPort}`,
      caPem: await Deno.readTextFile(options.caFile!),
      db: await openPostgres(options.databaseUrl, { max: 4 }),
      stop: async () => {},
    };
  }
  const database = await createBenchDatabase(options.databaseUrl, "svc_bench_");
  const dbUrl = database.url;
  const dataDir = await Deno.makeTempDir({ prefix: "svc-bench-" });
  const [web, policy, metrics] = [freePort(), freePort(), freePort()];
  const configPath = join(dataDir, "server.yaml");
  await Deno.writeTextFile(
    configPath,
    stringify({
      server: {
        address: "127.0.0.1",
        data_dir: dataDir,
        enrollment_port: web,
        policy_port: policy,
        policy_workers: options.workers,
      },
      database: { url: dbUrl.toString() },
      metrics: { listen_addr: `127.0.0.1:${metrics}` },
      log: { level: "warn" },
    }),
  );
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("../server/main.ts", import.meta.url).pathname, "--config", configPath],
    stdout: "null",
    stderr: "inherit",
  }).spawn();
  const caFile = join(dataDir, "pki/ca/ca.crt");
  for (let i = 0;; i++) {
    if (i > 600) throw new Error("svc-server did not start within 60 s");
    try {
      const caPem = await Deno.readTextFile(caFile);
      const client = Deno.createHttpClient({ caCerts: [caPem] });
      const res = await fetch(`https://localhost:${web}/api/v1/version`, { client }).finally(() =>
        client.close()
      );
      await res.body?.cancel();
      if (res.ok) break;
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  const db = await openPostgres(dbUrl.toString(), { max: 4 });
  return {
    webTarget: `localhost:${web}`,
    policyTarget: `localhost:${policy}`,
    caPem: await Deno.readTextFile(caFile),
    db,
    pid: child.pid,
    async stop() {
      await db.close();
      const workers = await childPids(child.pid).catch(() => []);
      try {
        child.kill("SIGTERM");
      } catch {
        // It already exited; its status says how.
      }
      const status = await child.status;
      if (!status.success && status.signal !== "SIGTERM") {
        console.error(`fanout: svc-server exited with ${status.signal ?? `code ${status.code}`}`);
      }
      const left = killSurvivors(workers);
      if (left > 0) console.error(`fanout: ${left} policy worker(s) outlived svc-server; killed`);
      await database.drop();
      await Deno.remove(dataDir, { recursive: true });
    },
  };
}

/**
 * Runs one measured round: arm the workers, trigger, collect arrival times relative to the commit the trigger
 * returns (when its transaction's COMMIT was acknowledged), or to the trigger's start when it returns none.
 * `commitMs` is how long the trigger took until then: the change's own transaction in PostgreSQL (for a
 * binding that reaches every node, the triggers that keep `policy_reach` write a row per node), which is not
 * delivery work.
 */
async function measure(
  workers: WorkerHandle[],
  trigger: () => Promise<number | void>,
): Promise<{ latencies: number[]; commitMs: number }> {
  for (const w of workers) await w.send({ cmd: "arm" });
  for (const w of workers) await expect(w, "armed");
  const start = now();
  const t0 = (await trigger()) ?? start;
  const reports = await Promise.all(workers.map((w) => expect(w, "arrivals")));
  return { latencies: reports.flatMap((r) => r.times.map((t) => t - t0)), commitMs: t0 - start };
}

/** The ceiling: a bare grpc-js server with the policy port's TLS and limits, writing pre-encoded bytes. */
async function rawCeiling(
  workers: WorkerHandle[],
  counts: number[],
  messages: Uint8Array[],
  rounds: number,
): Promise<{ latencies: number[]; cpu: number }> {
  const bare = await startBarePolicyServer("svc-bench-raw-", messages.at(-1)!);
  try {
    for (const [i, w] of workers.entries()) {
      await w.send(bare.rawCommand(counts[i]));
    }
    for (const w of workers) await expect(w, "ready");
    const all: number[] = [];
    let cpu = 0;
    for (let round = 1; round <= rounds; round++) {
      // The bare server runs in this process: its CPU is this process's during the round.
      const before = await processStats(Deno.pid);
      const { latencies } = await measure(workers, () => {
        for (const call of bare.calls) for (const m of messages) call.write(m);
        return Promise.resolve();
      });
      cpu += (await processStats(Deno.pid)).cpu - before.cpu;
      summarize(`raw round ${round}`, latencies);
      all.push(...latencies);
    }
    return { latencies: all, cpu };
  } finally {
    await bare.stop();
  }
}

async function main(): Promise<void> {
  const options = parseArgs(Deno.args);
  const target = await startTarget(options);
  const workers = Array.from({ length: options.procs }, spawnWorker);
  // The server's footprint before any agent connects, so the per-stream cost can be told from the base.
  const idle = target.pid ? await serverStats(target.pid) : undefined;
  try {
    const db = target.db;
    const stamp = Date.now().toString(36);
    const { group, bindings, tokens } = await benchFleet(db, {
      name: `bench-${stamp}`,
      policies: options.policies,
      bytes: options.policyBytes,
      enable: false,
      tokens: options.nodes,
    });
    const counts = workers.map((_, i) =>
      Math.floor(options.nodes / workers.length) + (i < options.nodes % workers.length ? 1 : 0)
    );
    let offset = 0;
    for (const [i, w] of workers.entries()) {
      await w.send({
        cmd: "agents",
        webTarget: target.webTarget,
        policyTargets: [target.policyTarget],
        caPem: target.caPem,
        tokens: tokens.slice(offset, offset + counts[i]),
        prefix: `bench-${stamp}-w${i}`,
      });
      offset += counts[i];
    }
    const ready = await Promise.all(workers.map((w) => expect(w, "ready")));
    const enrollMs = Math.max(...ready.map((r) => r.enrollMs));
    // Measure in steady state: every stream's initial sync recorded (node online) before the change.
    const settled = now();
    for (let i = 0;; i++) {
      const [{ n }] = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM node_streams s JOIN nodes n ON n.id = s.node_id WHERE n.name LIKE $1",
        [`bench-${stamp}-%`],
      );
      if (n >= options.nodes) break;
      if (i > 1200) throw new Error(`only ${n} of ${options.nodes} streams were recorded after 120 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    console.log(
      `${options.nodes} agents enrolled and streaming from ${options.procs} client process(es) ` +
        `(enrollment ${(enrollMs / 1000).toFixed(1)} s, all streams recorded ${
          ((now() - settled) / 1000).toFixed(1)
        } s ` +
        `later); snapshot: ${options.policies} polic(ies) of ~${options.policyBytes} bytes`,
    );

    const all: number[] = [];
    let svcCpu = 0;
    let svcRss = 0;
    let serverProcesses = 1;
    for (let round = 1; round <= options.rounds; round++) {
      const before = target.pid ? await serverStats(target.pid) : undefined;
      const windowStart = now();
      const { latencies, commitMs } = await measure(workers, async () => {
        await db.transaction(async (tx) => {
          for (const id of bindings) {
            await updateBinding(tx, id, round === 1 ? { state: "enabled" } : { priority: round });
          }
        });
        return now();
      });
      const after = target.pid ? await serverStats(target.pid) : undefined;
      const window = (now() - windowStart) / 1000;
      all.push(...latencies);
      summarize(`svc round ${round}`, latencies);
      console.log(
        `${"".padEnd(14)}(after the change's own transaction, which took ${
          commitMs.toFixed(0)
        } ms to commit)`,
      );
      if (before && after) {
        const cpu = after.cpu - before.cpu;
        svcCpu += cpu;
        svcRss = Math.max(svcRss, after.rssMiB);
        serverProcesses = after.processes;
        console.log(
          `${"".padEnd(14)}server CPU ${cpu.toFixed(2)} s in a ${(window * 1000).toFixed(0)} ms window ` +
            `(${((cpu / window) * 100).toFixed(0)}% of one core), RSS ${after.rssMiB.toFixed(0)} MiB ` +
            `with ${options.nodes} streams`,
        );
      }
    }
    if (options.rounds > 1) summarize("svc all", all, { rate: false });

    const snapshot = await buildSnapshot(db, [group], createLogger("error"));
    for (const w of workers) await w.send({ cmd: "close" });
    workers.splice(0, workers.length, ...Array.from({ length: options.procs }, spawnWorker));
    const rawStart = Deno.memoryUsage().rss;
    const raw = await rawCeiling(workers, counts, snapshot.messages, options.rounds);
    if (options.rounds > 1) summarize("raw all", raw.latencies, { rate: false });
    console.log(
      `${"".padEnd(14)}(same TLS settings and message bytes, no database; in the benchmark process, RSS ` +
        `${(rawStart / 2 ** 20).toFixed(0)} → ${(Deno.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB)`,
    );
    const messages = options.rounds * options.nodes * snapshot.messages.length;
    if (idle) {
      console.log(
        `efficiency    server CPU ${cpuPer10k(svcCpu, messages)} s per 10,000 messages ` +
          `(bare grpc-js ${cpuPer10k(raw.cpu, messages)} s, ratio ${(svcCpu / raw.cpu).toFixed(2)}); ` +
          `server RSS ${(svcRss / (options.nodes / 1000)).toFixed(0)} MiB per 1,000 streams ` +
          `(${
            svcRss.toFixed(0)
          } MiB over ${serverProcesses} process(es), policy_workers ${options.workers}; ` +
          `${idle.rssMiB.toFixed(0)} MiB before any stream, so ` +
          `${((svcRss - idle.rssMiB) / (options.nodes / 1000)).toFixed(0)} MiB per 1,000 streams above that)`,
      );
    }
    for (const w of workers) await w.send({ cmd: "close" });
  } finally {
    for (const w of workers) w.kill();
    await target.stop();
  }
}

if (import.meta.main) {
  try {
    await main();
  } catch (err) {
    console.error(`fanout: ${(err as Error).message}`);
    Deno.exit(1);
  }
}
