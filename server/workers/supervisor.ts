/**
 * Runs the policy port on several processes (`server.policy_workers` > 1): the main process keeps the web
 * port, REST, metrics listener and background jobs, and starts that many policy workers (`policy_worker.ts`)
 * that bind the same port with `reusePort`, so the kernel spreads agent connections over every core.
 *
 * The supervisor starts the first worker on `server.policy_port` (which may be 0) and the others on the port
 * it got, waits until each listens, relays their log lines with a `worker=N` field, restarts a worker that
 * exits with a growing delay, and stops them all on shutdown. When a worker dies, its replica row is removed
 * at once and the nodes it held go offline unless their agent already reconnected to another worker; the
 * agents themselves reconnect on their own backoff, the kernel handing them to a live worker.
 *
 * @module
 */
import { hostname } from "node:os";
import { PORTABLE_RUN_FLAGS } from "../../shared/portable_run.ts";
import type { ServerContext } from "../context.ts";
import type { HubOptions } from "../hub/hub.ts";
import { markNodesOffline } from "../hub/node_status.ts";
import type { MetricFamily } from "../metrics/exposition.ts";
import type { WorkerFamilies } from "../metrics/workers.ts";
import {
  lineWriter,
  POLICY_WORKER_COMMAND,
  readLines,
  type WorkerBootstrap,
  type WorkerMessage,
} from "./protocol.ts";

/** How long a worker may take to listen after being started (module loading on a loaded machine). */
const START_TIMEOUT_MS = 60_000;
/** How long a worker may take to stop after being asked before it is killed. */
const STOP_GRACE_MS = 10_000;
/** How long a scrape waits for a worker's instruments. */
const METRICS_TIMEOUT_MS = 3_000;
/** Restart delays after a crash: doubling from the first to the last, reset after a healthy minute. */
const RESTART_FIRST_MS = 1_000;
const RESTART_MAX_MS = 30_000;
const HEALTHY_AFTER_MS = 60_000;

/** One worker as the supervisor sees it. */
export interface WorkerInfo {
  index: number;
  pid: number;
  replicaId: string;
}

/** The running workers of the policy port. */
export interface PolicyWorkers {
  /** The shared policy port. */
  port: number;
  /** Workers running now. */
  workers(): WorkerInfo[];
  /** Each running worker's process-lifetime instruments (for the metrics listener). */
  collectMetrics(): Promise<WorkerFamilies[]>;
  /** Asks every worker to stop (closing its streams) and waits; kills those that do not. */
  stop(): Promise<void>;
}

/** Options of {@link startPolicyWorkers}. */
export interface PolicyWorkersOptions {
  count: number;
  /** Hub timing overrides passed to every worker (tests). */
  hub?: HubOptions;
  /** The command line that starts a worker; derived from how this process runs when omitted. */
  command?: { program: string; args: string[] };
}

interface Running {
  info: WorkerInfo;
  child: Deno.ChildProcess;
  send(message: unknown): Promise<void>;
  closeInput(): Promise<void>;
  /** Answers awaited from this worker, by request id (metrics families; an empty list for a pong). */
  pending: Map<number, (families: MetricFamily[] | undefined) => void>;
  listening: boolean;
  exited: Promise<Deno.CommandStatus>;
}

/**
 * How to start this program again as a worker: the same runtime, entry module and permissions. From a
 * checkout the entry is `server/main.ts` with the repository's `deno.json`; in the portable build it is the
 * bundle this process runs (launcher flags repeated); a `deno compile` binary is simply run again.
 */
export function workerCommand(): { program: string; args: string[] } {
  const program = Deno.execPath();
  const here = import.meta.url;
  if (here.includes("/deno-compile-")) return { program, args: [POLICY_WORKER_COMMAND] };
  const permissions = ["read", "write", "net", "env", "sys", "run", "ffi"] as const;
  const granted = permissions.filter((name) => Deno.permissions.querySync({ name }).state === "granted")
    .map((name) => `--allow-${name}`);
  if (here.endsWith("/server/workers/supervisor.ts")) {
    const config = new URL("../../deno.json", here).pathname;
    return {
      program,
      args: [
        "run",
        "--config",
        config,
        ...granted,
        new URL("../main.ts", here).pathname,
        POLICY_WORKER_COMMAND,
      ],
    };
  }
  const bundle = new URL(Deno.mainModule).pathname;
  return {
    program,
    args: [
      "run",
      ...PORTABLE_RUN_FLAGS,
      ...granted,
      bundle,
      POLICY_WORKER_COMMAND,
    ],
  };
}

