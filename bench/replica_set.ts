/**
 * A replica set measured as a whole (numbers, not pass/fail).
 *
 *   deno run -A bench/replica_set.ts [--replicas 4] [--workers 2] [--nodes 2000] [--procs 2] [--rounds 5]
 *                                    [--policies 10] [--policy-bytes 1024] [--pool-size 5] [--database-url URL]
 *
 * Starts `--replicas` svc-server processes (tests/helpers/replicas.ts: one operator CA and key file, one
 * PostgreSQL database), each with `--workers` policy workers sharing its policy port, and `--nodes` simulated
 * agents (bench/sim_agents.ts) from `--procs` client processes, spread round-robin over the replicas' policy
 * ports. Each round changes the priority of every binding in one transaction (a resync of the one group every
 * agent is in) and times commit → `snapshot_complete` at every agent. Printed:
 * - per round and over all rounds: change → agent p50/p99/max;
 * - PostgreSQL CPU per change, from /proc of the backends serving this database (pg_stat_activity's pids), so
 *   other databases on the same server do not count, less their background at rest (liveness heartbeats, hub
 *   ticks), and the replicas' own CPU;
 * - NOTIFY: how many connections LISTEN in the database, and what a NOTIFY costs there (commit latency and
 *   backend CPU over 500 of them, against the same in a database nobody listens in);
 * - connections: in use per replica process at rest and at the busiest moment of the rounds, against
 *   `max_connections` and the budget replicas × (1 + workers) × (pool_size + 3) (server/db/connection_budget.ts);
 * - RSS per replica, idle and with its streams, per 1,000 streams.
 */
import { join } from "node:path";
import postgres from "postgres";
import { type Db, openPostgres } from "../server/db/mod.ts";
import { FIXED_CONNECTIONS_PER_PROCESS } from "../server/db/connection_budget.ts";
import { updateBinding } from "../server/domain/bindings.ts";
import { loadOrCreateCa } from "../server/pki/mod.ts";
import { startReplica } from "../tests/helpers/replicas.ts";
import type { ServerProcess } from "../tests/helpers/process.ts";
import { benchFleet, createBenchDatabase } from "./bench_fleet.ts";
import { childPids, killSurvivors, processStats } from "./proc_stats.ts";
import { expect, now, spawnWorker, type WorkerHandle } from "./sim_agents.ts";

import { DEFAULT_DATABASE_URL, parseFlags } from "./bench_args.ts";
const USAGE =
  "usage: deno run -A bench/replica_set.ts [--replicas R] [--workers W] [--nodes N] [--procs P] " +
  "[--rounds K] [--policies K] [--policy-bytes B] [--pool-size S] [--database-url URL]";

interface Options {
  replicas: number;
  workers: number;
  nodes: number;
  procs: number;
  rounds: number;
  policies: number;
  policyBytes: number;
  poolSize: number;
  databaseUrl: string;
}

