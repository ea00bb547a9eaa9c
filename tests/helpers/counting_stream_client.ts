/**
 * The policy stream that only counts messages (tests/helpers/stall.ts), and its own process: run as a
 * program, it reads the server's port and the agent's PEMs as JSON on stdin, opens `SubscribePolicyUpdates`
 * and writes one line per message received, so that receiving a large message (TLS, HTTP/2 frames,
 * reassembly) does not run on the measured server's thread, as it does not for a real agent.
 */
import * as grpc from "@grpc/grpc-js";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  PolicyService,
  SubscribePolicyUpdatesRequestSchema,
} from "../../shared/gen/svc/policy/v1/policy_pb.ts";

/** Where the stream goes and as whom. */
export interface StreamTarget {
  port: number;
  caPem: string;
  keyPem: string;
  certPem: string;
}

/** Opens `SubscribePolicyUpdates` from revision 0 (a full snapshot first); messages stay undecoded. */
export function openSubscribeCall(
  target: StreamTarget,
): { call: grpc.ClientReadableStream<Buffer>; close(): void } {
  const client = new grpc.Client(
    `localhost:${target.port}`,
    grpc.credentials.createSsl(
      Buffer.from(target.caPem),
      Buffer.from(target.keyPem),
      Buffer.from(target.certPem),
    ),
    { "grpc.max_receive_message_length": -1 },
  );
  const method = PolicyService.method.subscribePolicyUpdates;
  const call = client.makeServerStreamRequest(
    `/${PolicyService.typeName}/${method.name}`,
    (request: Uint8Array) => Buffer.from(request),
    (bytes: Buffer) => bytes,
    toBinary(SubscribePolicyUpdatesRequestSchema, create(SubscribePolicyUpdatesRequestSchema)),
  );
  return {
    call,
    close() {
      call.cancel();
      client.close();
    },
  };
}

if (import.meta.main) {
  const target: StreamTarget = JSON.parse(await new Response(Deno.stdin.readable).text());
  const { call } = openSubscribeCall(target);
  const line = new TextEncoder().encode("message\n");
  call.on("data", () => Deno.stdout.writeSync(line));
  call.on("error", (err: Error) => {
    console.error(err.message);
    Deno.exit(1);
  });
  call.on("end", () => Deno.exit(0));
}
