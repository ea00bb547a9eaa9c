/**
 * Replica processes for end-to-end tests: several real svc-server processes on one PostgreSQL database with
 * one shared CA, started with readiness polled against that CA, and a logged-in REST session (cookie jar and
 * CSRF double submit, as the README tells scripts to do).
 */
import assert from "node:assert/strict";
import { type ServerProcess, startServerProcess } from "./process.ts";
import { CSRF_COOKIE, CSRF_HEADER } from "../../server/http/csrf.ts";

/** Deadline of waits in replica tests: generous, because the suite runs beside browsers on 2 loaded cores. */
export const LOADED_MACHINE_DEADLINE_MS = 120_000;

// deno-lint-ignore no-explicit-any
type Json = any;

/** A logged-in REST session: cookie jar plus the CSRF double submit, as the README tells scripts to do. */
export interface Rest {
  /** The status and parsed body, whatever the status. */
  request(method: string, path: string, body?: unknown): Promise<{ status: number; json: Json }>;
  /** The parsed body of a 2xx answer; throws with the body otherwise. */
  call(method: string, path: string, body?: unknown): Promise<Json>;
  close(): void;
}

export async function login(server: ServerProcess, caPem: string, password: string): Promise<Rest> {
  const client = Deno.createHttpClient({ caCerts: [caPem] });
  const jar = new Map<string, string>();
  const request = async (method: string, path: string, body?: unknown) => {
    const headers = new Headers();
    if (jar.size > 0) headers.set("cookie", [...jar].map(([k, v]) => `${k}=${v}`).join("; "));
    const csrf = jar.get(CSRF_COOKIE);
    if (csrf && method !== "GET") headers.set(CSRF_HEADER, csrf);
    if (body !== undefined) headers.set("content-type", "application/json");
    const res = await fetch(`${server.baseUrl}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      client,
      signal: AbortSignal.timeout(LOADED_MACHINE_DEADLINE_MS),
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const eq = pair.indexOf("=");
      jar.set(pair.slice(0, eq).trim(), decodeURIComponent(pair.slice(eq + 1).trim()));
    }
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  };
  const call = async (method: string, path: string, body?: unknown): Promise<Json> => {
    const res = await request(method, path, body);
    if (res.status < 200 || res.status > 299) {
      throw new Error(`${method} ${path} → ${res.status}: ${JSON.stringify(res.json)}`);
    }
    return res.json;
  };
  try {
    await call("POST", "/api/v1/auth/login", { username: "admin", password });
  } catch (err) {
    client.close();
    throw err;
  }
  assert.ok(jar.get(CSRF_COOKIE), "login sets the CSRF cookie");
  return { request, call, close: () => client.close() };
}

/** The line svc-server prints before exiting when it cannot start. */
const FATAL = "svc-server: cannot start:";

/**
 * Starts one replica. The process helper's readiness probe trusts `{data_dir}/pki/ca/ca.crt`, which a replica
 * given ca.cert_file never writes, so readiness is polled here with the shared CA instead. `freePort()` only
 * reserves a port until it returns, so a parallel test can take it first: on EADDRINUSE the replica starts
 * again on fresh ports, in the same data dir (which may already hold the initial admin password).
 */
export async function startReplica(
  name: string,
  options: { caPem: string; config: Record<string, Record<string, unknown>> },
): Promise<ServerProcess> {
  const client = Deno.createHttpClient({ caCerts: [options.caPem] });
  let dataDir: string | undefined;
  try {
    for (let attempt = 1;; attempt++) {
      const proc = await startServerProcess({ config: options.config, dataDir, wait: false });
      dataDir = proc.dataDir;
      const state = await waitUntil(async () => {
        if (proc.output().includes(FATAL)) return "failed";
        try {
          const res = await fetch(`${proc.baseUrl}/api/v1/version`, {
            client,
            // Per attempt; waitUntil retries. Short attempts on a loaded machine would never succeed.
            signal: AbortSignal.timeout(10_000),
          });
          await res.body?.cancel();
          return res.ok ? "ready" : undefined;
        } catch {
          return undefined;
        }
      }, 30_000);
      if (state === "ready") return proc;
      await proc.stop("SIGKILL");
      if (state === "failed" && proc.output().includes("EADDRINUSE") && attempt < 3) continue;
      throw new Error(
        `replica ${name} did not start (${state ?? "no answer within 30 s"}):\n${proc.output()}`,
      );
    }
  } catch (err) {
    if (dataDir) await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    throw err;
  } finally {
    client.close();
  }
}

/** Polls `check` every 100 ms until it returns a value; undefined when `timeoutMs` passes first. */
export async function waitUntil<T>(
  check: () => Promise<T | undefined>,
  timeoutMs: number,
): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  return undefined;
}
