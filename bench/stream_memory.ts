/**
 * Where a policy stream's memory goes (numbers, not pass/fail).
 *
 *   deno run -A --v8-flags=--expose-gc bench/stream_memory.ts [--streams 5000] [--procs 2] [--mode svc|bare]
 *                                                             [--heap-snapshot FILE] [--database-url URL]
 *
 * `svc`: svc-server runs in this process (startServer, one policy worker: every stream here) on a fresh
 * PostgreSQL database; simulated agents (bench/sim_agents.ts, `--procs` client processes) enroll and keep one
 * mTLS policy stream each. `bare`: a grpc-js server with the policy port's TLS settings and limits, writing one
 * message per stream, the transport alone. Each measures this process after a full garbage collection, idle and
 * with every stream open, and prints per 1,000 streams: RSS (anonymous and file-backed), the V8 heap,
 * `external` (ArrayBuffers, Buffers and other memory V8 is told about) and what remains (native memory V8 does
 * not see: TLS and HTTP/2 state in Rust, allocator slack). `--heap-snapshot FILE` also writes a V8 heap
 * snapshot with the streams open and summarises it: the constructors with the most bytes per stream.
 */
import v8 from "node:v8";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import postgres from "postgres";
import { resolveConfig } from "../server/config/config.ts";
import { startServer } from "../server/server.ts";
import { openPostgres } from "../server/db/mod.ts";
import { createLogger } from "../server/core/log.ts";
import { createEnrollmentToken, createNodeGroup } from "../server/domain/node_groups.ts";
import { changePolicyState, createPolicy } from "../server/domain/policies.ts";
import { createBinding, updateBinding } from "../server/domain/bindings.ts";
import { ensureInternalServerCert, loadOrCreateCa } from "../server/pki/mod.ts";
import { GRPC_LIMITS } from "../server/grpc/policy_server.ts";
import { PolicyPortCredentials } from "../server/grpc/tls_credentials.ts";
import {
  createServiceDefinition,
  createServiceImplementation,
  type ServiceHandlers,
} from "../shared/grpc/adapter.ts";
import { create, toBinary } from "@bufbuild/protobuf";
import { EventType, PolicyService, PolicyUpdateSchema } from "../shared/gen/svc/policy/v1/policy_pb.ts";
import { generateKeyAndCsr } from "../shared/pki/csr.ts";
import { expect, spawnWorker, type WorkerHandle } from "./sim_agents.ts";
import { freePort } from "../tests/helpers/process.ts";

const USAGE = "usage: deno run -A --v8-flags=--expose-gc bench/stream_memory.ts [--streams N] [--procs P] " +
  "[--mode svc|bare] [--heap-snapshot FILE] [--database-url URL]";

interface Options {
  streams: number;
  procs: number;
  mode: "svc" | "bare";
  heapSnapshot?: string;
  databaseUrl: string;
}

