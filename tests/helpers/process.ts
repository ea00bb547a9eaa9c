/**
 * Runs svc-server as a real process for end-to-end tests: free ports, a temp data dir, a YAML config,
 * readiness by polling `/api/v1/version`, and a `stop()` that always kills it.
 */
import { stringify } from "yaml";
import { spawnDeno } from "./command.ts";

/** A free TCP port on 127.0.0.1 (bound then released). */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/**
 * Settings of an in-process test server on this machine: `dataDir`, free ports for the enrollment, policy and
 * metrics listeners, and `localhost` as its host name (the browser tests' origin); `extra` adds to or replaces
 * them.
 */
export function localServerSettings(
  dataDir: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    "server.data_dir": dataDir,
    "server.enrollment_port": freePort(),
    "server.policy_port": freePort(),
    "server.hostnames": ["localhost"],
    "metrics.listen_addr": `127.0.0.1:${freePort()}`,
    ...extra,
  };
}

/** A running server process. */
export interface ServerProcess {
  webPort: number;
  policyPort: number;
  metricsPort: number;
  dataDir: string;
  configPath: string;
  baseUrl: string;
  /** Everything the process printed so far (stdout + stderr). */
  output(): string;
  /** The exit code once the process has ended, else undefined. */
  exitCode(): number | undefined;
  /** The admin password from `{data_dir}/initial_admin_password`. */
  adminPassword(): Promise<string>;
  /** SIGTERM, then SIGKILL after 5 s; resolves with the exit code. */
  stop(signal?: Deno.Signal): Promise<number>;
  /** Sends a signal and returns at once (SIGSTOP/SIGCONT: a hung replica). */
  signal(signal: Deno.Signal): void;
  /** PID of the main process (policy workers are its children). */
  pid: number;
}

/** Options for {@link startServerProcess}. */
export interface ServerProcessOptions {
  /** Extra config values (nested YAML object merged at top level). */
  config?: Record<string, Record<string, unknown>>;
  env?: Record<string, string>;
  /** Reuse a data dir (e.g. to restart a server). */
  dataDir?: string;
  ports?: { web?: number; policy?: number; metrics?: number };
  /** Wait for readiness (default true). */
  wait?: boolean;
}

const MAIN = new URL("../../server/main.ts", import.meta.url).pathname;
/** How long a started server may take to answer its first request. */
const START_DEADLINE_MS = 240_000;

/**
 * Starts `deno run -A server/main.ts --config <temp yaml>`. Ports picked here are free when picked but may be
 * taken by a parallel test before the server binds them, so a start that fails on a taken port is retried on
 * new ports (same data dir) unless the caller fixed the ports.
 */
export async function startServerProcess(options: ServerProcessOptions = {}): Promise<ServerProcess> {
  const dataDir = options.dataDir ?? await Deno.makeTempDir({ prefix: "svc-e2e-" });
  for (let attempt = 1;; attempt++) {
    try {
      return await startOnce({ ...options, dataDir });
    } catch (err) {
      const portTaken = /EADDRINUSE|address already in use|Address in use/i.test(String(err));
      if (!portTaken || options.ports || attempt >= 3) throw err;
    }
  }
}

async function startOnce(options: ServerProcessOptions & { dataDir: string }): Promise<ServerProcess> {
  const dataDir = options.dataDir;
  const webPort = options.ports?.web ?? freePort();
  const policyPort = options.ports?.policy ?? freePort();
  const metricsPort = options.ports?.metrics ?? freePort();
  const config = {
    ...options.config,
    server: {
      data_dir: dataDir,
      enrollment_port: webPort,
      policy_port: policyPort,
      ...(options.config?.server ?? {}),
    },
    metrics: { listen_addr: `127.0.0.1:${metricsPort}`, ...(options.config?.metrics ?? {}) },
  };
  const configPath = `${dataDir}/server.yaml`;
  await Deno.writeTextFile(configPath, stringify(config));
  const { child, followed, exitCode, status } = spawnDeno([MAIN, "--config", configPath], options.env);
  const pumps = followed.closed;
  const proc: ServerProcess = {
    webPort,
    policyPort,
    metricsPort,
    dataDir,
    configPath,
    baseUrl: `https://127.0.0.1:${webPort}`,
    output: followed.all,
    exitCode,
    adminPassword: async () => (await Deno.readTextFile(`${dataDir}/initial_admin_password`)).trim(),
    pid: child.pid,
    signal(signal: Deno.Signal) {
      if (exitCode() === undefined) child.kill(signal);
    },
    async stop(signal: Deno.Signal = "SIGTERM") {
      if (exitCode() === undefined) {
        // A stopped process would never see the signal that ends it.
        if (signal !== "SIGKILL") child.kill("SIGCONT");
        try {
          child.kill(signal);
        } catch { /* already gone */ }
        const timer = setTimeout(() => {
          try {
            child.kill("SIGKILL");
          } catch { /* already gone */ }
        }, 5000);
        await status;
        clearTimeout(timer);
      }
      await pumps;
      return exitCode()!;
    },
  };
  if (options.wait === false) return proc;
  let client: Deno.HttpClient | undefined;
  try {
    // One overall deadline, generous: on a loaded machine (a full suite on 2 cores) loading and compiling the
    // server's modules alone can take over a minute; the loop returns as soon as the server answers.
    const deadline = Date.now() + START_DEADLINE_MS;
    while (Date.now() < deadline) {
      if (exitCode() !== undefined) {
        throw new Error(`svc-server exited with ${exitCode()}:\n${followed.all()}`);
      }
      try {
        // An operator CA (ca.cert_file) is never copied into the data dir.
        const caFile = (options.config?.ca?.cert_file as string | undefined) ?? `${dataDir}/pki/ca/ca.crt`;
        client ??= Deno.createHttpClient({ caCerts: [await Deno.readTextFile(caFile)] });
        const res = await fetch(`${proc.baseUrl}/api/v1/version`, {
          client,
          // Per attempt (the loop retries until its own deadline): a loaded machine needs more than 1 s.
          signal: AbortSignal.timeout(10_000),
        });
        await res.body?.cancel();
        if (res.ok) return proc;
      } catch { /* not up yet */ }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`svc-server did not answer within ${START_DEADLINE_MS / 1000} s:\n${followed.all()}`);
  } catch (err) {
    await proc.stop("SIGKILL");
    throw err;
  } finally {
    client?.close();
  }
}

/** An HTTP client trusting the server's internal CA (read from its data dir). */
export async function trustingClient(proc: ServerProcess): Promise<Deno.HttpClient> {
  const ca = await Deno.readTextFile(`${proc.dataDir}/pki/ca/ca.crt`);
  return Deno.createHttpClient({ caCerts: [ca] });
}
