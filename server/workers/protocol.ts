/**
 * The channel between svc-server and its policy workers: JSON lines. The supervisor writes to a worker's
 * stdin (the bootstrap first, then requests); the worker answers on its stdout and logs on its stderr. A
 * worker whose stdin reaches end-of-file has lost its supervisor and exits at once, as the server it belonged
 * to did, so a killed server never leaves workers behind.
 *
 * @module
 */
import type { ServerConfig } from "../config/config.ts";
import type { HubOptions } from "../hub/hub.ts";
import type { MetricFamily } from "../metrics/exposition.ts";

/** The hidden subcommand that runs `server/main.ts` as a policy worker. */
export const POLICY_WORKER_COMMAND = "__policy-worker";

/** First line a worker reads: everything it needs to serve the policy port. */
export interface WorkerBootstrap {
  /** 1-based index, stable across restarts (log field and metrics label `worker`). */
  index: number;
  /** Replica id of this worker process (a restart gets a new one). */
  replicaId: string;
  /** The port to share; 0 for the first worker when `server.policy_port` is 0. */
  port: number;
  config: ServerConfig;
  hub?: HubOptions;
}

/** Supervisor → worker. */
export type SupervisorMessage =
  | { type: "metrics"; id: number }
  | { type: "ping"; id: number }
  | { type: "stop" };

/** Worker → supervisor. */
export type WorkerMessage =
  | { type: "ready"; port: number }
  | { type: "metrics"; id: number; families: MetricFamily[] }
  | { type: "pong"; id: number };

/** Splits a byte stream into lines (without the newline). */
export async function* readLines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  let buffered = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    buffered += chunk;
    let newline: number;
    while ((newline = buffered.indexOf("\n")) >= 0) {
      yield buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
    }
  }
  if (buffered !== "") yield buffered;
}

/** Writes JSON lines to a stream, one at a time and in order. */
export function lineWriter(stream: WritableStream<Uint8Array>): {
  send(message: unknown): Promise<void>;
  close(): Promise<void>;
} {
  const writer = stream.getWriter();
  const encoder = new TextEncoder();
  let chain = Promise.resolve();
  return {
    send(message) {
      chain = chain.then(() => writer.write(encoder.encode(JSON.stringify(message) + "\n")));
      return chain;
    },
    async close() {
      await chain.catch(() => {});
      await writer.close().catch(() => {});
    },
  };
}
