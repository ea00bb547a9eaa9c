/**
 * Where a policy stream's memory goes (numbers, not pass/fail).
 *
 *   deno run -A --v8-flags=--expose-gc bench/stream_memory.ts [--streams 5000] [--procs 2] [--mode svc|bare]
 *        [--rounds 3] [--policies 10] [--policy-bytes 1024] [--heap-snapshot FILE] [--database-url URL]
 *
 * `svc`: svc-server runs in this process (startServer, one policy worker: every stream here) on a fresh
 * PostgreSQL database; simulated agents (bench/sim_agents.ts, `--procs` client processes) enroll and keep one
 * mTLS policy stream each, and each round changes the priority of every binding (a snapshot of `--policies`
 * policies to every stream). `bare`: a grpc-js server with the policy port's TLS settings and limits writing
 * the same number and size of messages to every stream, the transport alone. This process is measured idle, with
 * the streams open (after a full collection), after the rounds as the operating system sees it, and after a
 * collection, and 40 s later (svc gives freed native memory back after activity, server/hub/memory_trim.ts);
 * printed per 1,000 streams above idle: RSS (anonymous and file-backed), the V8 heap, `external`
 * (ArrayBuffers and Buffers) and what remains (native memory V8 does not see: TLS and HTTP/2 state in Rust,
 * allocator slack). `--heap-snapshot FILE` writes FILE.idle and FILE.busy and prints what the streams added, by
 * constructor, per stream.
 */
import v8 from "node:v8";
import { join } from "node:path";
import { resolveConfig } from "../server/config/config.ts";
import { startServer } from "../server/server.ts";
import { openPostgres } from "../server/db/mod.ts";
import { createLogger } from "../server/core/log.ts";
import { updateBinding } from "../server/domain/bindings.ts";
import { create, toBinary } from "@bufbuild/protobuf";
import { EventType, PolicyUpdateSchema } from "../shared/gen/svc/policy/v1/policy_pb.ts";
import { type Command, expect, spawnWorker, type WorkerHandle } from "./sim_agents.ts";
import { benchFleet, createBenchDatabase } from "./bench_fleet.ts";
import { startBarePolicyServer } from "./bare_policy_server.ts";
import { freePort } from "../tests/helpers/process.ts";

const USAGE = "usage: deno run -A --v8-flags=--expose-gc bench/stream_memory.ts [--streams N] [--procs P] " +
  "[--mode svc|bare] [--heap-snapshot FILE] [--database-url URL]";

interface Options {
  streams: number;
  procs: number;
  rounds: number;
  policies: number;
  policyBytes: number;
  mode: "svc" | "bare";
  heapSnapshot?: string;
  databaseUrl: string;
}

function parseArgs(args: string[]): Options {
  const o: Options = {
    streams: 5000,
    procs: 2,
    rounds: 3,
    policies: 10,
    policyBytes: 1024,
    mode: "svc",
    databaseUrl: Deno.env.get("SVC_TEST_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/postgres",
  };
  for (let i = 0; i < args.length; i++) {
    const [flag, value] = [args[i], args[i + 1]];
    if (flag === "--streams") o.streams = Number(value);
    else if (flag === "--procs") o.procs = Number(value);
    else if (flag === "--rounds") o.rounds = Number(value);
    else if (flag === "--policies") o.policies = Number(value);
    else if (flag === "--policy-bytes") o.policyBytes = Number(value);
    else if (flag === "--mode" && (value === "svc" || value === "bare")) o.mode = value;
    else if (flag === "--heap-snapshot") o.heapSnapshot = value;
    else if (flag === "--database-url") o.databaseUrl = value ?? "";
    else throw new Error(`unknown or bad argument ${flag} ${value ?? ""}\n${USAGE}`);
    i++;
  }
  if (!Number.isInteger(o.streams) || o.streams < 1 || !Number.isInteger(o.procs) || o.procs < 1) {
    throw new Error(`--streams and --procs need positive whole numbers\n${USAGE}`);
  }
  return o;
}

/** This process's memory, after garbage collection when the flag allows it. */
interface Footprint {
  rss: number;
  anon: number;
  file: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
}

async function footprint(options: { gc: boolean }): Promise<Footprint> {
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let i = 0; i < 3; i++) {
    if (options.gc) gc?.();
    await new Promise((r) => setTimeout(r, 200));
  }
  const status = await Deno.readTextFile("/proc/self/status");
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) * 1024;
  const m = Deno.memoryUsage();
  return {
    rss: kib("VmRSS"),
    anon: kib("RssAnon"),
    file: kib("RssFile"),
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    external: m.external,
  };
}

