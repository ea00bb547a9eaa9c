/**
 * The ceiling the fan-out and stream-memory benchmarks compare svc with: a bare grpc-js server with the policy
 * port's TLS and limits, holding every subscription open and writing pre-encoded bytes to it, without svc's
 * hub, database or encoding. Shared by bench/fanout.ts and bench/stream_memory.ts so both measure the same
 * server.
 */
import * as grpc from "@grpc/grpc-js";
import { ensureInternalServerCert, loadOrCreateCa } from "../server/pki/mod.ts";
import { GRPC_LIMITS } from "../server/grpc/policy_server.ts";
import { PolicyPortCredentials } from "../server/grpc/tls_credentials.ts";
import {
  createServiceDefinition,
  createServiceImplementation,
  GrpcError,
  type ServiceHandlers,
} from "../shared/grpc/adapter.ts";
import { PolicyService } from "../shared/gen/svc/policy/v1/policy_pb.ts";
import { generateKeyAndCsr } from "../shared/pki/csr.ts";
import type { Command } from "./sim_agents.ts";

/** A subscription the bare server holds open. */
export interface BareCall {
  write(bytes: Uint8Array): void;
}

/** A started bare server: its open subscriptions, the worker command that connects to it, and its end. */
export interface BarePolicyServer {
  /** Every subscription received so far, in order. */
  calls: BareCall[];
  /** The `raw` command for a worker (bench/sim_agents.ts) that opens `count` subscriptions to this server. */
  rawCommand(count: number): Command;
  stop(): Promise<void>;
}

/**
 * Starts a bare server on a loopback port with a fresh CA in a temp directory named by `prefix`; each
 * subscription is answered with `first` at once and then held until the client cancels it.
 */
export async function startBarePolicyServer(prefix: string, first: Uint8Array): Promise<BarePolicyServer> {
  const dir = await Deno.makeTempDir({ prefix });
  const ca = await loadOrCreateCa({ dataDir: dir });
  const serverCert = await ensureInternalServerCert(ca, { dataDir: dir, hostnames: [] });
  const pair = await generateKeyAndCsr("raw");
  const clientCert = await ca.signCsr(pair.csrPem, { commonName: "raw" });
  const calls: BareCall[] = [];
  const refuse = () => Promise.reject(new GrpcError(grpc.status.UNIMPLEMENTED, "not part of the benchmark"));
  const handlers: Record<string, unknown> = {};
  for (const m of PolicyService.methods) handlers[m.localName] = refuse;
  handlers.subscribePolicyUpdates = (
    _req: unknown,
    call: BareCall & { on(event: "cancelled", f: () => void): void },
  ) =>
    new Promise<void>((resolve) => {
      calls.push(call);
      call.write(first);
      call.on("cancelled", () => resolve());
    });
  const server = new grpc.Server({
    "grpc.max_concurrent_streams": GRPC_LIMITS.maxConcurrentStreams,
    "grpc.max_send_message_length": GRPC_LIMITS.maxMessageBytes,
    "grpc.enable_channelz": 0,
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
  return {
    calls,
    rawCommand: (count) => ({
      cmd: "raw",
      target: `localhost:${port}`,
      caPem: ca.certPem,
      certPem: clientCert.certPem,
      keyPem: pair.keyPem,
      count,
    }),
    async stop() {
      server.forceShutdown();
      await Deno.remove(dir, { recursive: true });
    },
  };
}
