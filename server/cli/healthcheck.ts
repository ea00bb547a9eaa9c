/**
 * `svc-server healthcheck`: the probe a container runtime, compose file or load balancer runs inside the
 * server's own environment. It asks the web port for `/api/v1/version` over TLS and succeeds only when the
 * server answers 200 with a version, so an image needs no curl or shell to be health-checked.
 *
 * The server's certificate is verified, not ignored: the probe trusts the internal CA the server writes to
 * `{data_dir}/pki/ca/ca.crt` (or `ca.cert_file`) besides the system store, so a different process that
 * took the port with another certificate is reported unhealthy rather than believed.
 *
 * @module
 */
import { join } from "node:path";
import type { ServerConfig } from "../config/config.ts";

/** How long one probe waits for the answer; a runtime's own timeout may be shorter. */
export const HEALTHCHECK_TIMEOUT_MS = 10_000;

/** The URL the probe asks: the configured interface (loopback when it binds all) and the web port. */
export function healthcheckUrl(config: ServerConfig): string {
  const address = config.server.address;
  const wildcard = address === "" || address === "0.0.0.0" || address === "::";
  const host = wildcard ? "127.0.0.1" : address.includes(":") ? `[${address}]` : address;
  return `https://${host}:${config.server.enrollmentPort}/api/v1/version`;
}

/** The CA file the probe trusts besides the system store. */
export function healthcheckCaFile(config: ServerConfig): string {
  return config.ca.certFile || join(config.server.dataDir, "pki", "ca", "ca.crt");
}

/** Outcome of one probe: healthy with the version it answered, or why not. */
export type HealthResult = { healthy: true; version: string } | { healthy: false; reason: string };

/** Probes `url`, trusting the CA certificates in `caFile` (when readable) and the system store. */
export async function probeHealth(url: string, options: { caFile: string }): Promise<HealthResult> {
  const caCerts: string[] = [];
  try {
    caCerts.push(await Deno.readTextFile(options.caFile));
  } catch (err) {
    // An operator's public certificate needs no CA file; the system store still applies.
    if (!(err instanceof Deno.errors.NotFound)) {
      return { healthy: false, reason: `cannot read the CA certificate ${options.caFile}: ${err}` };
    }
  }
  const client = Deno.createHttpClient({ caCerts });
  try {
    const res = await fetch(url, { client, signal: AbortSignal.timeout(HEALTHCHECK_TIMEOUT_MS) });
    const text = await res.text();
    if (res.status !== 200) return { healthy: false, reason: `${url} answered HTTP ${res.status}` };
    let version: unknown;
    try {
      version = (JSON.parse(text) as { version?: unknown }).version;
    } catch {
      version = undefined;
    }
    if (typeof version !== "string" || version === "") {
      return { healthy: false, reason: `${url} answered without a version: is this an svc server?` };
    }
    return { healthy: true, version };
  } catch (err) {
    // fetch reports "fetch failed"; the refused connection or the certificate error is its cause.
    const cause = (err as Error).cause;
    const message = (err as Error).name === "TimeoutError"
      ? `no answer within ${HEALTHCHECK_TIMEOUT_MS / 1000} s`
      : cause instanceof Error
      ? `${(err as Error).message}: ${cause.message}`
      : (err as Error).message;
    return { healthy: false, reason: `${url}: ${message}` };
  } finally {
    client.close();
  }
}