/** Prints each phase above idle, per 1,000 streams. */
function report(label: string, phases: Phases, streams: number): void {
  const per = (f: Footprint, key: keyof Footprint | "native") => {
    const v = (x: Footprint) => key === "native" ? x.anon - x.heapTotal - x.external : x[key];
    return ((v(f) - v(phases.idle)) / 2 ** 20 / (streams / 1000)).toFixed(1).padStart(9);
  };
  const mib = (x: number) => (x / 2 ** 20).toFixed(0).padStart(6);
  console.log(`${label}: ${streams} streams; MiB per 1,000 streams above idle`);
  console.log(
    `  ${"".padEnd(24)}${
      ["idle MiB", "open", "rounds", "+ GC", "+ 40 s"].map((h) => h.padStart(9)).join("")
    }`,
  );
  const rows: [string, keyof Footprint | "native"][] = [
    ["RSS", "rss"],
    ["  anonymous", "anon"],
    ["  file-backed", "file"],
    ["V8 heap used", "heapUsed"],
    ["V8 heap reserved", "heapTotal"],
    ["external", "external"],
    ["native, unseen by V8", "native"],
  ];
  for (const [name, key] of rows) {
    const idle = key === "native"
      ? phases.idle.anon - phases.idle.heapTotal - phases.idle.external
      : phases.idle[key];
    console.log(
      `  ${name.padEnd(24)}${mib(idle).padStart(9)}${per(phases.open, key)}${per(phases.afterRounds, key)}${
        per(phases.afterRoundsGc, key)
      }${per(phases.settled, key)}`,
    );
  }
}

/** Self size and count per group of a heap snapshot: constructor (objects), function (closures), kind. */
async function groupsOf(file: string): Promise<Map<string, { bytes: number; count: number }>> {
  const snapshot = JSON.parse(await Deno.readTextFile(file)) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields;
  const types = snapshot.snapshot.meta.node_types[0];
  const width = fields.length;
  const [typeAt, nameAt, sizeAt] = ["type", "name", "self_size"].map((f) => fields.indexOf(f));
  const groups = new Map<string, { bytes: number; count: number }>();
  for (let i = 0; i < snapshot.nodes.length; i += width) {
    const type = types[snapshot.nodes[i + typeAt]];
    const name = snapshot.strings[snapshot.nodes[i + nameAt]];
    const key = type === "object" || type === "closure" || type === "native"
      ? `${type} ${name.slice(0, 60)}`
      : `(${type})`;
    const g = groups.get(key) ?? { bytes: 0, count: 0 };
    g.bytes += snapshot.nodes[i + sizeAt];
    g.count++;
    groups.set(key, g);
  }
  return groups;
}

/**
 * What the streams added to the heap: the groups of the snapshot with streams minus those of the idle one,
 * largest first, per stream.
 */
async function summarise(file: string, streams: number): Promise<void> {
  const idle = await groupsOf(`${file}.idle`);
  const busy = await groupsOf(`${file}.busy`);
  const diff = [...busy].map(([key, g]) => {
    const before = idle.get(key) ?? { bytes: 0, count: 0 };
    return { key, bytes: g.bytes - before.bytes, count: g.count - before.count };
  }).sort((a, b) => b.bytes - a.bytes);
  const total = diff.reduce((sum, d) => sum + d.bytes, 0);
  console.log(
    `heap snapshots ${file}.idle / .busy: ${(total / streams).toFixed(0)} bytes per stream in objects; ` +
      "largest groups added:",
  );
  console.log(`  ${"group".padEnd(64)}${"bytes/stream".padStart(14)}${"count/stream".padStart(14)}`);
  for (const d of diff.slice(0, 25)) {
    console.log(
      `  ${d.key.padEnd(64)}${(d.bytes / streams).toFixed(0).padStart(14)}${
        (d.count / streams).toFixed(1).padStart(14)
      }`,
    );
  }
}

/** What a run measured: this process idle, with the streams open, and after the fan-out rounds. */
interface Phases {
  idle: Footprint;
  open: Footprint;
  /** After the rounds, as the operating system sees it (no forced collection). */
  afterRounds: Footprint;
  /** After the rounds and a full collection. */
  afterRoundsGc: Footprint;
  /** Half a minute later (svc gives freed native memory back after activity: server/hub/memory_trim.ts). */
  settled: Footprint;
}

/** The server side of a run: set up idle, then fan out one change to every stream per round. */
interface Target {
  /** Commands that make the client processes open their streams against this target. */
  commands(counts: number[]): Promise<Command[]>;
  /** One change that every stream receives as a complete snapshot. */
  change(round: number): Promise<void>;
  stop(): Promise<void>;
}

/** The policy messages of one snapshot: `policies` messages of ~`bytes`, the last marked complete. */
function snapshotMessages(policies: number, bytes: number): Uint8Array[] {
  return Array.from({ length: policies }, (_, i) =>
    toBinary(
      PolicyUpdateSchema,
      create(PolicyUpdateSchema, {
        type: EventType.SNAPSHOT,
        snapshotComplete: i === policies - 1,
        policy: { id: crypto.randomUUID(), name: `p${i}`, type: "BenchBlob", content: "x".repeat(bytes) },
      }),
    ));
}

