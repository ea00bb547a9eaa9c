/**
 * The metrics listener: `GET /metrics` on `metrics.listen_addr`, with an optional bearer token and optional TLS.
 *
 * It is always started, and it never stops the server: a listener that cannot bind (or cannot read its TLS
 * files) logs a `metrics: …` line and resolves with `addr: null`. Each scrape computes the database gauges
 * afresh (see collector.ts) and adds the process-lifetime instruments (counters.ts) and runtime families
 * (runtime.ts).
 *
 * @module
 */
import type { ServerContext } from "../context.ts";
import { metricsRegistry } from "./counters.ts";
import { collectDatabaseFamilies } from "./collector.ts";
import { familiesFromRegistry, type MetricFamily, negotiate, renderStream } from "./exposition.ts";
import { runtimeFamilies, startRuntimeSampler } from "./runtime.ts";
import { mergeWorkerFamilies, type WorkerFamilies } from "./workers.ts";

/** A running (or failed) metrics listener. */
export interface MetricsListener {
  /** `host:port` actually bound (IPv6 in brackets), or null when the listener could not start. */
  addr: string | null;
  /** Stops accepting connections and waits for in-flight scrapes; safe to call more than once. */
  stop(): Promise<void>;
}

const COMMON_HEADERS = { "cache-control": "no-store", "x-content-type-options": "nosniff" };

function textResponse(status: number, body: string, headers: Record<string, string> = {}): Response {
  return new Response(body, {
    status,
    headers: { ...COMMON_HEADERS, "content-type": "text/plain; charset=utf-8", ...headers },
  });
}

/** Splits `host:port`, `[v6]:port` or `:port` (all interfaces). */
function parseListenAddr(addr: string): { hostname: string; port: number } {
  const colon = addr.lastIndexOf(":");
  const port = Number(addr.slice(colon + 1));
  if (colon < 0 || !Number.isInteger(port) || port < 0 || port > 65535 || addr.slice(colon + 1) === "") {
    throw new Error(`"${addr}" is not host:port (for example 127.0.0.1:9090)`);
  }
  const host = addr.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
  return { hostname: host === "" ? "0.0.0.0" : host, port };
}

function formatAddr(addr: Deno.NetAddr): string {
  return addr.hostname.includes(":") ? `[${addr.hostname}]:${addr.port}` : `${addr.hostname}:${addr.port}`;
}

async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
}

/**
 * Compares the presented token with the configured one in constant time: both are hashed first, so the
 * comparison always covers 32 bytes whatever the lengths, and every byte is examined.
 */
async function tokenMatches(presented: string, expectedDigest: Uint8Array): Promise<boolean> {
  const digest = await sha256(presented);
  let diff = 0;
  for (let i = 0; i < digest.length; i++) diff |= digest[i] ^ expectedDigest[i];
  return diff === 0;
}

/** True when `Accept-Encoding` admits gzip with a non-zero quality (an explicit `gzip` entry beats `*`). */
function acceptsGzip(header: string | null): boolean {
  const quality = new Map<string, number>();
  for (const part of (header ?? "").split(",")) {
    const [coding, ...params] = part.split(";").map((x) => x.trim().toLowerCase());
    const q = params.find((p) => p.startsWith("q="));
    quality.set(coding, q === undefined ? 1 : Number(q.slice(2)));
  }
  return (quality.get("gzip") ?? quality.get("*") ?? 0) > 0;
}

/** Options of {@link startMetricsListener}. */
export interface MetricsListenerOptions {
  /** The policy workers' instruments, when workers serve the policy port (merged by `workers.ts`). */
  workers?: () => Promise<WorkerFamilies[]>;
}