function parseArgs(args: string[]): Options {
  return parseFlags<Options>(args, USAGE, {
    replicas: 4,
    workers: 2,
    nodes: 2000,
    procs: 2,
    rounds: 5,
    policies: 10,
    policyBytes: 1024,
    poolSize: 5,
    databaseUrl: DEFAULT_DATABASE_URL,
  }, {
    ints: ["replicas", "workers", "nodes", "procs", "rounds", "policies", "policyBytes", "poolSize"],
    strings: ["databaseUrl"],
  });
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

function spread(label: string, values: number[], unit = "ms"): string {
  const s = [...values].sort((a, b) => a - b);
  return `${label.padEnd(16)}p50 ${percentile(s, 50).toFixed(1)} ${unit}   p99 ${
    percentile(s, 99).toFixed(1)
  } ${unit}` +
    `   max ${s.at(-1)!.toFixed(1)} ${unit}`;
}

/** Processor seconds of the PostgreSQL backends serving database `name` (live ones; a closed one takes its time). */
async function backendCpu(q: Db, name: string): Promise<number> {
  const rows = await q.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = $1", [name]);
  const stats = await Promise.all(rows.map((r) => processStats(r.pid).catch(() => ({ cpu: 0, rssMiB: 0 }))));
  return stats.reduce((sum, s) => sum + s.cpu, 0);
}

/** CPU and RSS of a replica: its main process and its policy workers. */
async function replicaStats(
  proc: ServerProcess,
): Promise<{ cpu: number; rssMiB: number; processes: number }> {
  const pids = [proc.pid, ...await childPids(proc.pid)];
  const stats = await Promise.all(pids.map(processStats));
  return {
    cpu: stats.reduce((s, x) => s + x.cpu, 0),
    rssMiB: stats.reduce((s, x) => s + x.rssMiB, 0),
    processes: pids.length,
  };
}

/** Connections of database `name` by state. */
async function connections(
  q: Db,
  name: string,
): Promise<{ total: number; active: number; listening: number }> {
  const [row] = await q.query<{ total: number; active: number; listening: number }>(
    `SELECT count(*)::int AS total, count(*) FILTER (WHERE state = 'active')::int AS active,
            count(*) FILTER (WHERE query ILIKE 'listen %')::int AS listening
       FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
    [name],
  );
  return row;
}

/** Commit latency and backend CPU of `count` NOTIFYs, each in its own transaction, on one connection. */
async function notifyCost(url: string, count: number): Promise<{ p50: number; p99: number; cpuMs: number }> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [{ pid }] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
    const payload = JSON.stringify({ kind: "probe", pad: "x".repeat(150) });
    const cpu0 = (await processStats(pid)).cpu;
    const times: number[] = [];
    for (let i = 0; i < count; i++) {
      const t0 = performance.now();
      // A channel nobody listens on: PostgreSQL still queues it and wakes every listener of the database.
      await sql`SELECT pg_notify('svc_bench_probe', ${payload})`;
      times.push(performance.now() - t0);
    }
    const cpuMs = ((await processStats(pid)).cpu - cpu0) * 1000 / count;
    times.sort((a, b) => a - b);
    return { p50: percentile(times, 50), p99: percentile(times, 99), cpuMs };
  } finally {
    await sql.end();
  }
}

async function main(): Promise<void> {
  const o = parseArgs(Deno.args);
  const database = await createBenchDatabase(o.databaseUrl, "svc_bench_replicas_");
  const { name, url } = database;
  const tmp = await Deno.makeTempDir({ prefix: "svc-bench-replicas-" });
  const replicas: ServerProcess[] = [];
  const workers: WorkerHandle[] = [];
  let db: Db | undefined;
  try {
    await loadOrCreateCa({ dataDir: tmp });
    const caPem = await Deno.readTextFile(join(tmp, "pki/ca/ca.crt"));
    const config = {
      database: { url: url.toString(), pool_size: o.poolSize },
      ca: {
        cert_file: join(tmp, "pki/ca/ca.crt"),
        key_file: join(tmp, "pki/ca/ca.key"),
        key_encryption_key_file: join(tmp, "secrets.kek"),
      },
      server: { address: "127.0.0.1", policy_workers: o.workers },
      log: { level: "warn" },
    };
    for (let i = 0; i < o.replicas; i++) replicas.push(await startReplica(`r${i}`, { caPem, config }));
    // This process's own connections (2 lanes, 2 pooled), left out of the per-process figure.
    const coordinator = 4;
    db = await openPostgres(url.toString(), { max: coordinator });
    const [{ max }] = await db.query<{ max: number }>(
      "SELECT current_setting('max_connections')::int AS max",
    );
    const idleConnections = await connections(db, name);
    // The replicas' own background (liveness heartbeats, hub ticks), per second, to take out of a round's figure.
    const bg0 = await backendCpu(db, name);
    await new Promise((r) => setTimeout(r, 10_000));
    const backgroundPerSecond = ((await backendCpu(db, name)) - bg0) / 10;
    const idle = await Promise.all(replicas.map(replicaStats));
    const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
    console.log(
      `${o.replicas} replicas × (1 + ${o.workers} policy workers), pool_size ${o.poolSize}; ${o.nodes} agents from ` +
        `${o.procs} client process(es); ${o.policies} policies of ~${o.policyBytes} bytes; ` +
        `${navigator.hardwareConcurrency} CPUs, load average ${load}`,
    );

    const stamp = Date.now().toString(36);
    const { bindings, tokens } = await benchFleet(db, {
      name: `bench-${stamp}`,
      policies: o.policies,
      bytes: o.policyBytes,
      enable: true,
      tokens: o.nodes,
    });
    for (let i = 0; i < o.procs; i++) workers.push(spawnWorker());
    const counts = workers.map((_, i) => Math.floor(o.nodes / o.procs) + (i < o.nodes % o.procs ? 1 : 0));
    let offset = 0;
    for (const [i, w] of workers.entries()) {
      await w.send({
        cmd: "agents",
        // Enrollment spread too: agent batches of each client process go to the replicas in turn.
        webTarget: `localhost:${replicas[i % replicas.length].webPort}`,
        policyTargets: replicas.map((r) => `localhost:${r.policyPort}`),
        caPem,
        tokens: tokens.slice(offset, offset + counts[i]),
        prefix: `bench-${stamp}-w${i}`,
      });
      offset += counts[i];
    }
    await Promise.all(workers.map((w) => expect(w, "ready")));
    for (let i = 0;; i++) {
      const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM node_streams");
      if (n >= o.nodes) break;
      if (i > 1200) throw new Error(`only ${n} of ${o.nodes} streams recorded after 120 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const perProcess = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM node_streams GROUP BY replica_id ORDER BY 1",
    );
    console.log(
      `streams per serving process: ${
        perProcess.map((r) => r.n).join(", ")
      } (${perProcess.length} processes)`,
    );
    const busy = await Promise.all(replicas.map(replicaStats));

    // Connections sampled through the rounds: the busiest moment.
    let peak = { total: 0, active: 0, listening: 0 };
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const c = await connections(db!, name);
        if (c.total > peak.total) peak = { ...peak, total: c.total, listening: c.listening };
        if (c.active > peak.active) peak = { ...peak, active: c.active };
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const all: number[] = [];
    const pgCpu: number[] = [];
    const svcCpu: number[] = [];
    for (let round = 1; round <= o.rounds; round++) {
      for (const w of workers) await w.send({ cmd: "arm" });
      for (const w of workers) await expect(w, "armed");
      const pg0 = await backendCpu(db, name);
      const svc0 = (await Promise.all(replicas.map(replicaStats))).reduce((s, r) => s + r.cpu, 0);
      const w0 = now();
      await db.transaction(async (tx) => {
        for (const id of bindings) await updateBinding(tx, id, { priority: round });
      });
      const t0 = now();
      const reports = await Promise.all(workers.map((w) => expect(w, "arrivals")));
      const latencies = reports.flatMap((r) => r.times.map((t) => t - t0));
      const seconds = (now() - w0) / 1000;
      pgCpu.push(Math.max(0, (await backendCpu(db, name)) - pg0 - backgroundPerSecond * seconds));
      svcCpu.push((await Promise.all(replicas.map(replicaStats))).reduce((s, r) => s + r.cpu, 0) - svc0);
      all.push(...latencies);
      console.log(
        `${spread(`round ${round}`, latencies)}   PostgreSQL ${(pgCpu.at(-1)! * 1000).toFixed(0)} ms CPU, ` +
          `replicas ${(svcCpu.at(-1)! * 1000).toFixed(0)} ms CPU`,
      );
    }
    sampling = false;
    await sampler;
    console.log(spread("all rounds", all));
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    console.log(
      `per change: PostgreSQL ${
        (mean(pgCpu) * 1000).toFixed(0)
      } ms CPU (the backends of this database, less ` +
        `their background of ${(backgroundPerSecond * 1000).toFixed(0)} ms per second at rest), ` +
        `replicas ${(mean(svcCpu) * 1000).toFixed(0)} ms CPU (${
          (mean(svcCpu) * 1000 / (o.nodes / 1000)).toFixed(0)
        } ms per 1,000 agents)`,
    );

    const listened = await notifyCost(url.toString(), 500);
    const quietUrl = new URL(o.databaseUrl);
    const quiet = await notifyCost(quietUrl.toString(), 500);
    const listening = (await connections(db, name)).listening;
    console.log(
      `NOTIFY with ${listening} listening connections: commit p50 ${listened.p50.toFixed(2)} ms p99 ${
        listened.p99.toFixed(2)
      } ms, ${listened.cpuMs.toFixed(3)} ms backend CPU each; in a database nobody listens in: p50 ${
        quiet.p50.toFixed(2)
      } ms p99 ${quiet.p99.toFixed(2)} ms, ${quiet.cpuMs.toFixed(3)} ms`,
    );
    const processes = o.replicas * (1 + (o.workers > 1 ? o.workers : 0));
    const budget = processes * (o.poolSize + FIXED_CONNECTIONS_PER_PROCESS);
    console.log(
      `connections of this database: ${idleConnections.total} before the agents, ${peak.total} at the busiest ` +
        `(${peak.active} active at once); ${processes} server processes could open ${budget} ` +
        `(× (pool_size ${o.poolSize} + ${FIXED_CONNECTIONS_PER_PROCESS})), ${
          ((peak.total - coordinator) / processes).toFixed(1)
        } per process at the busiest; max_connections ${max}`,
    );
    for (const [i, r] of replicas.entries()) {
      const streams = o.nodes / o.replicas;
      console.log(
        `replica r${i}: ${busy[i].processes} processes, RSS ${idle[i].rssMiB.toFixed(0)} MiB idle → ` +
          `${busy[i].rssMiB.toFixed(0)} MiB with ~${streams.toFixed(0)} streams (${
            ((busy[i].rssMiB - idle[i].rssMiB) / (streams / 1000)).toFixed(0)
          } MiB per 1,000 streams; a few hundred streams per process sit within the processes' own swings, ` +
          `bench/stream_memory.ts measures one process at a time; policy port ${r.policyPort})`,
      );
    }
    for (const w of workers) await w.send({ cmd: "close" });
  } finally {
    for (const w of workers) w.kill();
    await db?.close();
    const children = (await Promise.all(replicas.map((r) => childPids(r.pid).catch(() => [])))).flat();
    await Promise.all(replicas.map((r) => r.stop()));
    const left = killSurvivors(children);
    if (left > 0) console.error(`replica_set: ${left} policy worker(s) outlived their replica; killed`);
    await database.drop();
    await Deno.remove(tmp, { recursive: true });
    for (const r of replicas) await Deno.remove(r.dataDir, { recursive: true }).catch(() => {});
  }
}

if (import.meta.main) {
  try {
    await main();
  } catch (err) {
    console.error(`replica_set: ${(err as Error).stack ?? err}`);
    Deno.exit(1);
  }
}
