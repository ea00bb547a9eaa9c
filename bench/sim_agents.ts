/**
 * Simulated agents for the benchmarks (bench/fanout.ts, bench/replica_set.ts, bench/stream_memory.ts): a client
 * process enrolls N agents through the enrollment service and keeps one mTLS policy stream (one TLS connection)
 * open per agent, and reports when each receives a complete snapshot after being armed. The coordinator drives
 * such processes over stdin/stdout (one JSON object per line). `raw` streams one certificate many times against
 * a bare server, for the transport's ceiling.
 */
import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import { GRPC_LIMITS } from "../server/grpc/policy_server.ts";
import { createClient, GrpcError, type ServerStream } from "../shared/grpc/adapter.ts";
import { EnrollmentService } from "../shared/gen/svc/enrollment/v1/enrollment_pb.ts";
import { PolicyService, type PolicyUpdate } from "../shared/gen/svc/policy/v1/policy_pb.ts";
import { generateKeyAndCsr } from "../shared/pki/csr.ts";

// --- client side: simulated agents in a process of their own ----------------------------------------------

/** Messages from the coordinator to a worker (one JSON object per line on stdin). */
export type Command =
  | {
    cmd: "agents";
    webTarget: string;
    /** Agent i streams from policyTargets[i % length] (replicas); enrollment goes to webTarget. */
    policyTargets: string[];
    caPem: string;
    tokens: string[];
    prefix: string;
  }
  | { cmd: "raw"; target: string; caPem: string; certPem: string; keyPem: string; count: number }
  | { cmd: "arm" }
  | { cmd: "close" };

/** Messages from a worker (one JSON object per line on stdout). */
export type Report =
  | { event: "ready"; streams: number; enrollMs: number }
  | { event: "armed" }
  | { event: "arrivals"; times: number[] }
  | { event: "error"; message: string };

export const now = () => performance.timeOrigin + performance.now();

/** Streams a client process opens at once before waiting for their initial snapshots. */
const CONNECT_WAVE = 250;

/** Reads the text of `stream` one line at a time; throws `endMessage` when it ends before the next line. */
function lineReader(stream: ReadableStream<Uint8Array>, endMessage: string): () => Promise<string> {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  return async () => {
    while (!buffered.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(endMessage);
      buffered += value;
    }
    const i = buffered.indexOf("\n");
    const line = buffered.slice(0, i);
    buffered = buffered.slice(i + 1);
    return line;
  };
}