/** Starts the metrics listener described by `ctx.config.metrics`. Never rejects. */
export async function startMetricsListener(
  ctx: ServerContext,
  options: MetricsListenerOptions = {},
): Promise<MetricsListener> {
  const { listenAddr, bearerToken, tlsCertFile, tlsKeyFile } = ctx.config.metrics;
  const log = ctx.log;
  const failed: MetricsListener = { addr: null, stop: () => Promise.resolve() };

  let tls: { cert: string; key: string } | undefined;
  if (tlsCertFile !== "" || tlsKeyFile !== "") {
    try {
      tls = { cert: await Deno.readTextFile(tlsCertFile), key: await Deno.readTextFile(tlsKeyFile) };
    } catch (err) {
      log.error(
        `metrics: cannot listen on ${listenAddr}: cannot read metrics.tls_cert_file or metrics.tls_key_file ` +
          `(check the paths and that svc-server may read them); continuing without metrics`,
        { error: err instanceof Error ? err.message : String(err) },
      );
      return failed;
    }
  }
  const tokenDigest = bearerToken === "" ? undefined : await sha256(bearerToken);

  // Scrapes arriving while the database queries of another are running share its result.
  let dbInFlight: Promise<MetricFamily[]> | undefined;
  const databaseFamilies = () => {
    dbInFlight ??= collectDatabaseFamilies(ctx.db, log).finally(() => dbInFlight = undefined);
    return dbInFlight;
  };

  async function handle(req: Request): Promise<Response> {
    if (tokenDigest) {
      const header = req.headers.get("authorization") ?? "";
      const scheme = /^bearer[ \t]+/i.exec(header);
      if (!scheme || !(await tokenMatches(header.slice(scheme[0].length), tokenDigest))) {
        const challenge = header === ""
          ? 'Bearer realm="svc-metrics"'
          : 'Bearer realm="svc-metrics", error="invalid_token"';
        return textResponse(401, "Unauthorized\n", { "www-authenticate": challenge });
      }
    }
    const path = new URL(req.url).pathname;
    if (path !== "/" && path !== "/metrics") return textResponse(404, "Not Found\n");
    if (req.method !== "GET" && req.method !== "HEAD") {
      return textResponse(405, "Method Not Allowed\n", { allow: "GET, HEAD" });
    }
    if (path === "/") {
      return new Response(null, { status: 302, headers: { ...COMMON_HEADERS, location: "/metrics" } });
    }
    const { format, contentType } = negotiate(req.headers.get("accept"));
    const headers = { ...COMMON_HEADERS, "content-type": contentType, vary: "Accept, Accept-Encoding" };
    if (req.method === "HEAD") return new Response(null, { headers });
    const [database, counters, runtime, workers] = await Promise.all([
      databaseFamilies(),
      familiesFromRegistry(metricsRegistry, log),
      runtimeFamilies(log),
      options.workers?.(),
    ]);
    const own = [...database, ...counters, ...runtime];
    // Rendered a chunk at a time as the response is sent, so a fleet-sized scrape never holds the loop.
    const body = renderStream(workers ? mergeWorkerFamilies(own, workers) : own, format);
    // A fleet adds two series per node, so large scrapes are worth compressing (Prometheus asks for gzip).
    if (acceptsGzip(req.headers.get("accept-encoding"))) {
      // (CompressionStream is typed for any BufferSource; it takes the byte chunks as they are.)
      const gzip = new CompressionStream("gzip") as unknown as TransformStream<Uint8Array, Uint8Array>;
      return new Response(body.pipeThrough(gzip), {
        headers: { ...headers, "content-encoding": "gzip" },
      });
    }
    return new Response(body, { headers });
  }

  let server: Deno.HttpServer<Deno.NetAddr>;
  try {
    const { hostname, port } = parseListenAddr(listenAddr);
    server = Deno.serve({
      hostname,
      port,
      ...tls,
      onListen: () => {},
      onError(err) {
        log.error("metrics: request failed", { error: err instanceof Error ? err.message : String(err) });
        return textResponse(500, "Internal Server Error\n");
      },
    }, handle);
  } catch (err) {
    log.error(`metrics: cannot listen on ${listenAddr}; continuing without metrics`, {
      error: err instanceof Error ? err.message : String(err),
    });
    return failed;
  }

  const releaseSampler = startRuntimeSampler();
  const addr = formatAddr(server.addr);
  log.info(`metrics: listening on ${tls ? "https" : "http"}://${addr}/metrics`, {
    bearer_token: tokenDigest ? "required" : "none",
  });
  let stopping: Promise<void> | undefined;
  return {
    addr,
    stop() {
      stopping ??= server.shutdown().finally(releaseSampler);
      return stopping;
    },
  };
}
