/**
 * The svc-agent daemon: renews the certificate when due (at start and daily), keeps one policy
 * stream open with reconnect backoff (1 s doubling to 60 s, reset after a healthy stream),
 * and on every connect sends a heartbeat, fetches the agent configuration and, once per
 * process (and again when their directories change), reports the GSettings and polkit catalogues. Stream events drive the sync engine;
 * the tamper watcher follows the managed files; notifications follow changes.
 *
 * @module
 */

import * as grpc from "@grpc/grpc-js";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { GrpcError } from "../shared/grpc/adapter.ts";
import { ComplianceStatus } from "./gen/svc/policy/v1/policy_pb.ts";
import { Backoff, type BackoffOptions, sleep } from "./backoff.ts";
import { GSettingsCatalogueReporter, PolkitCatalogueReporter } from "./catalogue.ts";
import { createPolicyClient, type Identity, type PolicyClient } from "./client.ts";
import type { AgentConfig } from "./config.ts";
import { enforcerRegistry } from "./enforcers/mod.ts";
import { RootFs } from "./fs.ts";
import { ensureDataDir, loadIdentity } from "./identity.ts";
import type { Logger } from "./log.ts";
import { Notifier } from "./notify.ts";
import { renewIfDue } from "./renew.ts";
import { ColdPageRelease } from "./cold_pages.ts";
import { RevocationNotice } from "./revocation.ts";
import { Runner } from "./runner.ts";
import { runStreamSession } from "./stream.ts";
import { ManagedFiles } from "./sync/managed_files.ts";
import { SyncEngine, type SyncSummary } from "./sync/engine.ts";
import type { Enforcer } from "./sync/types.ts";
import { collectNodeFacts } from "./sysinfo.ts";
import { DISK_ENCRYPTION_TYPE, DiskEncryptionManager } from "./disk_encryption/manager.ts";
import { type TamperEvent, TamperWatcher } from "./tamper.ts";
import { NodeWatcher } from "./sync/node_watch.ts";
import { PolicyStore } from "./sync/policy_store.ts";
import { StatusFile } from "./status.ts";
import { VERSION } from "../shared/version.ts";

/**
 * Node path whose change asks for a re-evaluation: the agent package's apt hook touches it after every dpkg
 * run (packaging), so software installed or removed is looked at once the package manager is done.
 */
export const REEVALUATE_REQUEST_PATH = "/run/svc-agent/reevaluate";

/** Options of {@linkcode runDaemon}. */
export interface DaemonOptions {
  config: AgentConfig;
  logger: Logger;
  /** Stops the daemon when aborted. */
  signal: AbortSignal;
  runner?: Runner;
  backoff?: BackoffOptions;
  /** Milliseconds between renewal checks while running; default one day. */
  renewalCheckMs?: number;
  /** Milliseconds between checks of the GSettings schemas and polkit actions directories; default ten minutes. */
  catalogueCheckMs?: number;
  /** How often a refused (revoked) agent repeats what the administrator must do; default one hour. */
  revocationReminderMs?: number;
  /** A stream that stayed up this long counts as healthy even without a snapshot; default 60 s. */
  healthyAfterMs?: number;
  tamper?: { settleMs?: number; procRoot?: string };
  /** Enforcers to use; default every enforcer of this build. */
  enforcers?: readonly Enforcer[];
  /** Milliseconds between checks of the disk-encryption inventory for changes; default ten minutes. */
  diskEncryptionCheckMs?: number;
  /** Quiet milliseconds after a sync before the runtime's cold pages are given back; default 30 s. */
  coldPagesQuietMs?: number;
  /** Quiet milliseconds that end a burst of node changes before the re-evaluation; default 1,500. */
  nodeSettleMs?: number;
}

const UNARY_TIMEOUT_MS = 15_000;
const CATALOGUE_TIMEOUT_MS = 60_000;
const MAX_PENDING_TAMPER = 100;

/** Codes with which every call of a connection fails at once (server away, node refused). */
const CONNECTION_CODES: ReadonlySet<number> = new Set([
  grpc.status.UNAVAILABLE,
  grpc.status.DEADLINE_EXCEEDED,
  grpc.status.CANCELLED,
  grpc.status.UNAUTHENTICATED,
]);