async function bareTarget(o: Options): Promise<Target> {
  const messages = snapshotMessages(o.policies, o.policyBytes);
  const bare = await startBarePolicyServer("svc-bench-mem-", messages.at(-1)!);
  return {
    commands: (counts) => Promise.resolve(counts.map((count) => bare.rawCommand(count))),
    change() {
      for (const call of bare.calls) for (const m of messages) call.write(m);
      return Promise.resolve();
    },
    stop: () => bare.stop(),
  };
}

async function svcTarget(o: Options): Promise<Target> {
  const database = await createBenchDatabase(o.databaseUrl, "svc_bench_mem_");
  const url = database.url;
  const dataDir = await Deno.makeTempDir({ prefix: "svc-bench-mem-" });
  const [web, policy, metrics] = [freePort(), freePort(), freePort()];
  const config = resolveConfig({
    "server.address": "127.0.0.1",
    "server.data_dir": dataDir,
    "server.enrollment_port": web,
    "server.policy_port": policy,
    "server.policy_workers": 1,
    "database.url": url.toString(),
    "metrics.listen_addr": `127.0.0.1:${metrics}`,
    "log.level": "error",
  }, {});
  const running = await startServer(config, { log: createLogger("error"), print: () => {} });
  const db = await openPostgres(url.toString(), { max: 4 });
  const { bindings, tokens } = await benchFleet(db, {
    name: "mem",
    policies: o.policies,
    bytes: o.policyBytes,
    enable: true,
    tokens: o.streams,
  });
  const caPem = await Deno.readTextFile(join(dataDir, "pki/ca/ca.crt"));
  return {
    commands(counts) {
      let offset = 0;
      return Promise.resolve(counts.map((count, i) => {
        const slice = tokens.slice(offset, offset + count);
        offset += count;
        return {
          cmd: "agents" as const,
          webTarget: `localhost:${web}`,
          policyTargets: [`localhost:${policy}`],
          caPem,
          tokens: slice,
          prefix: `mem-w${i}`,
        };
      }));
    },
    async change(round) {
      await db.transaction(async (tx) => {
        for (const id of bindings) await updateBinding(tx, id, { priority: round });
      });
    },
    async stop() {
      // The streams are closed first, so their bookkeeping finds the database still there.
      for (let i = 0; i < 600; i++) {
        const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM node_streams");
        if (n === 0) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      await db.close();
      await running.stop();
      await database.drop();
      await Deno.remove(dataDir, { recursive: true });
    },
  };
}

async function measure(o: Options, workers: WorkerHandle[]): Promise<Phases> {
  const target = o.mode === "bare" ? await bareTarget(o) : await svcTarget(o);
  try {
    const idle = await footprint({ gc: true });
    if (o.heapSnapshot) v8.writeHeapSnapshot(`${o.heapSnapshot}.idle`);
    const counts = workers.map((_, i) => Math.floor(o.streams / o.procs) + (i < o.streams % o.procs ? 1 : 0));
    const commands = await target.commands(counts);
    for (const [i, w] of workers.entries()) await w.send(commands[i]);
    for (const w of workers) await expect(w, "ready");
    const open = await footprint({ gc: true });
    for (let round = 1; round <= o.rounds; round++) {
      for (const w of workers) await w.send({ cmd: "arm" });
      for (const w of workers) await expect(w, "armed");
      await target.change(round);
      await Promise.all(workers.map((w) => expect(w, "arrivals")));
    }
    const afterRounds = await footprint({ gc: false });
    const afterRoundsGc = await footprint({ gc: true });
    await new Promise((r) => setTimeout(r, 40_000));
    const settled = await footprint({ gc: false });
    if (o.heapSnapshot) v8.writeHeapSnapshot(`${o.heapSnapshot}.busy`);
    for (const w of workers) await w.send({ cmd: "close" });
    return { idle, open, afterRounds, afterRoundsGc, settled };
  } finally {
    await target.stop();
  }
}

async function main(): Promise<void> {
  const o = parseArgs(Deno.args);
  if (!(globalThis as { gc?: unknown }).gc) {
    console.log("note: run with --v8-flags=--expose-gc for the figures after a full collection");
  }
  const workers = Array.from({ length: o.procs }, spawnWorker);
  try {
    const phases = await measure(o, workers);
    report(
      `${
        o.mode === "svc" ? "svc-server (policy port in this process)" : "bare grpc-js"
      }, ${o.rounds} round(s) of ` +
        `${o.policies} × ${o.policyBytes} bytes`,
      phases,
      o.streams,
    );
    if (o.heapSnapshot) await summarise(o.heapSnapshot, o.streams);
  } finally {
    for (const w of workers) w.kill();
  }
}

if (import.meta.main) {
  try {
    await main();
    Deno.exit(0);
  } catch (err) {
    console.error(`stream_memory: ${(err as Error).stack ?? err}`);
    Deno.exit(1);
  }
}
