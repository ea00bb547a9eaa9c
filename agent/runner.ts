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
  /**
   * Where programs named without a `/` are looked for, and the `PATH` the programs see; default the
   * process's `PATH`. Tests give stand-ins this way instead of changing the process environment, which
   * every test module running in parallel shares.
   */
  path?: string;
  /** Variables of the process environment that started programs must not see. */
  hideEnv?: readonly string[];
}

/** Runs external programs; see the module documentation. */
export class Runner {
  readonly #timeoutMs: number;
  readonly #historySize: number;
  readonly #history: CommandRecord[] = [];
  readonly #path: string | undefined;
  readonly #hideEnv: readonly string[];

  constructor(options: RunnerOptions = {}) {
    this.#timeoutMs = options.defaultTimeoutMs ?? 60_000;
    this.#historySize = options.historySize ?? 200;
    this.#path = options.path;
    this.#hideEnv = options.hideEnv ?? [];
  }

  /** The environment a program starts from when this runner overrides the process's, else undefined. */
  #baseEnv(): Record<string, string> | undefined {
    if (this.#path === undefined && this.#hideEnv.length === 0) return undefined;
    const env = Deno.env.toObject();
    for (const name of this.#hideEnv) delete env[name];
    if (this.#path !== undefined) env.PATH = this.#path;
    return env;
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
    const base = options.clearEnv ? undefined : this.#baseEnv();
    try {
      // With a PATH of its own the runner resolves the program itself, on that PATH only.
      const program = this.#path !== undefined && !cmd.includes("/") ? await this.which(cmd) : cmd;
      if (program === undefined) throw new Deno.errors.NotFound(`${cmd} is not on the runner's PATH`);
      const child = new Deno.Command(program, {
        args,
        env: base ? { ...base, ...options.env } : options.env,
        clearEnv: (options.clearEnv ?? false) || base !== undefined,
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
   * Finds `cmd` on the runner's `PATH` (or checks an absolute path) without running it; returns the full
   * path or undefined. Used to skip optional features silently when a tool is missing.
   */
  async which(cmd: string): Promise<string | undefined> {
    const candidates = cmd.includes("/")
      ? [cmd]
      : (this.#path ?? Deno.env.get("PATH") ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
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
