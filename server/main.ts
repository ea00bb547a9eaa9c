/**
 * svc-server entry point.
 *
 *   svc-server [--config FILE] [--dev]
 *   svc-server kek generate|add FILE [--for ca|disk-encryption]   (key-encryption key files)
 *   svc-server reset-admin|migrate|create-token|check-config …   (admin commands: server/cli/admin.ts)
 *
 * `--dev` (used by `deno task start`) keeps everything under `./.svc-data` when no data dir is configured,
 * so the server runs on a fresh checkout without root: embedded database, generated CA and TLS material, and
 * a printed admin login.
 */
import { ConfigError, loadConfig } from "./config/config.ts";
import { startServer } from "./server.ts";
import { VERSION } from "../shared/version.ts";
import { runKekCommand } from "./disk_encryption/kek_cli.ts";
import { ADMIN_COMMANDS, DEV_OVERRIDES, runAdminCommand } from "./cli/admin.ts";
import { POLICY_WORKER_COMMAND } from "./workers/protocol.ts";
import { runPolicyWorker } from "./workers/policy_worker.ts";

const USAGE = `usage: svc-server [--config FILE] [--dev] [--version]
       svc-server COMMAND [--help]   commands: ${ADMIN_COMMANDS.join(", ")}, kek`;

function parseArgs(args: string[]): { config?: string; dev: boolean } {
  const out: { config?: string; dev: boolean } = { dev: false };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--dev") out.dev = true;
    else if (a === "--config") {
      if (!args[i + 1]) throw new ConfigError(`--config needs a file path\n${USAGE}`);
      out.config = args[++i];
    } else if (a.startsWith("--config=")) out.config = a.slice("--config=".length);
    else if (a === "--version") {
      console.log(VERSION);
      Deno.exit(0);
    } else if (a === "--help" || a === "-h") {
      console.log(USAGE);
      Deno.exit(0);
    } else throw new ConfigError(`unknown argument ${a}\n${USAGE}`);
  }
  return out;
}

/** Runs the server from the command line (exported for the bundled build's entry module). */
export async function main(): Promise<void> {
  if (Deno.args[0] === POLICY_WORKER_COMMAND) await runPolicyWorker();
  if (Deno.args[0] === "kek") Deno.exit(await runKekCommand(Deno.args.slice(1)));
  if ((ADMIN_COMMANDS as readonly string[]).includes(Deno.args[0])) {
    Deno.exit(await runAdminCommand(Deno.args));
  }
  let server;
  try {
    const args = parseArgs(Deno.args);
    const config = await loadConfig({
      path: args.config ?? Deno.env.get("SVC_CONFIG") ?? "/etc/svc/server.yaml",
      explicitPath: args.config !== undefined || Deno.env.get("SVC_CONFIG") !== undefined,
      overrides: args.dev
        ? {
          ...DEV_OVERRIDES,
          // The agent repository `deno task build` left behind, unless one is configured.
          ...(!Deno.env.get("SVC_AGENT_REPO_DIR") && await isDir("dist/agent-repo")
            ? { "agent_repo.dir": "dist/agent-repo" }
            : {}),
        }
        : {},
    });
    server = await startServer(config);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`svc-server: configuration error: ${err.message}`);
      Deno.exit(2);
    }
    console.error(`svc-server: cannot start: ${(err as Error).message}`);
    Deno.exit(1);
  }
  const running = server;
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    running.ctx.log.info("svc-server stopping", { signal });
    const timer = setTimeout(() => Deno.exit(1), 15_000);
    await running.stop();
    clearTimeout(timer);
    Deno.exit(0);
  };
  Deno.addSignalListener("SIGTERM", () => shutdown("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => shutdown("SIGINT"));
}

async function isDir(path: string): Promise<boolean> {
  return await Deno.stat(path).then((s) => s.isDirectory, () => false);
}

if (import.meta.main) await main();
