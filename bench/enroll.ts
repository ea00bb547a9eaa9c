/**
 * Enrollment throughput and where its time goes (numbers, not pass/fail).
 *
 *   deno run -A bench/enroll.ts [--count 600] [--concurrency 32] [--driver both|pglite|postgres]
 *     [--ca-key-type P-256|P-384]
 *
 * For each database driver, a server process (the real enrollment handlers on the real web port, with the
 * hub, on a fresh migrated database: embedded PGlite, or PostgreSQL from `SVC_TEST_DATABASE_URL`, default
 * postgres://postgres@127.0.0.1:5432/postgres) hands out one single-use token per agent. This process then
 * enrolls `--count` agents, `--concurrency` at a time, each as a real agent does: its own grpc-js channel and
 * TLS connection, an ECDSA P-256 CSR made beforehand (making keys is the agent's cost, not the server's).
 *
 * Printed per driver: enrollments per second; the server's processor time per enrollment (user+system of the
 * server process over the run) and this process's; and the mean time of each phase: TLS handshake (client
 * side: connect until the channel is ready), the Enroll call as the client sees it, and inside the server's
 * handler CSR parse/verify, signing, the database work (a read of the token before signing, then the one
 * transaction that consumes it and records the node) and the
 * audit row's insert within that transaction (sent together with the node's statements, so it overlaps them). Phase times are wall-clock, so under concurrency they include waiting for the loop;
 * a sequential pass (concurrency 1, `--count`/10 agents) gives the uncontended figures next to them.
 */
import { Buffer } from "node:buffer";
import { AsyncLocalStorage } from "node:async_hooks";
import process from "node:process";
import { parseArgs } from "node:util";
import * as grpc from "@grpc/grpc-js";
import type { Db } from "../server/db/db.ts";
import { openPostgres } from "../server/db/mod.ts";
import type { ServerContext } from "../server/context.ts";
import { createHub } from "../server/hub/hub.ts";
import { createEnrollmentHandlers } from "../server/grpc/enrollment_service.ts";
import { startWebPort } from "../server/web_port.ts";
import { createEnrollmentToken, createNodeGroup } from "../server/domain/node_groups.ts";
import { checkCsr, issueClientCert } from "../server/pki/sign_csr.ts";
import { CA_KEY_TYPES, type CaKeyType, DEFAULT_CA_KEY_TYPE } from "../server/config/ca_key_type.ts";
import { createClient } from "../shared/grpc/adapter.ts";
import { EnrollmentService } from "../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { generateKeyAndCsr } from "../shared/pki/csr.ts";
import { createTestServer } from "../tests/helpers/app.ts";
import type { Driver } from "../tests/helpers/db.ts";
import { machineCpu, programCpu } from "./proc_stats.ts";

const DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres";
const SERVER_PHASES = ["handler", "csr", "sign", "db", "audit"] as const;
type ServerPhase = (typeof SERVER_PHASES)[number];
type Phases = Record<ServerPhase, number>;

const { values: args } = parseArgs({
  args: Deno.args,
  options: {
    count: { type: "string", default: "600" },
    concurrency: { type: "string", default: "32" },
    driver: { type: "string", default: "both" },
    serve: { type: "string" },
    "cpu-prof-dir": { type: "string" },
    "ca-key-type": { type: "string", default: DEFAULT_CA_KEY_TYPE },
  },
});
if (!(CA_KEY_TYPES as readonly string[]).includes(args["ca-key-type"])) {
  throw new Error(`--ca-key-type must be one of ${CA_KEY_TYPES.join(", ")}`);
}
const caKeyType = args["ca-key-type"] as CaKeyType;

/** The lines of a byte stream. */
async function* linesOf(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  let buffered = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    buffered += chunk;
    let end;
    while ((end = buffered.indexOf("\n")) >= 0) {
      yield buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
    }
  }
}

function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

// ---------------------------------------------------------------------------------------------------------
// Server process: `--serve <driver>`; answers one JSON line per command line on stdin.

