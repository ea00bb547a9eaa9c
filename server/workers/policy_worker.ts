/**
 * A policy worker: one of the `server.policy_workers` processes that share the policy port (`reusePort`).
 * Each is a full replica of the policy service on the server's database — its own replica id, liveness row
 * and stream rows, fed by the hub's LISTEN/NOTIFY path like any other replica — so node status, revocation
 * on every call, failover and the gRPC limits are those of a single server process. The supervisor
 * (`supervisor.ts`) starts it as `svc-server __policy-worker` and talks to it over `protocol.ts`.
 *
 * @module
 */
import { contextBase, type ServerContext } from "../context.ts";
import { openDatabase } from "../db/mod.ts";
import { createLogger, type LogFormat, type LogLevel } from "../core/log.ts";
import { openServerPki } from "../pki/server_pki.ts";
import { createAuditRecorder } from "../audit/recorder.ts";
import { startConfiguredHub } from "../hub/hub.ts";
import { startPolicyServer } from "../grpc/policy_server.ts";
import { metricsRegistry } from "../metrics/counters.ts";
import { familiesFromRegistry } from "../metrics/exposition.ts";
import { runtimeFamilies } from "../metrics/runtime.ts";
import { lineWriter, readLines, type SupervisorMessage, type WorkerBootstrap } from "./protocol.ts";

/** Exit code of a worker whose supervisor went away (its stdin closed) before asking it to stop. */
export const ORPHANED_EXIT_CODE = 3;

/** Runs this process as a policy worker until the supervisor stops it or goes away. Never returns. */
export async function runPolicyWorker(): Promise<never> {
  const lines = readLines(Deno.stdin.readable);
  const first = await lines.next();
  if (first.done) {
    console.error("svc-server: __policy-worker is started by svc-server itself (server.policy_workers)");
    Deno.exit(2);
  }
  const boot = JSON.parse(first.value) as WorkerBootstrap;
  const { config } = boot;
  // The same format as the main process's lines (the supervisor adds the worker's index to each).
  const log = createLogger(config.log.level as LogLevel, undefined, {
    format: config.log.format as LogFormat,
  });
  const out = lineWriter(Deno.stdout.writable);
  const cleanups: Array<() => Promise<void>> = [];
  let stopping: Promise<never> | undefined;
  const stop = (reason: string) =>
    stopping ??= (async () => {
      log.info("policy worker stopping", { reason });
      for (const c of cleanups) {
        await c().catch((err) => log.warn("shutdown step failed", { error: String(err) }));
      }
      await out.close();
      Deno.exit(0);
    })();
  try {
    const db = await openDatabase({
      url: config.database.url,
      dataDir: config.server.dataDir,
      poolSize: config.database.poolSize,
    });
    cleanups.unshift(() => db.close());
    // The main process created the CA and certificates before starting any worker: these only load them.
    const base = contextBase(await openServerPki(config, db), { config, db, log, replicaId: boot.replicaId });
    const audit = createAuditRecorder(base);
    cleanups.unshift(() => audit.close());
    const ctx: ServerContext = { ...base, audit };
    const hub = await startConfiguredHub(ctx, db, boot.hub);
    cleanups.unshift(() => hub.stop());
    const policy = await startPolicyServer(ctx, hub, { port: boot.port, reusePort: true });
    cleanups.unshift(() => policy.stop());
    await out.send({ type: "ready", port: policy.port });
  } catch (err) {
    log.error("policy worker cannot start", { error: err instanceof Error ? err.message : String(err) });
    for (const c of cleanups) await c().catch(() => {});
    Deno.exit(1);
  }
  // systemd and a terminal signal the whole process group: stop cleanly, as the supervisor would ask.
  Deno.addSignalListener("SIGTERM", () => void stop("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => void stop("SIGINT"));
  for await (const line of lines) {
    let message: SupervisorMessage;
    try {
      message = JSON.parse(line);
    } catch {
      log.warn("policy worker: ignoring a malformed request", { line: line.slice(0, 200) });
      continue;
    }
    if (message.type === "stop") await stop("asked by svc-server");
    else if (message.type === "ping") await out.send({ type: "pong", id: message.id });
    else if (message.type === "metrics") {
      const [counters, runtime] = await Promise.all([
        familiesFromRegistry(metricsRegistry, log),
        runtimeFamilies(log),
      ]);
      const families = [...counters, ...runtime.filter((f) => f.name.startsWith("process_"))];
      await out.send({ type: "metrics", id: message.id, families });
    }
  }
  // The supervisor is gone (killed): end as abruptly as it did. The replica's rows stay behind for the
  // survivors' reaper, exactly as when a whole server process dies.
  await stopping;
  Deno.exit(ORPHANED_EXIT_CODE);
}