function parseArgs(args: string[]): Options {
  const o: Options = {
    streams: 5000,
    procs: 2,
    mode: "svc",
    databaseUrl: Deno.env.get("SVC_TEST_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/postgres",
  };
  for (let i = 0; i < args.length; i++) {
    const [flag, value] = [args[i], args[i + 1]];
    if (flag === "--streams") o.streams = Number(value);
    else if (flag === "--procs") o.procs = Number(value);
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

async function footprint(): Promise<Footprint> {
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let i = 0; i < 3; i++) {
    gc?.();
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

function report(label: string, idle: Footprint, busy: Footprint, streams: number): void {
  const per = (a: number, b: number) => ((b - a) / 2 ** 20 / (streams / 1000)).toFixed(1).padStart(7);
  const mib = (x: number) => (x / 2 ** 20).toFixed(0).padStart(5);
  const native = (f: Footprint) => f.anon - f.heapTotal - f.external;
  console.log(`${label}: ${streams} streams; MiB idle → with streams, and MiB per 1,000 streams above idle`);
  const rows: [string, number, number][] = [
    ["RSS", idle.rss, busy.rss],
    ["  anonymous", idle.anon, busy.anon],
    ["  file-backed", idle.file, busy.file],
    ["V8 heap used", idle.heapUsed, busy.heapUsed],
    ["V8 heap reserved", idle.heapTotal, busy.heapTotal],
    ["external", idle.external, busy.external],
    ["native, unseen by V8", native(idle), native(busy)],
  ];
  for (const [name, a, b] of rows) {
    console.log(`  ${name.padEnd(22)}${mib(a)} → ${mib(b)}   ${per(a, b)} per 1,000`);
  }
}

/**
 * The heap snapshot's "summary": self size and count per constructor (objects), per function (closures) and per
 * kind (strings, arrays, code, native), largest first.
 */
async function summarise(file: string, streams: number): Promise<void> {
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
  let total = 0;
  for (let i = 0; i < snapshot.nodes.length; i += width) {
    const type = types[snapshot.nodes[i + typeAt]];
    const name = snapshot.strings[snapshot.nodes[i + nameAt]];
    const size = snapshot.nodes[i + sizeAt];
    total += size;
    const key = type === "object" || type === "closure" || type === "native"
      ? `${type} ${name.slice(0, 60)}`
      : `(${type})`;
    const g = groups.get(key) ?? { bytes: 0, count: 0 };
    g.bytes += size;
    g.count++;
    groups.set(key, g);
  }
  const top = [...groups].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, 25);
  console.log(`heap snapshot ${file}: ${(total / 2 ** 20).toFixed(1)} MiB in objects; largest groups:`);
  console.log(
    `  ${"group".padEnd(64)}${"MiB".padStart(8)}${"count".padStart(10)}${"bytes/stream".padStart(14)}`,
  );
  for (const [key, g] of top) {
    console.log(
      `  ${key.padEnd(64)}${(g.bytes / 2 ** 20).toFixed(1).padStart(8)}${String(g.count).padStart(10)}${
        (g.bytes / streams).toFixed(0).padStart(14)
      }`,
    );
  }
}

async function withStreams(
  o: Options,
  workers: WorkerHandle[],
): Promise<{ idle: Footprint; busy: Footprint }> {
  const counts = workers.map((_, i) => Math.floor(o.streams / o.procs) + (i < o.streams % o.procs ? 1 : 0));
  if (o.mode === "bare") {
    const dir = await Deno.makeTempDir({ prefix: "svc-bench-mem-" });
    const ca = await loadOrCreateCa({ dataDir: dir });
    const serverCert = await ensureInternalServerCert(ca, { dataDir: dir, hostnames: [] });
    const pair = await generateKeyAndCsr("raw");
    const clientCert = await ca.signCsr(pair.csrPem, { commonName: "raw" });
    const handlers: Record<string, unknown> = {};
    for (const m of PolicyService.methods) handlers[m.localName] = () => Promise.reject(new Error("unused"));
    // An empty snapshot: what the agent waits for before it counts as ready.
    const message = toBinary(
      PolicyUpdateSchema,
      create(PolicyUpdateSchema, { type: EventType.SNAPSHOT, snapshotComplete: true }),
    );
    handlers.subscribePolicyUpdates = (
      _req: unknown,
      call: { write(b: Uint8Array): void; on: grpc.ServerWritableStream<unknown, unknown>["on"] },
    ) =>
      new Promise<void>((resolve) => {
        call.write(message);
        call.on("cancelled", () => resolve());
      });
    const server = new grpc.Server({
      "grpc.max_concurrent_streams": GRPC_LIMITS.maxConcurrentStreams,
      "grpc.max_send_message_length": GRPC_LIMITS.maxMessageBytes,
    });
    server.addService(
      createServiceDefinition(PolicyService),
      createServiceImplementation(PolicyService, handlers as ServiceHandlers<typeof PolicyService>),
    );
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(
        "127.0.0.1:0",
        new PolicyPortCredentials({
          caPem: ca.certPem,
          certPem: serverCert.certPem,
          keyPem: serverCert.keyPem,
        }),
        (err, p) => err ? reject(err) : resolve(p),
      )
    );
    const idle = await footprint();
    for (const [i, w] of workers.entries()) {
      await w.send({
        cmd: "raw",
        target: `localhost:${port}`,
        caPem: ca.certPem,
        certPem: clientCert.certPem,
        keyPem: pair.keyPem,
        count: counts[i],
      });
    }
    for (const w of workers) await expect(w, "ready");
    const busy = await footprint();
    if (o.heapSnapshot) v8.writeHeapSnapshot(o.heapSnapshot);
    for (const w of workers) await w.send({ cmd: "close" });
    server.forceShutdown();
    await Deno.remove(dir, { recursive: true });
    return { idle, busy };
  }

  const name = `svc_bench_mem_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const admin = postgres(o.databaseUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  const url = new URL(o.databaseUrl);
  url.pathname = `/${name}`;
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
    "log.level": "warn",
  }, {});
  const running = await startServer(config, { log: createLogger("warn"), print: () => {} });
  const db = await openPostgres(url.toString(), { max: 4 });
  try {
    const group = (await db.transaction((tx) => createNodeGroup(tx, { name: "mem" }))).id;
    await db.transaction(async (tx) => {
      const p = await createPolicy(tx, {
        name: "mem",
        type: "Firefox",
        content: '{"DisableTelemetry":true}',
        createdBy: "bench",
      });
      await changePolicyState(tx, p.id, "released");
      const b = await createBinding(tx, { policyId: p.id, nodeGroupId: group });
      await updateBinding(tx, b.id, { state: "enabled" });
    });
    const tokens: string[] = [];
    for (let i = 0; i < o.streams; i++) {
      tokens.push((await createEnrollmentToken(db, group, { createdBy: "bench" })).token);
    }
    const idle = await footprint();
    const caPem = await Deno.readTextFile(join(dataDir, "pki/ca/ca.crt"));
    let offset = 0;
    for (const [i, w] of workers.entries()) {
      await w.send({
        cmd: "agents",
        webTarget: `localhost:${web}`,
        policyTargets: [`localhost:${policy}`],
        caPem,
        tokens: tokens.slice(offset, offset + counts[i]),
        prefix: `mem-w${i}`,
      });
      offset += counts[i];
    }
    for (const w of workers) await expect(w, "ready");
    const busy = await footprint();
    if (o.heapSnapshot) v8.writeHeapSnapshot(o.heapSnapshot);
    for (const w of workers) await w.send({ cmd: "close" });
    return { idle, busy };
  } finally {
    await db.close();
    await running.stop();
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
    await Deno.remove(dataDir, { recursive: true });
  }
}

async function main(): Promise<void> {
  const o = parseArgs(Deno.args);
  if (!(globalThis as { gc?: unknown }).gc) {
    console.log("note: run with --v8-flags=--expose-gc for figures after a full GC");
  }
  const workers = Array.from({ length: o.procs }, spawnWorker);
  try {
    const { idle, busy } = await withStreams(o, workers);
    report(
      o.mode === "svc" ? "svc-server (policy port in this process)" : "bare grpc-js",
      idle,
      busy,
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
