/**
 * The one way the agent runs external programs: asynchronous (the stream and the tamper watcher
 * keep running), with a timeout, captured output, an explicit environment and a fixed argument
 * vector (never a shell), and a record of what ran so tests can see it.
 *
 * @module
 */

/** Options for one command. */
export interface RunOptions {
  /** Milliseconds before the process is killed; default the runner's. */
  timeoutMs?: number;
  /** Variables to set. */
  env?: Record<string, string>;
  /** Start from an empty environment (only `env` is passed); default false. */
  clearEnv?: boolean;
  /** Working directory. */
  cwd?: string;
  /** Text written to the process's stdin. */
  stdin?: string;
}

/** What a command did. */
export interface RunResult {
  /** Exit code; 127 when the program was not found, -1 when killed by the timeout. */
  code: number;
  success: boolean;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  notFound: boolean;
}

/** One entry of the runner's history. */
export interface CommandRecord {
  cmd: string;
  args: string[];
  env?: Record<string, string>;
  result: RunResult;
}

/** Options of {@linkcode Runner}. */
export interface RunnerOptions {
  /** Default timeout in milliseconds; default 60 s. */
  defaultTimeoutMs?: number;
  /** How many finished commands {@linkcode Runner.history} keeps; default 200. */
  historySize?: number;
}

/** Runs external programs; see the module documentation. */
export class Runner {
  readonly #timeoutMs: number;
  readonly #historySize: number;
  readonly #history: CommandRecord[] = [];

  constructor(options: RunnerOptions = {}) {
    this.#timeoutMs = options.defaultTimeoutMs ?? 60_000;
    this.#historySize = options.historySize ?? 200;
  }

  /** The most recent commands, oldest first. */
  get history(): readonly CommandRecord[] {
    return this.#history;
  }

  /** Runs `cmd` with `args` and resolves when it exits or is killed by the timeout. */
  async run(cmd: string, args: string[], options: RunOptions = {}): Promise<RunResult> {
    const abort = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      abort.abort();
    }, options.timeoutMs ?? this.#timeoutMs);
    let result: RunResult;
    try {
      const child = new Deno.Command(cmd, {
        args,
        env: options.env,
        clearEnv: options.clearEnv ?? false,
        cwd: options.cwd,
        stdin: options.stdin === undefined ? "null" : "piped",
        stdout: "piped",
        stderr: "piped",
        signal: abort.signal,
      }).spawn();
      if (options.stdin !== undefined) {
        const writer = child.stdin.getWriter();
        await writer.write(new TextEncoder().encode(options.stdin)).catch(() => {});
        await writer.close().catch(() => {});
      }
      const out = await child.output();
      const decoder = new TextDecoder();
      result = {
        code: timedOut ? -1 : out.code,
        success: out.success && !timedOut,
        stdout: decoder.decode(out.stdout),
        stderr: decoder.decode(out.stderr),
        timedOut,
        notFound: false,
      };
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
      result = {
        code: 127,
        success: false,
        stdout: "",
        stderr: `${cmd}: command not found`,
        timedOut: false,
        notFound: true,
      };
    } finally {
      clearTimeout(timer);
    }
    this.#history.push({ cmd, args: [...args], env: options.env, result });
    if (this.#history.length > this.#historySize) this.#history.shift();
    return result;
  }

  /**
   * Finds `cmd` on `PATH` (or checks an absolute path) without running it; returns the full
   * path or undefined. Used to skip optional features silently when a tool is missing.
   */
  async which(cmd: string): Promise<string | undefined> {
    const candidates = cmd.includes("/")
      ? [cmd]
      : (Deno.env.get("PATH") ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .split(":").filter((d) => d !== "").map((d) => `${d}/${cmd}`);
    for (const path of candidates) {
      try {
        const info = await Deno.stat(path);
        if (info.isFile && ((info.mode ?? 0) & 0o111) !== 0) return path;
      } catch {
        // not in this directory
      }
    }
    return undefined;
  }
}
