/**
 * svc-server entry point.
 *
 *   svc-server [--config FILE] [--dev]
 *   svc-server kek generate|add FILE   (key-encryption key of escrowed recovery keys)
 *
 * `--dev` (used by `deno task start`) keeps everything under `./.svc-data` when no data dir is configured,
 * so the server runs on a fresh checkout without root: embedded database, generated CA and TLS material, and
 * a printed admin login.
 */
import { ConfigError, loadConfig } from "./config/config.ts";
import { startServer } from "./server.ts";
import { VERSION } from "../shared/version.ts";
import { runKekCommand } from "./disk_encryption/kek_cli.ts";

const USAGE = "usage: svc-server [--config FILE] [--dev] [--version]";

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

async function main(): Promise<void> {
  if (Deno.args[0] === "kek") Deno.exit(await runKekCommand(Deno.args.slice(1)));
  let server;
  try {
    const args = parseArgs(Deno.args);
    const config = await loadConfig({
      path: args.config ?? Deno.env.get("SVC_CONFIG") ?? "/etc/svc/server.yaml",
      explicitPath: args.config !== undefined || Deno.env.get("SVC_CONFIG") !== undefined,
      overrides: args.dev
        ? {
          "server.data_dir": ".svc-data",
          "disk_encryption.kek_file": ".svc-data/disk-encryption.kek",
          "disk_encryption.create_kek_file": true,
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

if (import.meta.main) await main();
