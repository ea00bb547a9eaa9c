/**
 * Assembles and runs svc-server: database and migrations, PKI, identity and audit, the policy hub, and the
 * three listeners. `startServer` is what `server/main.ts` runs and what end-to-end tests start in-process.
 */
import { hostname } from "node:os";
import type { ServerConfig } from "./config/config.ts";
import { contextBase, type ServerContext } from "./context.ts";
import { type Db, migrate, openDatabase } from "./db/mod.ts";
import { connectionBudgetWarning } from "./db/connection_budget.ts";
import { createLogger, type LogFormat, type Logger, type LogLevel } from "./core/log.ts";
import { openServerPki } from "./pki/server_pki.ts";
import { type AcmeManager, startAcme } from "./acme/acme.ts";
import { VERSION } from "../shared/version.ts";
import { createAuditRecorder, createIdentity } from "./auth/mod.ts";
import { boxed } from "./auth/initial_admin.ts";
import { createApp } from "./http/app.ts";
import { buildRoutes } from "./http/routes/mod.ts";
import { createRouteHooks } from "./http/auth_hooks.ts";
import { spaHandler } from "./http/spa.ts";
import { type HubOptions, startConfiguredHub } from "./hub/hub.ts";
import { startReadModelWorker } from "./hub/read_model_worker.ts";
import { startPolicyServer } from "./grpc/policy_server.ts";
import { createEnrollmentHandlers } from "./grpc/enrollment_service.ts";
import { startWebPort } from "./web_port.ts";
import { stopLiveEvents } from "./events/broker.ts";
import { startMetricsListener } from "./metrics/listener.ts";
import { checkKekAtStart } from "./disk_encryption/kek.ts";
import { startRotationSweep } from "./disk_encryption/sweep.ts";
import { startCatalogueRefresh } from "./flatpak/catalogue.ts";
import { startTrendSampler } from "./trends/schedule.ts";
import { type PolicyWorkers, startPolicyWorkers } from "./workers/supervisor.ts";
import { keepWorkerWarm } from "./core/offloop.ts";

/** Options for {@link startServer}. */
export interface StartOptions {
  /** Use this database instead of opening one from the config (tests). */
  db?: Db;
  log?: Logger;
  /** Hub timing overrides (tests); the replica timeout otherwise comes from the config. */
  hub?: HubOptions;
  /** Where operator notices go (default stdout). */
  print?: (text: string) => void;
}

/** The URL an operator opens: the first configured hostname, else localhost. */
function webUrl(config: ServerConfig, port: number): string {
  const host = config.server.hostnames[0] ?? "localhost";
  return `https://${host}${port === 443 ? "" : `:${port}`}/`;
}

/** A running server. */
export interface RunningServer {
  ctx: ServerContext;
  ports: { web: number; policy: number; metrics: string | null };
  /** The ACME job, when `acme.enabled`. */
  acme?: AcmeManager;
  /** Stops listeners, background jobs and (when it opened it) the database. */
  stop(): Promise<void>;
}

