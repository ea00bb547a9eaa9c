/**
 * Runs a tool the tests lean on (openssl, curl, kdb5_util, ldapadd, cryptsetup…) to its end and hands back
 * what it printed: one way for every test, so a failure always names the command and shows its output. The
 * agent's runner (agent/runner.ts) does the running; a missing tool exits 127 with "command not found".
 */
import { Runner } from "../../agent/runner.ts";

/** A limit no tool a test runs comes near (building a Flatpak repository on a loaded machine included). */
const runner = new Runner({ defaultTimeoutMs: 600_000, historySize: 0 });

/** What a finished command left. */
export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout followed by stderr: what a person at a terminal would have seen. */
  output: string;
}

/** Where and how to run a command. */
export interface CommandOptions {
  cwd?: string;
  /** Added to (or overriding) this process's environment. */
  env?: Record<string, string>;
  /** Written to the command's standard input, which is closed after it (without it: no input at all). */
  stdin?: string;
}

/** Runs `cmd` with `args` and answers its exit code and output, whatever the exit code. */
export async function runCommand(
  cmd: string,
  args: readonly string[],
  options: CommandOptions = {},
): Promise<CommandResult> {
  const { code, stdout, stderr } = await runner.run(cmd, [...args], options);
  return { code, stdout, stderr, output: stdout + stderr };
}

/** As {@link runCommand}, but a non-zero exit throws an error naming the command and showing its output. */
export async function mustRun(
  cmd: string,
  args: readonly string[],
  options: CommandOptions = {},
): Promise<CommandResult> {
  const result = await runCommand(cmd, args, options);
  if (result.code !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} failed (exit ${result.code}):\n${result.output}`);
  }
  return result;
}

/** What a spawned child prints, collected as it comes. */
export interface FollowedOutput {
  /** Both streams, interleaved as they arrived. */
  all(): string;
  stdout(): string;
  stderr(): string;
  /** Settles when both streams have ended. */
  closed: Promise<void>;
}

/** Follows the output of `child`, whose stdout and stderr must be "piped". */
export function followOutput(child: Deno.ChildProcess): FollowedOutput {
  let all = "";
  const streams = { stdout: "", stderr: "" };
  const pump = async (name: "stdout" | "stderr") => {
    for await (const chunk of child[name].pipeThrough(new TextDecoderStream())) {
      streams[name] += chunk;
      all += chunk;
    }
  };
  return {
    all: () => all,
    stdout: () => streams.stdout,
    stderr: () => streams.stderr,
    closed: Promise.all([pump("stdout"), pump("stderr")]).then(() => {}),
  };
}

/** A Deno program run as a child with its output followed ({@link spawnDeno}). */
export interface DenoChild {
  child: Deno.ChildProcess;
  followed: FollowedOutput;
  /** Its exit code once it has ended. */
  exitCode(): number | undefined;
  /** Settles with its exit code when it ends. */
  status: Promise<number>;
}

/** Runs `deno run -A <args>` (no colours, `env` added) with both streams followed. */
export function spawnDeno(args: string[], env: Record<string, string> = {}): DenoChild {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", ...args],
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let exited: number | undefined;
  return {
    child,
    followed: followOutput(child),
    exitCode: () => exited,
    status: child.status.then((s) => (exited = s.code)),
  };
}
