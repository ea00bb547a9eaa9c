/**
 * Runs a tool the tests lean on (openssl, curl, kinit, ldapadd, cryptsetup…) to its end and hands back what it
 * printed: one way for every test, so a failure always names the command and shows its output.
 */

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
  const child = new Deno.Command(cmd, {
    args: [...args],
    cwd: options.cwd,
    env: options.env,
    stdin: options.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (options.stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(options.stdin));
    await writer.close();
  }
  const out = await child.output();
  const decoder = new TextDecoder();
  const stdout = decoder.decode(out.stdout);
  const stderr = decoder.decode(out.stderr);
  return { code: out.code, stdout, stderr, output: stdout + stderr };
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
