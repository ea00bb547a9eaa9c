/**
 * Syslog sink: RFC 5424 messages carrying CEF or OCSF over UDP, TCP or TCP+TLS. Over TCP the messages are
 * octet-counted (RFC 6587 §3.4.1, as RFC 5425 requires for TLS), so a message can never be split or merged
 * by a stray newline. Sending is asynchronous through a bounded queue: a slow or absent collector delays
 * nothing and, when the queue is full, the oldest events are dropped and counted in the log.
 */
import dgram from "node:dgram";
import { hostname } from "node:os";
import type { Logger } from "../core/log.ts";
import type { ServerConfig } from "../config/config.ts";
import type { StoredAuditEvent } from "./db_sink.ts";
import { formatCef } from "./cef.ts";
import { formatOcsf } from "./ocsf.ts";
import { severityOf, SYSLOG_SEVERITY } from "./severity.ts";

/** A running syslog sink. */
export interface SyslogSink {
  /** Queues an event (never blocks, never throws). */
  send(event: StoredAuditEvent): void;
  /** Sends what is queued (bounded wait) and closes the connection. */
  close(): Promise<void>;
}

/** Options of {@link createSyslogSink}. */
export interface SyslogSinkOptions {
  config: ServerConfig["audit"]["syslog"];
  log: Logger;
  version: string;
  /** Queue bound (default 1000). */
  maxQueue?: number;
}

const APP_NAME = "svc-server";
const WRITE_TIMEOUT_MS = 5000;

/** Formats one RFC 5424 message (without framing). */
export function formatSyslogMessage(
  event: StoredAuditEvent,
  options: { format: string; facility: number; version: string; host?: string },
): string {
  const pri = options.facility * 8 + SYSLOG_SEVERITY[severityOf(event)];
  const body = options.format === "ocsf"
    ? formatOcsf(event, options.version)
    : formatCef(event, options.version);
  const host = sanitizeHeader(options.host ?? hostname(), 255);
  return `<${pri}>1 ${event.createdAt.toISOString()} ${host} ${APP_NAME} ${Deno.pid} audit - ${body}`;
}

/** RFC 5424 header fields are printable US-ASCII without spaces; `-` stands for "none". */
function sanitizeHeader(s: string, max: number): string {
  const clean = s.replace(/[^\x21-\x7e]/g, "").slice(0, max);
  return clean === "" ? "-" : clean;
}

/** Starts the sink; connection problems are logged and retried on the next event, never thrown. */
export function createSyslogSink(options: SyslogSinkOptions): SyslogSink {
  const { config, log } = options;
  const maxQueue = options.maxQueue ?? 1000;
  const { host, port } = splitHostPort(config.addr);
  const localHost = hostname();
  const queue: string[] = [];
  let dropped = 0;
  let draining: Promise<void> | undefined;
  let closed = false;
  let transport: Transport | undefined;

  const connect = async (): Promise<Transport> => {
    if (config.network === "udp") return await udpTransport(host, port);
    const caCerts = config.tlsCaFile ? [await Deno.readTextFile(config.tlsCaFile)] : undefined;
    return await streamTransport(config.network === "tcp+tls" ? "tls" : "tcp", { host, port, caCerts });
  };

  const drain = async () => {
    while (queue.length > 0) {
      const message = queue[0];
      try {
        transport ??= await connect();
        await withTimeout(transport.write(message), WRITE_TIMEOUT_MS);
        queue.shift();
      } catch (err) {
        transport?.close();
        transport = undefined;
        // One reconnect per message: a collector that is down must not pin the queue forever.
        try {
          transport = await connect();
          await withTimeout(transport.write(message), WRITE_TIMEOUT_MS);
        } catch (retryErr) {
          transport?.close();
          transport = undefined;
          log.warn("audit: syslog delivery failed; event dropped", {
            addr: config.addr,
            network: config.network,
            error: String(retryErr ?? err),
          });
        }
        queue.shift();
      }
    }
  };

  const kick = () => {
    draining ??= drain().finally(() => {
      draining = undefined;
      if (queue.length > 0 && !closed) kick();
    });
  };

  return {
    send(event) {
      if (closed) return;
      queue.push(
        formatSyslogMessage(event, {
          format: config.format,
          facility: config.facility,
          version: options.version,
          host: localHost,
        }),
      );
      if (queue.length > maxQueue) {
        queue.shift();
        dropped++;
        if (dropped === 1 || dropped % 100 === 0) {
          log.warn("audit: syslog queue full; oldest events dropped", { dropped, addr: config.addr });
        }
      }
      kick();
    },
    async close() {
      closed = true;
      if (draining) await withTimeout(draining, WRITE_TIMEOUT_MS).catch(() => {});
      transport?.close();
      transport = undefined;
    },
  };
}

interface Transport {
  write(message: string): Promise<void>;
  close(): void;
}

async function udpTransport(host: string, port: number): Promise<Transport> {
  const socket = dgram.createSocket(host.includes(":") ? "udp6" : "udp4");
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.connect(port, host, () => {
      socket.off("error", reject);
      resolve();
    });
  });
  socket.on("error", () => {});
  return {
    write: (message) =>
      new Promise<void>((resolve, reject) => {
        socket.send(new TextEncoder().encode(message), (err) => err ? reject(err) : resolve());
      }),
    close: () => {
      try {
        socket.close();
      } catch {
        // already closed
      }
    },
  };
}

async function streamTransport(
  kind: "tcp" | "tls",
  options: { host: string; port: number; caCerts?: string[] },
): Promise<Transport> {
  const conn = kind === "tls"
    ? await Deno.connectTls({ hostname: options.host, port: options.port, caCerts: options.caCerts })
    : await Deno.connect({ hostname: options.host, port: options.port });
  if (kind === "tls") await (conn as Deno.TlsConn).handshake();
  // A collector never sends anything; a read that ends means it closed the connection. Without this, the
  // first message after a collector restart would be written into the dead socket and lost.
  let closed = false;
  (async () => {
    const sink = new Uint8Array(256);
    try {
      while ((await conn.read(sink)) !== null) { /* discard */ }
    } catch {
      // reset by peer
    }
    closed = true;
  })();
  return {
    async write(message) {
      if (closed) throw new Error("the collector closed the connection");
      const body = new TextEncoder().encode(message);
      const frame = new Uint8Array([...new TextEncoder().encode(`${body.length} `), ...body]);
      let written = 0;
      while (written < frame.length) written += await conn.write(frame.subarray(written));
    },
    close: () => {
      try {
        conn.close();
      } catch {
        // already closed
      }
    },
  };
}

function splitHostPort(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(":");
  const host = addr.slice(0, i).replace(/^\[|\]$/g, "") || "localhost";
  return { host, port: Number(addr.slice(i + 1)) };
}

async function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
