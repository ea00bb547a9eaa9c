/**
 * Command line of svc-agent: `svc-agent [--config FILE] [--token-file FILE | --token TOKEN]`,
 * and where the enrollment token comes from: `--token-file` first, then the environment
 * variable `SVC_ENROLLMENT_TOKEN`, then the deprecated `--token` (visible to every user in the
 * process list, hence the warning).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { DEFAULT_CONFIG_PATH } from "./config.ts";

/** Environment variable holding an enrollment token. */
export const TOKEN_ENV = "SVC_ENROLLMENT_TOKEN";

/** Usage text. */
export const USAGE = `Usage: svc-agent [--config FILE] [--token-file FILE | --token TOKEN]
       svc-agent status [--config FILE | --file STATUS_FILE] [--verbose] [--json]
       svc-agent release [--config FILE]

  --config FILE      agent configuration (default ${DEFAULT_CONFIG_PATH})
  --token-file FILE  enroll with the one-time token in FILE, then exit
  --token TOKEN      deprecated: the token is visible in the process list; use --token-file
  --version          print the version and exit
  --help             print this help and exit

  status             what this node applies, from which policy and version, and why a setting is
                     not applied (read-only; no root needed); --verbose lists every setting,
                     --json prints the summary as JSON; --file reads another status file
                     than agent.status_file

  release            take back everything svc did on this node (originals restored, svc's
                     Flatpaks and remotes removed); the package runs it when the agent is
                     removed. Stop the service first.

Environment: ${TOKEN_ENV}=TOKEN enrolls like --token-file (which takes precedence).
Without a token the agent runs as a daemon; it must be enrolled first.`;

/** Message when the agent is neither enrolled nor given a token (spec: agent interface). */
export const NOT_ENROLLED_MESSAGE = `svc-agent is not enrolled and no enrollment token was provided.
Create a one-time token for a node group (web UI: Node groups → enrollment token, or
POST /api/v1/node-groups/{id}/tokens) and enroll with one of:
  svc-agent --token-file /path/to/token
  ${TOKEN_ENV}=<token> svc-agent`;

/** Parsed command line. */
export interface CliArgs {
  configPath: string;
  /** Whether `--config` was given. */
  configExplicit: boolean;
  tokenFile?: string;
  token?: string;
  help: boolean;
  version: boolean;
  /** `release`: undo every effect of svc on the node and exit. */
  release?: boolean;
  /** `status`: print the running agent's summary and exit. */
  status?: { verbose: boolean; json: boolean; file?: string };
}

/** A command-line mistake; the message says what to fix. */
export class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CliError";
  }
}

/**
 * Parses the arguments.
 *
 * @throws {CliError} on unknown options, missing values or stray arguments.
 */
export function parseCliArgs(argv: readonly string[]): CliArgs {
  if (argv[0] === "status") return parseStatusArgs(argv.slice(1));
  if (argv[0] === "release") return { ...parseCliArgs(argv.slice(1)), release: true };
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: {
        config: { type: "string" },
        "token-file": { type: "string" },
        token: { type: "string" },
        help: { type: "boolean", short: "h" },
        version: { type: "boolean" },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (err) {
    throw new CliError(`${(err as Error).message}\n\n${USAGE}`);
  }
  const { values } = parsed;
  for (const name of ["config", "token-file"] as const) {
    if (values[name] !== undefined && values[name] === "") throw new CliError(`--${name} needs a value`);
  }
  return {
    configPath: values.config ?? DEFAULT_CONFIG_PATH,
    configExplicit: values.config !== undefined,
    tokenFile: values["token-file"],
    token: values.token,
    help: values.help ?? false,
    version: values.version ?? false,
  };
}

function parseStatusArgs(argv: readonly string[]): CliArgs {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        config: { type: "string" },
        verbose: { type: "boolean", short: "v" },
        json: { type: "boolean" },
        file: { type: "string" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new CliError(`${(err as Error).message}\n\n${USAGE}`);
  }
  return {
    configPath: values.config ?? DEFAULT_CONFIG_PATH,
    configExplicit: values.config !== undefined,
    help: false,
    version: false,
    status: { verbose: values.verbose ?? false, json: values.json ?? false, file: values.file },
  };
}

/** The chosen token, where it came from, and warnings to print. */
export interface TokenChoice {
  token?: string;
  source?: "token-file" | "environment" | "command line";
  warnings: string[];
}

/**
 * Picks the enrollment token by precedence: `--token-file` > `SVC_ENROLLMENT_TOKEN` > `--token`.
 * Using `--token` always prints a deprecation warning.
 *
 * @throws {CliError} when the token file cannot be read or is empty.
 */
export async function resolveEnrollmentToken(
  args: CliArgs,
  envToken: string | undefined,
): Promise<TokenChoice> {
  const warnings: string[] = [];
  if (args.token !== undefined) {
    warnings.push(
      "--token is deprecated: the token is visible to every user in the process list; " +
        `use --token-file FILE or ${TOKEN_ENV} instead`,
    );
  }
  if (args.tokenFile !== undefined) {
    let text: string;
    try {
      text = await Deno.readTextFile(args.tokenFile);
    } catch (err) {
      throw new CliError(`cannot read the token file ${args.tokenFile}: ${(err as Error).message}`);
    }
    const token = text.trim();
    if (token === "") throw new CliError(`the token file ${args.tokenFile} is empty`);
    if (args.token !== undefined || envToken?.trim()) {
      warnings.push(`using the token from --token-file; the other token given is ignored`);
    }
    return { token, source: "token-file", warnings };
  }
  if (envToken !== undefined && envToken.trim() !== "") {
    if (args.token !== undefined) warnings.push(`using the token from ${TOKEN_ENV}; --token is ignored`);
    return { token: envToken.trim(), source: "environment", warnings };
  }
  if (args.token !== undefined && args.token.trim() !== "") {
    return { token: args.token.trim(), source: "command line", warnings };
  }
  return { warnings };
}