async function serve(driver: Driver, tokenCount: number): Promise<void> {
  // Imported here: the module notes at load when SVC_TEST_DATABASE_URL is unset, which only this process sets.
  const { freshDb } = await import("../tests/helpers/db.ts");
  const info = await freshDb(driver);
  // The server's own pool size, not the tests' small one.
  const db: Db = driver === "postgres" ? await openPostgres(info.url, { max: 20 }) : info.db;
  const test = await createTestServer({
    db,
    logLevel: "warn",
    config: {
      server: { address: "127.0.0.1" },
      ca: { keyType: caKeyType },
    },
  });
  const hub = createHub(test.ctx);
  await hub.start();

  const current = new AsyncLocalStorage<Phases>();
  const totals: Phases[] = [];
  const add = (phase: ServerPhase, since: number) => {
    const record = current.getStore();
    if (record) record[phase] += performance.now() - since;
  };
  const timed = async <T>(phase: ServerPhase, fn: () => Promise<T>): Promise<T> => {
    const start = performance.now();
    try {
      return await fn();
    } finally {
      add(phase, start);
    }
  };
  // The handlers read these through `ctx`; the audit recorder keeps the real `db`, so its row joins the unit.
  // Statements inside the unit of work count once, as part of the unit's time.
  const inUnit = new AsyncLocalStorage<boolean>();
  const timedDb: Db = {
    ...db,
    query: (sql, params) =>
      inUnit.getStore() ? db.query(sql, params) : timed("db", () => db.query(sql, params)),
    unitOfWork: (fn) => timed("db", () => db.unitOfWork(() => inUnit.run(true, fn))),
  };
  const ca = test.ctx.ca;
  const ctx: ServerContext = {
    ...test.ctx,
    db: timedDb,
    ca: {
      ...ca,
      async signCsr(csrPem, options) {
        const spki = await timed("csr", () => checkCsr(csrPem));
        return await timed("sign", () => issueClientCert(ca, spki, options));
      },
    },
    audit: { record: (event) => timed("audit", () => test.ctx.audit.record(event)) },
  };
  const handlers = createEnrollmentHandlers(ctx);
  const web = await startWebPort(ctx, {
    fetch: test.fetch,
    enrollment: {
      ...handlers,
      enroll(request, peer) {
        const record: Phases = { handler: 0, csr: 0, sign: 0, db: 0, audit: 0 };
        totals.push(record);
        return current.run(record, () => timed("handler", () => handlers.enroll(request, peer)));
      },
    },
  });
  const group = (await db.transaction((tx) => createNodeGroup(tx, { name: "bench" }))).id;
  const tokens: string[] = [];
  for (let i = 0; i < tokenCount; i++) {
    tokens.push((await createEnrollmentToken(db, group, { createdBy: "bench" })).token);
  }
  const say = (value: unknown) => console.log(JSON.stringify(value));
  say({ port: web.port, caPem: ca.certPem, tokens });

  let cpuStart = cpuMs();
  const lines = linesOf(Deno.stdin.readable);
  for await (const line of lines) {
    if (line === "reset") {
      totals.length = 0;
      cpuStart = cpuMs();
      say({ ok: true });
    } else if (line === "stats") {
      const mean = Object.fromEntries(
        SERVER_PHASES.map((p) => [p, totals.reduce((s, r) => s + r[p], 0) / Math.max(1, totals.length)]),
      );
      say({ calls: totals.length, cpuMs: cpuMs() - cpuStart, mean });
    } else if (line === "stop") {
      break;
    }
  }
  await web.stop();
  await hub.stop();
  await test.close();
  if (db !== info.db) await db.close();
  await info.dispose();
  say({ stopped: true });
}

// ---------------------------------------------------------------------------------------------------------
// Client process.

interface ServerStats {
  calls: number;
  cpuMs: number;
  mean: Phases;
}