/** The client process: reads commands on stdin, reports on stdout. */
async function worker(): Promise<void> {
  const nextLine = lineReader(Deno.stdin.readable, "coordinator went away");
  const out = (r: Report) => console.log(JSON.stringify(r));
  const next = async (): Promise<Command> => JSON.parse(await nextLine());

  let streams: ServerStream<PolicyUpdate>[] = [];
  let closers: (() => void)[] = [];
  /** Per stream: resolves the next snapshot_complete after the worker was armed. */
  let armed = false;
  let arrivals: number[] = [];
  let pending = 0;
  let reportWhenDone = () => {};

  const watch = (stream: ServerStream<PolicyUpdate>, initial: () => void) => {
    let first = true;
    (async () => {
      try {
        for await (const m of stream) {
          if (!m.snapshotComplete) continue;
          if (first) {
            first = false;
            initial();
          } else if (armed) {
            arrivals.push(now());
            if (--pending === 0) reportWhenDone();
          }
        }
      } catch (err) {
        if (!(err instanceof GrpcError && err.code === grpc.status.CANCELLED)) {
          out({ event: "error", message: String(err) });
        }
      }
    })();
  };

  while (true) {
    const command = await next();
    if (command.cmd === "agents") {
      const started = now();
      const ca = Buffer.from(command.caPem);
      const enrollment = createClient(EnrollmentService, command.webTarget, {
        credentials: grpc.credentials.createSsl(ca),
      });
      const certs: { certPem: string; keyPem: string }[] = [];
      let index = 0;
      const enrollOne = async () => {
        while (index < command.tokens.length) {
          const i = index++;
          const name = `${command.prefix}-${i}`;
          const { keyPem, csrPem } = await generateKeyAndCsr(name);
          const res = await enrollment.enroll({ enrollmentToken: command.tokens[i], csrPem, nodeName: name });
          certs[i] = { certPem: res.signedCertPem, keyPem };
        }
      };
      await Promise.all(Array.from({ length: 16 }, enrollOne));
      enrollment.close();
      const enrollMs = now() - started;
      // Connect in waves, as a fleet coming back does over its backoff: thousands of TLS handshakes at once on
      // a loaded machine outlast the client's connect timeout, which measures the burst, not the fan-out.
      for (let start = 0; start < certs.length; start += CONNECT_WAVE) {
        const wave = certs.slice(start, start + CONNECT_WAVE);
        let ready = 0;
        await new Promise<void>((resolve) => {
          for (const [k, cert] of wave.entries()) {
            const target = command.policyTargets[(start + k) % command.policyTargets.length];
            const client = createClient(PolicyService, target, {
              credentials: grpc.credentials.createSsl(
                ca,
                Buffer.from(cert.keyPem),
                Buffer.from(cert.certPem),
              ),
              channelOptions: { "grpc.max_receive_message_length": GRPC_LIMITS.maxMessageBytes },
            });
            const stream = client.subscribePolicyUpdates({ clientId: "", lastKnownRevision: 0n });
            streams.push(stream);
            closers.push(() => client.close());
            watch(stream, () => {
              if (++ready === wave.length) resolve();
            });
          }
        });
      }
      out({ event: "ready", streams: streams.length, enrollMs });
    } else if (command.cmd === "raw") {
      const credentials = grpc.credentials.createSsl(
        Buffer.from(command.caPem),
        Buffer.from(command.keyPem),
        Buffer.from(command.certPem),
      );
      for (let start = 0; start < command.count; start += CONNECT_WAVE) {
        const size = Math.min(CONNECT_WAVE, command.count - start);
        let ready = 0;
        await new Promise<void>((resolve) => {
          for (let i = 0; i < size; i++) {
            // A local subchannel pool gives every stream its own connection, like the real agents.
            const client = createClient(PolicyService, command.target, {
              credentials,
              channelOptions: {
                "grpc.use_local_subchannel_pool": 1,
                "grpc.max_receive_message_length": GRPC_LIMITS.maxMessageBytes,
              },
            });
            const stream = client.subscribePolicyUpdates({ clientId: "", lastKnownRevision: 0n });
            streams.push(stream);
            closers.push(() => client.close());
            watch(stream, () => {
              if (++ready === size) resolve();
            });
          }
        });
      }
      out({ event: "ready", streams: command.count, enrollMs: 0 });
    } else if (command.cmd === "arm") {
      arrivals = [];
      pending = streams.length;
      reportWhenDone = () => out({ event: "arrivals", times: arrivals });
      armed = true;
      out({ event: "armed" });
    } else {
      for (const s of streams) s.cancel();
      for (const c of closers) c();
      streams = [];
      closers = [];
      armed = false;
      if (command.cmd === "close") return;
    }
  }
}

// --- coordinator side: a handle on one such process ------------------------------------------------------

export interface WorkerHandle {
  send(c: Command): Promise<void>;
  next(): Promise<Report>;
  kill(): void;
}

export function spawnWorker(): WorkerHandle {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL(import.meta.url).pathname],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const writer = child.stdin.getWriter();
  const nextLine = lineReader(child.stdout, "a worker exited");
  return {
    send: (c) => writer.write(new TextEncoder().encode(JSON.stringify(c) + "\n")),
    async next() {
      while (true) {
        const line = await nextLine();
        if (!line.startsWith("{")) continue;
        const report = JSON.parse(line) as Report;
        if (report.event === "error") throw new Error(`worker: ${report.message}`);
        return report;
      }
    },
    kill() {
      try {
        child.kill("SIGKILL");
      } catch { /* already gone */ }
    },
  };
}

export async function expect<E extends Report["event"]>(
  w: WorkerHandle,
  event: E,
): Promise<Extract<Report, { event: E }>> {
  const r = await w.next();
  if (r.event !== event) throw new Error(`expected ${event} from a worker, got ${r.event}`);
  return r as Extract<Report, { event: E }>;
}

if (import.meta.main) {
  await worker();
  Deno.exit(0);
}