/** Starts svc-server with `config`. */
export async function startServer(config: ServerConfig, options: StartOptions = {}): Promise<RunningServer> {
  const log = options.log ??
    createLogger(config.log.level as LogLevel, undefined, { format: config.log.format as LogFormat });
  await Deno.mkdir(config.server.dataDir, { recursive: true, mode: 0o700 });
  const db = options.db ?? await openDatabase({
    url: config.database.url,
    dataDir: config.server.dataDir,
    poolSize: config.database.poolSize,
    onOutage: (down) =>
      down
        ? log.error(
          "database: unreachable; requests answer 503 at once until it answers again (probed every second)",
        )
        : log.info("database: answering again"),
  });
  const cleanups: Array<() => Promise<void>> = [];
  if (!options.db) cleanups.push(() => db.close());
  try {
    const applied = await migrate(db);
    if (applied.length > 0) log.info("database migrated", { applied: applied.join(",") });
    const overBudget = await connectionBudgetWarning(db, {
      poolSize: config.database.poolSize,
      processes: config.server.policyWorkers > 1 ? 1 + config.server.policyWorkers : 1,
    });
    if (overBudget) log.warn(overBudget);
    // Large imports and policy content are checked in a worker; one stays started so no request pays for it.
    const releaseBundleWorker = keepWorkerWarm();
    cleanups.unshift(() => Promise.resolve(releaseBundleWorker()));
    await checkKekAtStart(config, db);
    // The CA and (when security.jwt_secret is empty) the session secret are shared through the database.
    const pki = await openServerPki(config, db);
    const { ca } = pki;
    if (pki.caOrigin !== "database" && pki.caOrigin !== "files") {
      log.info(`internal CA ${pki.caOrigin} in the database`, { subject: ca.cert.subject });
    }
    const base = contextBase(pki, {
      config: pki.config,
      db,
      log,
      replicaId: `${hostname()}-${crypto.randomUUID().slice(0, 8)}`,
    });
    const audit = createAuditRecorder(base);
    cleanups.unshift(() => audit.close());
    const ctx: ServerContext = { ...base, audit };
    const identity = createIdentity(ctx);
    await identity.start();
    cleanups.unshift(() => identity.stop());

    const hub = await startConfiguredHub(ctx, db, options.hub);
    cleanups.unshift(() => hub.stop());
    // Large binding and policy changes queue their reach refresh; every replica works the queue off.
    const readModels = await startReadModelWorker(ctx);
    cleanups.unshift(() => readModels.stop());
    cleanups.unshift(startRotationSweep(ctx));
    cleanups.unshift(startCatalogueRefresh(ctx));
    cleanups.unshift(startTrendSampler(ctx));

    const routes = buildRoutes(ctx, identity);
    const app = createApp({ ctx, routes, hooks: createRouteHooks(identity.services), spa: spaHandler() });
    // With several policy workers the policy port lives in them; this process's hub only reaps and compacts.
    let workers: PolicyWorkers | undefined;
    const metrics = await startMetricsListener(ctx, {
      workers: config.server.policyWorkers > 1
        ? () => workers?.collectMetrics() ?? Promise.resolve([])
        : undefined,
    });
    cleanups.unshift(() => metrics.stop());
    const policy = config.server.policyWorkers > 1
      ? workers = await startPolicyWorkers(ctx, { count: config.server.policyWorkers, hub: options.hub })
      : await startPolicyServer(ctx, hub);
    cleanups.unshift(() => policy.stop());
    const web = await startWebPort(ctx, {
      fetch: async (req) => await app.fetch(req),
      enrollment: createEnrollmentHandlers(ctx),
    });
    cleanups.unshift(() => web.stop());
    // Console live-event streams never finish by themselves: end them before the web port waits for requests.
    cleanups.unshift(() => stopLiveEvents(ctx));
    // ACME replaces the web port's certificate once it has one; the policy port keeps the internal one.
    let acmeManager: AcmeManager | undefined;
    if (config.acme.enabled) {
      acmeManager = await startAcme({
        config,
        db,
        log,
        store: pki.store,
        replicaId: base.replicaId,
        install: (cert) => web.setCertificate(cert),
      });
      cleanups.unshift(() => acmeManager!.stop());
    }
    log.info("svc-server started", {
      version: VERSION,
      web: web.port,
      policy: policy.port,
      policy_workers: config.server.policyWorkers,
      metrics: metrics.addr ?? "off",
      database: db.driver,
    });
    // The admin login (or the reminder of where it is) is the last thing a start prints, after the URL answers.
    const notice = await identity.startupNotice(webUrl(config, web.port));
    // A JSON log stays JSON: the notice becomes one log record instead of a framed block.
    if (notice.length > 0 && config.log.format === "json") log.warn(notice.join(" "));
    else if (notice.length > 0) (options.print ?? console.log)(boxed(notice));
    let stopped = false;
    return {
      ctx,
      ports: { web: web.port, policy: policy.port, metrics: metrics.addr },
      acme: acmeManager,
      async stop() {
        if (stopped) return;
        stopped = true;
        for (const c of cleanups) {
          await c().catch((err) => log.warn("shutdown step failed", { error: String(err) }));
        }
      },
    };
  } catch (err) {
    for (const c of cleanups) await c().catch(() => {});
    throw err;
  }
}