const STATUS: Record<string, ComplianceStatus> = {
  COMPLIANT: ComplianceStatus.COMPLIANT,
  NON_COMPLIANT: ComplianceStatus.NON_COMPLIANT,
  INAPPLICABLE: ComplianceStatus.INAPPLICABLE,
  ERROR: ComplianceStatus.ERROR,
  UNKNOWN: ComplianceStatus.UNKNOWN,
};

function deadline(ms = UNARY_TIMEOUT_MS): { deadline: number } {
  return { deadline: Date.now() + ms };
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Runs the daemon until `options.signal` aborts. */
export async function runDaemon(options: DaemonOptions): Promise<void> {
  const { config, logger, signal } = options;
  const { dataDir } = config.enrollment;
  const clientId = config.agent.clientId;
  await ensureDataDir(dataDir);
  const fs = await RootFs.open(config.agent.rootDir);
  const runner = options.runner ?? new Runner();
  const managed = await ManagedFiles.load(dataDir, logger);
  const enforcers = enforcerRegistry(options.enforcers);
  const notifier = new Notifier({ runner, logger, enabled: config.notifications.enabled });
  const problems = new Set<string>();
  const pendingTamper: TamperEvent[] = [];
  let client: PolicyClient | undefined;
  let pendingReports = false;
  /** Node paths of tamper events whose restoring sync has not been logged yet. */
  const restoring = new Set<string>();
  const coldPages = new ColdPageRelease({ logger, quietMs: options.coldPagesQuietMs });
  const store = new PolicyStore(dataDir, logger);
  const status = new StatusFile(config.agent.statusFile, logger, {
    node: clientId,
    server: `${config.server.address}:${config.server.policyPort}`,
    agentVersion: VERSION,
  });
  /** Why the next sync runs, for the status summary and the log (the last reason set wins). */
  let syncReason = "policies received";
  function resync(reason: string): void {
    syncReason = reason;
    void engine.requestSync();
  }
  const nodeWatcher = new NodeWatcher({
    fs,
    logger,
    settleMs: options.nodeSettleMs,
    onChange: (paths) => {
      logger.info("the node changed; re-evaluating its policies", { paths: paths.join(",") });
      resync(`node changed: ${paths.join(", ")}`);
    },
  });

  // Fails early (and the agent exits with the reason) when the enrollment data is unusable.
  let identity: Identity = await loadIdentity(dataDir);
  async function renewWhenDue(): Promise<boolean> {
    try {
      const renewed = await renewIfDue({
        identity,
        dataDir,
        address: config.server.address,
        policyPort: config.server.policyPort,
        logger,
      });
      if (renewed) identity = renewed;
      return renewed !== undefined;
    } catch (err) {
      logger.error("certificate renewal failed; continuing with the current certificate", {
        error: errorText(err),
      });
      return false;
    }
  }

  async function sendTamper(event: TamperEvent): Promise<void> {
    const current = client;
    if (!current) throw new Error("not connected");
    await current.reportTamperEvent({
      clientId,
      filePath: event.path,
      processes: event.processes.map((p) => ({ pid: p.pid, comm: p.comm, user: p.user })),
      detectedAt: timestampFromDate(event.detectedAt),
      policyType: event.type,
    }, deadline());
  }

  const watcher = new TamperWatcher({
    fs,
    logger,
    verify: (path) => managed.verify(fs, path),
    settleMs: options.tamper?.settleMs,
    procRoot: options.tamper?.procRoot,
    onTamper: (event) => {
      restoring.add(event.path);
      syncReason = `tamper restore: ${event.path}`;
      return engine.requestSync(async () => {
        try {
          await sendTamper(event);
        } catch (err) {
          logger.warn("tamper report failed; it is sent again after reconnecting", { error: errorText(err) });
          if (pendingTamper.length < MAX_PENDING_TAMPER) pendingTamper.push(event);
        }
      });
    },
  });

  const engine: SyncEngine = new SyncEngine({
    fs,
    runner,
    logger,
    config,
    managed,
    enforcers,
    onOwnWrite: (path, phase) => watcher.ownWrite(path, phase),
    onCacheChanged: (policies) => {
      void store.save(policies);
      void status.source("server");
      syncReason = "policies received";
    },
    onSynced: async (summary: SyncSummary) => {
      logSync(summary);
      coldPages.activity();
      const targets = engine.watchTargets();
      if (targets.length) targets.push(REEVALUATE_REQUEST_PATH);
      try {
        await nodeWatcher.setTargets(targets);
      } catch (err) {
        logger.warn("cannot watch the node for changes; the periodic re-evaluation still runs", {
          error: errorText(err),
        });
      }
      status.retain(new Set(engine.cached().map((p) => p.id)));
      void status.evaluated(summary, syncReason, targets);
      try {
        await watcher.setWatched(summary.managed);
        problems.delete("tamper watcher");
      } catch (err) {
        problems.add("tamper watcher");
        logger.error("tamper watcher cannot watch the managed files", { error: errorText(err) });
      }
      const notify = [...summary.changed.keys()].filter((t) => enforcers.get(t)?.notifiesUsers);
      if (notify.length) {
        notifier.notify(notify).catch((err) =>
          logger.debug("notification failed", { error: errorText(err) })
        );
      }
    },
    reportCompliance: async (policy, result) => {
      if (!client) {
        pendingReports = true;
        throw new Error("not connected");
      }
      try {
        await client.reportCompliance({
          clientId,
          policyId: policy.id,
          status: STATUS[result.status] ?? ComplianceStatus.UNKNOWN,
          message: result.message,
          items: result.items.map((i) => ({
            schemaId: i.schemaId,
            key: i.key,
            status: STATUS[i.status] ?? ComplianceStatus.UNKNOWN,
            message: i.message,
          })),
          policyVersion: policy.version,
        }, deadline());
      } catch (err) {
        pendingReports = true;
        throw err;
      }
    },
  });

  /** One INFO line per sync: which files were written, removed and restored. */
  function logSync(summary: SyncSummary): void {
    const managedNow = new Set(summary.managed.map((m) => m.path));
    const written: string[] = [];
    const removed: string[] = [];
    const restored: string[] = [];
    for (const paths of summary.changed.values()) {
      for (const path of paths) {
        if (!managedNow.has(path)) removed.push(path);
        else if (restoring.has(path)) restored.push(path);
        else written.push(path);
      }
    }
    restoring.clear();
    const count = (status: string) => summary.results.filter((r) => r.result.status === status).length;
    logger.info("sync done", {
      reason: syncReason,
      policies: summary.results.length,
      written: written.sort().join(",") || "none",
      removed: removed.sort().join(",") || "none",
      restored: restored.sort().join(",") || "none",
      non_compliant: count("NON_COMPLIANT") || undefined,
      errors: count("ERROR") || undefined,
      ms: summary.durationMs,
    });
  }

  /**
   * Side calls of a connection (heartbeat, configuration, catalogues) fail together with the stream
   * when the server is away or refuses the node; the stream's own failure is the one line logged then.
   */
  function sideCallFailed(current: PolicyClient, what: string, err: unknown): void {
    const connectionLevel = current !== client ||
      (err instanceof GrpcError && CONNECTION_CODES.has(err.code));
    (connectionLevel ? logger.debug : logger.warn)(`${what} failed`, { error: errorText(err) });
  }

  async function heartbeat(current: PolicyClient): Promise<void> {
    const facts = await collectNodeFacts(fs, runner);
    await current.heartbeat({
      clientId,
      ...facts,
      healthy: problems.size === 0,
      healthMessage: problems.size ? `problems: ${[...problems].join(", ")}` : "",
    }, deadline());
  }

  async function fetchAgentConfig(current: PolicyClient): Promise<void> {
    const { config: agentConfig } = await current.getAgentConfig({ clientId }, deadline());
    const n = agentConfig?.notifications;
    if (n) {
      const settings = {
        enabled: n.enabled,
        cooldownSeconds: n.cooldownSeconds,
        defaultMessage: n.defaultMessage,
        messageByType: { ...n.messageByPolicyType },
      };
      notifier.setSettings(settings);
      logger.debug("notification settings from the server", { settings });
    }
  }

  const diskEncryption = new DiskEncryptionManager({
    fs,
    runner,
    logger,
    dataDir,
    clientId,
    devices: config.diskEncryption.devices,
    unlockKeyDir: config.diskEncryption.unlockKeyDir,
    tpm2Device: config.diskEncryption.tpm2Device,
    policies: () => engine.cached(),
    // An escrow or rotation changes what the DiskEncryption policies read back.
    onTasksDone: () => {
      if (engine.cached().some((p) => p.type === DISK_ENCRYPTION_TYPE)) resync("disk-encryption task done");
    },
  });
  // Inventory is reported even without a DiskEncryption policy; a change (new keyslot, new disk) is sent.
  const diskEncryptionTimer = setInterval(() => {
    const current = client;
    if (current) {
      diskEncryption.report(current, { onlyIfChanged: true })
        .catch((err) => sideCallFailed(current, "disk encryption report", err));
    }
  }, options.diskEncryptionCheckMs ?? 600_000);
  // A disk that appears or goes (plugged in, formatted with LUKS, an image file created) is inventoried at once:
  // the configured devices, or the kernel's disk links when every disk is inventoried.
  const diskWatcher = new NodeWatcher({
    fs,
    logger,
    settleMs: options.nodeSettleMs,
    onChange: (paths) => {
      logger.info("disks changed; reporting the disk-encryption inventory", { paths: paths.join(",") });
      const current = client;
      if (current) {
        diskEncryption.report(current, { onlyIfChanged: true })
          .then(() => diskEncryption.runTasks(current))
          .catch((err) => sideCallFailed(current, "disk encryption report", err));
      }
      if (engine.cached().some((p) => p.type === DISK_ENCRYPTION_TYPE)) {
        resync(`disks changed: ${paths.join(", ")}`);
      }
    },
  });
  void diskWatcher.setTargets(
    config.diskEncryption.devices.length
      ? config.diskEncryption.devices
      : ["/dev/disk/by-id", "/dev/disk/by-uuid"],
  ).catch((err) =>
    logger.warn("cannot watch the disks; the inventory is checked every ten minutes", {
      error: errorText(err),
    })
  );

  const schemaCatalogue = new GSettingsCatalogueReporter();
  let schemasSent = false;
  const polkitCatalogue = new PolkitCatalogueReporter();
  async function reportCatalogues(current: PolicyClient): Promise<void> {
    const sent = await schemaCatalogue.reportIfChanged(fs, async (report) => {
      await current.reportSchemaCatalogue({ clientId, ...report }, deadline(CATALOGUE_TIMEOUT_MS));
      logger.info("GSettings schema catalogue reported", { schemas: report.schemas.length });
    });
    // Schemas installed since the last report may make Dconf keys applicable that were not.
    if (sent === "sent" && schemasSent && engine.ready) void engine.requestSync();
    if (sent === "sent") schemasSent = true;
    await polkitCatalogue.reportIfChanged(fs, runner, async (actions) => {
      await current.reportPolkitCatalogue({ clientId, actions }, deadline(CATALOGUE_TIMEOUT_MS));
      logger.info("polkit action catalogue reported", { actions: actions.length });
    });
  }

  let connection: AbortController | undefined;
  // Long-running agents renew too: the check repeats daily, and a renewal reconnects with the new
  // certificate.
  const renewTimer = setInterval(async () => {
    if (await renewWhenDue()) connection?.abort();
  }, options.renewalCheckMs ?? 86_400_000);

  // Package installs change the schemas and polkit actions: look again now and then while connected.
  const catalogueTimer = setInterval(() => {
    const current = client;
    if (current) reportCatalogues(current).catch((err) => sideCallFailed(current, "catalogue report", err));
  }, options.catalogueCheckMs ?? 600_000);

  // The safety net of the node watcher: everything is evaluated again now and then, cheap when nothing changed
  // (files are compared before they are written).
  const reevaluateTimer = setInterval(() => {
    if (engine.ready) resync("periodic re-evaluation");
  }, config.agent.reevaluateIntervalSeconds * 1000);

  // After a reboot without the server the last policy set is enforced and watched again at once.
  const stored = await store.load();
  if (stored) {
    logger.info("enforcing the policy set stored before the restart until the server answers", {
      policies: stored.policies.length,
      saved_at: stored.savedAt.toISOString(),
    });
    syncReason = "agent started with the stored policy set";
    void status.source("stored");
    engine.restore(stored.policies);
  }

  const backoff = new Backoff(options.backoff);
  const revocation = new RevocationNotice({
    logger,
    nodeName: clientId,
    everyMs: options.revocationReminderMs,
  });
  let lastRevision = 0n;
  try {
    while (!signal.aborted) {
      engine.resetStaging();
      connection = new AbortController();
      const stopConnection = () => connection?.abort();
      signal.addEventListener("abort", stopConnection, { once: true });
      const started = Date.now();
      let healthy = false;
      let ended = "policy stream ended";
      let refused: string | undefined;
      // A server that accepts the connection but never answers (a stopped or hung replica: the kernel still
      // completes the TCP handshake) is left after the silence timeout, like one that stops answering pings.
      let answered = false;
      let silent = false;
      const silenceMs = config.server.silenceTimeoutSeconds * 1000;
      let unanswered: ReturnType<typeof setTimeout> | undefined;
      try {
        identity = await loadIdentity(dataDir);
        // At start, and again on reconnects while a due renewal has not succeeded yet.
        await renewWhenDue();
        client = createPolicyClient(config.server.address, config.server.policyPort, identity, {
          silenceTimeoutMs: silenceMs,
        });
        unanswered = setTimeout(() => {
          if (answered) return;
          silent = true;
          connection?.abort();
        }, silenceMs);
        void status.connection("connecting");
        const current = client;
        (revocation.active ? logger.debug : logger.info)("connecting to the policy service", {
          server: `${config.server.address}:${config.server.policyPort}`,
          last_revision: lastRevision.toString(),
        });
        heartbeat(current).catch((err) => sideCallFailed(current, "heartbeat", err));
        fetchAgentConfig(current).catch((err) => sideCallFailed(current, "GetAgentConfig", err));
        reportCatalogues(current).catch((err) => sideCallFailed(current, "catalogue report", err));
        diskEncryption.connected(current).catch((err) => sideCallFailed(current, "disk encryption", err));
        while (pendingTamper.length) {
          const event = pendingTamper[0];
          try {
            await sendTamper(event);
            pendingTamper.shift();
          } catch {
            break;
          }
        }
        if (pendingReports && engine.ready) {
          pendingReports = false;
          void engine.requestSync();
        }
        await runStreamSession({
          client: current,
          clientId,
          lastRevision,
          engine,
          logger,
          signal: connection.signal,
          onMetadataRequest: () => {
            heartbeat(current).catch((err) => sideCallFailed(current, "heartbeat", err));
          },
          onDiskEncryptionTask: () => {
            diskEncryption.runTasks(current).catch((err) =>
              sideCallFailed(current, "disk encryption tasks", err)
            );
          },
          onInSync: (how) => {
            if (!healthy) {
              logger.info("policy stream is in sync", { how, revision: lastRevision.toString() });
              void status.connection("connected");
            }
            healthy = true;
            revocation.clear();
            backoff.reset();
          },
          onRevision: (revision) => {
            lastRevision = revision;
          },
          onAnswer: () => {
            answered = true;
          },
        });
        ended = "the server closed the policy stream";
      } catch (err) {
        if (signal.aborted) break;
        if (err instanceof GrpcError && err.code === grpc.status.UNAUTHENTICATED) {
          refused = err.message;
        } else if (silent) {
          ended = `the server did not answer within ${silenceMs / 1000} s; connecting again`;
        } else if (!connection.signal.aborted) {
          ended = `policy stream disconnected: ${errorText(err)}`;
        } else {
          ended = "reconnecting with the renewed certificate";
        }
      } finally {
        clearTimeout(unanswered);
        signal.removeEventListener("abort", stopConnection);
        client?.close();
        client = undefined;
      }
      if (signal.aborted) break;
      if (healthy || Date.now() - started >= (options.healthyAfterMs ?? 60_000)) backoff.reset();
      const delay = backoff.next();
      if (refused !== undefined) revocation.refused(refused, delay);
      else logger.warn(ended, { reconnect_in_ms: delay });
      void status.connection("disconnected", refused ?? ended);
      await sleep(delay, signal);
    }
  } finally {
    coldPages.stop();
    clearInterval(renewTimer);
    clearInterval(catalogueTimer);
    clearInterval(diskEncryptionTimer);
    clearInterval(reevaluateTimer);
    nodeWatcher.close();
    diskWatcher.close();
    await watcher.close();
    const settled = new AbortController();
    await Promise.race([engine.idle(), sleep(10_000, settled.signal)]);
    settled.abort();
    // The stream was cancelled above; give the RST_STREAM a moment on the wire before the process
    // exits, so the server marks the node offline at once instead of when the connection times out.
    await sleep(200);
  }
}