async function runDriver(driver: Driver, count: number, concurrency: number): Promise<void> {
  const sequential = Math.max(10, Math.round(count / 10));
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      // `--cpu-prof-dir DIR`: the server process writes a V8 CPU profile there when it ends.
      ...(args["cpu-prof-dir"] ? [`--cpu-prof-dir=${args["cpu-prof-dir"]}`] : []),
      new URL(import.meta.url).pathname,
      "--serve",
      driver,
      "--count",
      `${count + sequential}`,
      "--ca-key-type",
      caKeyType,
    ],
    env: { SVC_TEST_DATABASE_URL: Deno.env.get("SVC_TEST_DATABASE_URL") ?? DEFAULT_DATABASE_URL },
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = linesOf(child.stdout);
  const writer = child.stdin.getWriter();
  const answer = async () => {
    for (;;) {
      const { value, done } = await lines.next();
      if (done) throw new Error("the server process ended early");
      if (value.startsWith("{")) return JSON.parse(value);
    }
  };
  const command = async (line: string) => {
    await writer.write(new TextEncoder().encode(line + "\n"));
    return await answer();
  };
  const ready: { port: number; caPem: string; tokens: string[] } = await answer();
  const target = `localhost:${ready.port}`;
  const credentials = grpc.credentials.createSsl(Buffer.from(ready.caPem));
  const csrs = await Promise.all(
    ready.tokens.map(async (_, i) => (await generateKeyAndCsr(`bench-${driver}-${i}`)).csrPem),
  );

  const pass = async (from: number, n: number, parallel: number) => {
    await command("reset");
    const client = { tls: 0, call: 0 };
    const cpu0 = cpuMs();
    const [pg0, machine0] = await Promise.all([programCpu("postgres"), machineCpu()]);
    const started = performance.now();
    let next = from;
    const worker = async () => {
      while (next < from + n) {
        const i = next++;
        const enrollment = createClient(EnrollmentService, target, {
          credentials,
          // Every agent its own connection, as real agents have.
          channelOptions: { "grpc.use_local_subchannel_pool": 1 },
        });
        try {
          const t0 = performance.now();
          await new Promise<void>((resolve, reject) =>
            enrollment.grpcClient.waitForReady(Date.now() + 60_000, (err) => err ? reject(err) : resolve())
          );
          const t1 = performance.now();
          await enrollment.enroll({ enrollmentToken: ready.tokens[i], csrPem: csrs[i], nodeName: `n${i}` });
          client.tls += t1 - t0;
          client.call += performance.now() - t1;
        } finally {
          enrollment.close();
        }
      }
    };
    await Promise.all(Array.from({ length: parallel }, worker));
    const seconds = (performance.now() - started) / 1000;
    const clientCpu = cpuMs() - cpu0;
    const [pg1, machine1] = await Promise.all([programCpu("postgres"), machineCpu()]);
    // PostgreSQL's processes (all of the machine's, so other users of it count too), and how busy the machine
    // was: when it is near 100%, the rate is bounded by the processors, and the per-enrollment CPU figures
    // say who spends them.
    const pgMs = (pg1 - pg0) * 1000;
    const busy = (machine1.busy - machine0.busy) / Math.max(0.01, machine1.total - machine0.total);
    const server: ServerStats = await command("stats");
    const m = server.mean;
    const f = (x: number) => x.toFixed(1);
    console.log(
      `  ${driver.padEnd(8)} concurrency ${String(parallel).padStart(3)}: ${
        (n / seconds).toFixed(1)
      } enrollments/s ` +
        `(${n} in ${seconds.toFixed(1)} s); CPU per enrollment: server ${f(server.cpuMs / n)} ms, ` +
        `clients ${f(clientCpu / n)} ms` +
        (driver === "postgres" ? `, PostgreSQL ${f(pgMs / n)} ms` : "") +
        `; machine busy ${(busy * 100).toFixed(0)}%`,
    );
    console.log(
      `           mean ms: TLS handshake ${f(client.tls / n)}, Enroll call ${f(client.call / n)} ` +
        `[server handler ${f(m.handler)}: CSR parse/verify ${f(m.csr)}, signing ${f(m.sign)}, ` +
        `DB ${f(m.db - m.csr - m.sign)} (the one transaction: token, node and audit row, the last ${
          f(m.audit)
        })]`,
    );
  };
  try {
    await pass(0, sequential, 1);
    await pass(sequential, count, concurrency);
  } finally {
    await writer.write(new TextEncoder().encode("stop\n"));
    await answer().catch(() => {});
    await writer.close().catch(() => {});
    await child.status;
  }
}

if (args.serve) {
  await serve(args.serve as Driver, Number(args.count));
} else {
  const count = Number(args.count);
  const concurrency = Number(args.concurrency);
  const drivers: Driver[] = args.driver === "both" ? ["pglite", "postgres"] : [args.driver as Driver];
  const load = await Deno.readTextFile("/proc/loadavg").catch(() => "?");
  console.log(`enrollment bench: ${count} agents, concurrency ${concurrency}; load average ${load.trim()}`);
  for (const driver of drivers) await runDriver(driver, count, concurrency);
}
