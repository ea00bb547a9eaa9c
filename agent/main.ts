/**
 * svc-agent entry point: `svc-agent [--config FILE] [--token-file FILE | --token TOKEN]`.
 *
 * With a token (or Kerberos configured and not enrolled) it enrolls, prints the next steps and
 * exits; a token given while already enrolled enrolls again and replaces the old key and certificates only
 * once the new enrollment succeeded (a failed attempt leaves the node's identity as it was).
 * Without a token it runs the daemon, which needs an earlier enrollment.
 *
 * Exit codes: 0 success, 1 failure, 2 bad command line or configuration.
 *
 * @module
 */

import { VERSION } from "../shared/version.ts";
import {
  CliError,
  NOT_ENROLLED_MESSAGE,
  parseCliArgs,
  resolveEnrollmentToken,
  TOKEN_ENV,
  USAGE,
} from "./cli.ts";
import { AgentConfigError, DEFAULT_STATUS_FILE, loadAgentConfig } from "./config.ts";
import { formatStatus, readStatus } from "./status.ts";
import { runDaemon } from "./daemon.ts";
import { ensureDataDir, isEnrolled } from "./identity.ts";
import { createLogger } from "./log.ts";

async function main(argv: string[]): Promise<number> {
  let args;
  try {
    args = parseCliArgs(argv);
  } catch (err) {
    if (!(err instanceof CliError)) throw err;
    console.error(`svc-agent: ${err.message}`);
    return 2;
  }
  if (args.help) {
    console.log(USAGE);
    return 0;
  }
  if (args.version) {
    console.log(`svc-agent ${VERSION}`);
    return 0;
  }
  if (args.status) return await printStatus(args.configPath, args.configExplicit, args.status);

  let loaded;
  let tokenChoice;
  try {
    loaded = await loadAgentConfig(args.configPath, { explicit: args.configExplicit });
    tokenChoice = await resolveEnrollmentToken(args, Deno.env.get(TOKEN_ENV));
  } catch (err) {
    if (!(err instanceof AgentConfigError) && !(err instanceof CliError)) throw err;
    console.error(`svc-agent: ${err.message}`);
    return 2;
  }
  const { config } = loaded;
  const logger = createLogger({ level: config.log.level, format: config.log.format });
  for (const warning of [...loaded.warnings, ...tokenChoice.warnings]) logger.warn(warning);
  if (args.release) {
    const { releaseAll } = await import("./release.ts");
    const outcome = await releaseAll(config, logger);
    if (outcome.remaining.length) {
      console.error(
        `svc-agent: could not take back ${
          outcome.remaining.join(", ")
        }; see the messages above, fix the cause ` +
          "and run svc-agent release again",
      );
      return 1;
    }
    console.log(`Released ${outcome.released.length} managed file(s); svc no longer changes this node.`);
    return 0;
  }

  const dataDir = config.enrollment.dataDir;
  const enrolled = await isEnrolled(dataDir);
  const kerberosPossible = config.kerberos.enabled && config.kerberos.servicePrincipal !== "";
  if (tokenChoice.token || (!enrolled && kerberosPossible)) {
    if (enrolled && tokenChoice.token) {
      logger.warn(
        "already enrolled: enrolling again; the current key and certificates are replaced once it succeeds",
        {
          data_dir: dataDir,
        },
      );
    }
    await ensureDataDir(dataDir);
    // Loaded only to enroll: the daemon does not carry the enrollment client and CSR toolkit.
    const { enroll, EnrollmentError } = await import("./enroll.ts");
    try {
      const result = await enroll({ config, configPath: args.configPath, token: tokenChoice.token, logger });
      console.log(
        `Enrolled node "${result.nodeName}" (id ${result.nodeId}) in node group "${result.nodeGroup}".
Key and certificates are in ${dataDir}.

Next steps: start the agent and enable it at boot:
  systemctl enable --now svc-agent
The node appears online once the agent has synced its policies.`,
      );
      return 0;
    } catch (err) {
      if (!(err instanceof EnrollmentError)) throw err;
      console.error(`svc-agent: ${err.message}`);
      return 1;
    }
  }
  if (!enrolled) {
    console.error(NOT_ENROLLED_MESSAGE);
    return 1;
  }

  const stop = new AbortController();
  const onSignal = () => {
    logger.info("stopping");
    stop.abort();
  };
  Deno.addSignalListener("SIGTERM", onSignal);
  Deno.addSignalListener("SIGINT", onSignal);
  logger.info(`svc-agent ${VERSION} starting`, {
    node: config.agent.clientId,
    server: config.server.address,
    root: config.agent.rootDir,
  });
  try {
    await runDaemon({ config, logger, signal: stop.signal });
    return 0;
  } catch (err) {
    logger.error("svc-agent stopped with an error", {
      error: err instanceof Error ? err.message : String(err),
    });
    return 1;
  } finally {
    Deno.removeSignalListener("SIGTERM", onSignal);
    Deno.removeSignalListener("SIGINT", onSignal);
  }
}

/**
 * `svc-agent status`: the running agent's summary. The configuration (root-only, mode 0600) only names the
 * status file; a person without root reads the default path.
 */
async function printStatus(
  configPath: string,
  explicit: boolean,
  options: { verbose: boolean; json: boolean; file?: string },
): Promise<number> {
  let path = options.file ?? DEFAULT_STATUS_FILE;
  if (!options.file) {
    try {
      path = (await loadAgentConfig(configPath, { explicit })).config.agent.statusFile;
    } catch (err) {
      if (explicit || !(err instanceof AgentConfigError) || !/denied/i.test(err.message)) {
        console.error(`svc-agent: ${(err as Error).message}`);
        return 2;
      }
    }
  }
  const status = await readStatus(path);
  if (typeof status === "string") {
    console.error(`svc-agent: ${status}`);
    return 1;
  }
  console.log(
    options.json ? JSON.stringify(status, null, 2) : formatStatus(status, { verbose: options.verbose }),
  );
  return 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