/** Starts `options.count` policy workers on the policy port; resolves once every one listens. */
export async function startPolicyWorkers(
  ctx: ServerContext,
  options: PolicyWorkersOptions,
): Promise<PolicyWorkers> {
  const { log, db } = ctx;
  if (Deno.permissions.querySync({ name: "run" }).state !== "granted") {
    throw new Error(
      `server.policy_workers is ${options.count}, which needs permission to start processes (--allow-run); ` +
        "grant it or set server.policy_workers to 1",
    );
  }
  const command = options.command ?? workerCommand();
  const running = new Map<number, Running>();
  const restartTimers = new Set<ReturnType<typeof setTimeout>>();
  let stopping = false;
  let port = ctx.config.server.policyPort;
  let nextRequest = 1;

  function spawn(index: number): { worker: Running; ready: Promise<number> } {
    const replicaId = `${hostname()}-w${index}-${crypto.randomUUID().slice(0, 8)}`;
    const child = new Deno.Command(command.program, {
      args: command.args,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const input = lineWriter(child.stdin);
    const worker: Running = {
      info: { index, pid: child.pid, replicaId },
      child,
      send: (message) => input.send(message),
      closeInput: () => input.close(),
      pending: new Map(),
      listening: false,
      exited: child.status,
    };
    let tail: string[] = [];
    const logs = (async () => {
      for await (const line of readLines(child.stderr)) {
        console.error(labelled(line, index));
        tail = [...tail.slice(-19), line];
      }
    })();
    const ready = new Promise<number>((resolve, reject) => {
      let listening = false;
      (async () => {
        for await (const line of readLines(child.stdout)) {
          let message: WorkerMessage;
          try {
            message = JSON.parse(line);
          } catch {
            console.log(labelled(line, index));
            continue;
          }
          if (message.type === "ready") {
            listening = true;
            worker.listening = true;
            log.info("policy worker listening", { worker: index, pid: child.pid, replica: replicaId });
            resolve(message.port);
          } else if (message.type === "metrics" || message.type === "pong") {
            worker.pending.get(message.id)?.(message.type === "metrics" ? message.families : []);
            worker.pending.delete(message.id);
          }
        }
      })().catch(() => {});
      child.status.then(async (status) => {
        await logs.catch(() => {});
        if (!listening) {
          reject(
            new Error(
              `policy worker ${index} exited with ${status.code} before listening:\n${tail.join("\n")}`,
            ),
          );
        }
      });
    });
    const bootstrap: WorkerBootstrap = { index, replicaId, port, config: ctx.config, hub: options.hub };
    worker.send(bootstrap).catch(() => {});
    running.set(index, worker);
    const startedAt = Date.now();
    child.status.then((status) => {
      if (running.get(index) === worker) running.delete(index);
      for (const resolve of worker.pending.values()) resolve(undefined);
      if (stopping) return;
      void afterCrash(index, worker, status, Date.now() - startedAt);
    });
    return { worker, ready };
  }

  const delays = new Map<number, number>();

  async function afterCrash(index: number, worker: Running, status: Deno.CommandStatus, upMs: number) {
    const delay = upMs >= HEALTHY_AFTER_MS ? RESTART_FIRST_MS : (delays.get(index) ?? RESTART_FIRST_MS);
    delays.set(index, Math.min(delay * 2, RESTART_MAX_MS));
    log.warn("policy worker exited; restarting it", {
      worker: index,
      code: status.code,
      signal: status.signal ?? "none",
      restart_in_ms: delay,
    });
    await forgetReplica(worker.info.replicaId).catch((err) =>
      log.warn("policy worker: cleaning up after it failed; the replica reaper will", {
        worker: index,
        error: String(err),
      })
    );
    const timer = setTimeout(() => {
      restartTimers.delete(timer);
      if (stopping) return;
      const { ready } = spawn(index);
      ready.then(
        () => log.info("policy worker restarted", { worker: index }),
        (err) => log.error("policy worker failed to restart", { worker: index, error: String(err) }),
      );
    }, delay);
    restartTimers.add(timer);
  }

  /** Drops a dead worker's replica row (and with it its stream rows) and marks its nodes offline. */
  async function forgetReplica(replicaId: string): Promise<void> {
    const orphans = await db.query<{ node_id: string }>(
      `WITH dead AS (DELETE FROM server_replicas WHERE id = $1 RETURNING id)
       SELECT DISTINCT node_id FROM node_streams WHERE replica_id IN (SELECT id FROM dead)`,
      [replicaId],
    );
    await markNodesOffline(db, orphans.map((o) => o.node_id), "policy worker holding the stream exited");
  }

  /** Sends a request and resolves with the answer, or undefined when none came within `timeoutMs`. */
  function ask(
    worker: Running,
    type: "metrics" | "ping",
    timeoutMs: number,
  ): Promise<MetricFamily[] | undefined> {
    const id = nextRequest++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        worker.pending.delete(id);
        resolve(undefined);
      }, timeoutMs);
      worker.pending.set(id, (families) => {
        clearTimeout(timer);
        resolve(families);
      });
      worker.send({ type, id }).catch(() => {});
    });
  }

  /**
   * Vouches for the workers that answer: their liveness rows are refreshed from this process too. A worker
   * busy with thousands of streams can wait on its own database pool longer than the replica timeout while
   * still serving; its siblings must not declare it dead and mark its nodes offline for that. A worker that
   * stops answering (or exits) gets no help, so the reaper (or `forgetReplica`) still deals with it.
   */
  async function vouch(): Promise<void> {
    const workers = [...running.values()].filter((w) => w.listening);
    const answered = await Promise.all(workers.map((w) => ask(w, "ping", livenessMs)));
    const alive = workers.filter((w, i) => answered[i] !== undefined && running.get(w.info.index) === w)
      .map((w) => w.info.replicaId);
    if (alive.length === 0 || stopping) return;
    await db.query("UPDATE server_replicas SET last_seen = now() WHERE id = ANY($1::text[])", [alive]).catch(
      (err) => log.warn("policy workers: refreshing their liveness failed", { error: String(err) }),
    );
  }
  const livenessMs = Math.min(5_000, Math.floor(ctx.config.server.replicaTimeoutSeconds * 1000 / 3));
  let vouching: Promise<void> | undefined;
  const livenessTimer = setInterval(() => {
    vouching ??= vouch().finally(() => vouching = undefined);
  }, livenessMs);

  async function stopWorker(worker: Running): Promise<void> {
    await worker.send({ type: "stop" }).catch(() => {});
    const timer = setTimeout(() => {
      try {
        worker.child.kill("SIGKILL");
      } catch { /* already gone */ }
    }, STOP_GRACE_MS);
    await worker.exited;
    clearTimeout(timer);
    await worker.closeInput();
  }

  async function stopAll(): Promise<void> {
    stopping = true;
    clearInterval(livenessTimer);
    await vouching;
    for (const timer of restartTimers) clearTimeout(timer);
    await Promise.all([...running.values()].map(stopWorker));
  }

  try {
    const first = spawn(1);
    port = await withTimeout(first.ready, START_TIMEOUT_MS, "policy worker 1 did not listen");
    const rest = [];
    for (let index = 2; index <= options.count; index++) rest.push(spawn(index).ready);
    await Promise.all(
      rest.map((r, i) => withTimeout(r, START_TIMEOUT_MS, `policy worker ${i + 2} did not listen`)),
    );
  } catch (err) {
    await stopAll();
    throw err;
  }
  log.info("policy port served by workers", {
    port,
    workers: options.count,
    pids: [...running.values()].map((w) => w.info.pid).join(","),
  });

  return {
    port,
    workers: () => [...running.values()].map((w) => ({ ...w.info })),
    async collectMetrics() {
      const workers = [...running.values()];
      return await Promise.all(workers.map(async (worker) => {
        const families = await ask(worker, "metrics", METRICS_TIMEOUT_MS);
        if (families === undefined) {
          log.warn("metrics: a policy worker did not answer; its series are omitted from this scrape", {
            worker: worker.info.index,
          });
        }
        return { worker: String(worker.info.index), families: families ?? [] };
      }));
    },
    stop: stopAll,
  };
}

/** A worker's log line with its index: a `worker` member in a JSON line, a `worker=N` field in a text line. */
function labelled(line: string, index: number): string {
  if (line.startsWith("{") && line.endsWith("}")) {
    try {
      return JSON.stringify({ ...JSON.parse(line), worker: index });
    } catch {
      // Not JSON after all: label it as text.
    }
  }
  return `${line} worker=${index}`;
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) =>
        timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms)
      ),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
