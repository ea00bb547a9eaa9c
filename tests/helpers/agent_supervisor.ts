/**
 * A stand-in for systemd running svc-agent: reads the unit's Restart= settings and starts the agent again when
 * its process ends the way those settings restart (systemd.service(5), "Restart="), so tests and benchmarks can
 * kill the agent by any signal and watch what its unit would bring back. The agent's output of every start is
 * kept in one text, so positions taken before a crash stay valid after it.
 */
import { AGENT_MAIN, eventually } from "./agent_process.ts";

/** A systemd unit file as sections of keys, each with its values in order (a key may repeat). */
export type Unit = Map<string, Map<string, string[]>>;

/** Parses a unit file (comments, sections, `Key=value`, backslash continuations). */
export function parseUnit(text: string): Unit {
  const unit: Unit = new Map();
  let section: Map<string, string[]> | undefined;
  const lines = text.replace(/\\\n/g, " ").split("\n");
  for (const raw of lines) {
    const line = raw.trim();
    if (!line || line.startsWith("#") || line.startsWith(";")) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = unit.get(header[1]) ?? new Map();
      unit.set(header[1], section);
      continue;
    }
    const eq = line.indexOf("=");
    if (!section || eq < 1) throw new Error(`unit file: cannot read line "${line}"`);
    const key = line.slice(0, eq).trim();
    section.set(key, [...(section.get(key) ?? []), line.slice(eq + 1).trim()]);
  }
  return unit;
}

/** The last value of `key` in `section` (systemd: the last assignment wins), or undefined. */
export function unitValue(unit: Unit, section: string, key: string): string | undefined {
  return unit.get(section)?.get(key)?.at(-1);
}

/** A systemd time span ("30", "30s", "1min 30s", "500ms", "infinity") in milliseconds. */
export function timeSpanMs(value: string): number {
  if (value === "infinity") return Infinity;
  const units: Record<string, number> = {
    "": 1000,
    us: 0.001,
    ms: 1,
    s: 1000,
    sec: 1000,
    m: 60_000,
    min: 60_000,
    h: 3_600_000,
    hr: 3_600_000,
  };
  let total = 0;
  const parts = value.trim().split(/\s+/);
  for (const part of parts) {
    const m = /^(\d+(?:\.\d+)?)([a-z]*)$/.exec(part);
    if (!m || !(m[2] in units)) throw new Error(`unit file: "${value}" is not a time span`);
    total += Number(m[1]) * units[m[2]];
  }
  return total;
}

/** How a main process ended: its exit code, or the signal that killed it. */
export interface ProcessEnd {
  code: number;
  signal: Deno.Signal | null;
}

/** Signals after which systemd counts a stop as clean (systemd.service(5)). */
const CLEAN_SIGNALS: ReadonlySet<string> = new Set(["SIGHUP", "SIGINT", "SIGTERM", "SIGPIPE"]);

/**
 * Whether systemd restarts a service whose main process ended so, under `Restart=` `policy` (the table
 * "Exit causes and the effect of the Restart= settings" of systemd.service(5), for a process that ended by
 * itself: no timeout, no watchdog).
 */
export function systemdRestarts(policy: string, end: ProcessEnd): boolean {
  const uncleanSignal = end.signal !== null && !CLEAN_SIGNALS.has(end.signal);
  const uncleanCode = end.signal === null && end.code !== 0;
  switch (policy) {
    case "no":
      return false;
    case "always":
      return true;
    case "on-success":
      return !uncleanSignal && !uncleanCode;
    case "on-failure":
      return uncleanSignal || uncleanCode;
    case "on-abnormal":
    case "on-abort":
      return uncleanSignal;
    default:
      throw new Error(`unit file: Restart=${policy} is not a value systemd knows`);
  }
}

/** Options of {@linkcode superviseAgent}. */
export interface SupervisorOptions {
  configPath: string;
  env: Record<string, string>;
  /** The unit's Restart= value. */
  restart: string;
  /** Milliseconds between an end and the next start (the unit's RestartSec=, possibly scaled down). */
  restartDelayMs: number;
  /** Runtime and arguments before `--config` (default: this Deno running agent/main.ts from source). */
  command?: { program: string; args: string[] };
  /** Working directory of the agent (where a core dump lands). */
  cwd?: string;
  /** Enables core dumps (ulimit -c unlimited) for the agent. */
  coreDumps?: boolean;
  /** Called with every end of the agent's process. */
  onEnd?: (end: ProcessEnd, run: number) => void;
}

/** One agent under supervision. */
export interface SupervisedAgent {
  /** The output of every run so far, each run's preceded by a `--- start N ---` line. */
  output(): string;
  /** Runs started so far. */
  starts(): number;
  /** How each run that ended, ended. */
  ends(): ProcessEnd[];
  /** Sends `signal` to the running agent (nothing when none runs). */
  kill(signal: Deno.Signal): void;
  /**
   * Makes the running agent crash for real with SIGSEGV: a debugger sets its main thread's instruction pointer
   * to address 0. (`kill -SEGV` is no crash: the runtime catches SIGSEGV, and a signal sent by another process
   * leaves it running or ending with an exit code.)
   */
  segfault(): Promise<void>;
  /** Waits until `pattern` appears in the output after position `from`. */
  waitForLog(pattern: RegExp, timeoutMs?: number, from?: number): Promise<void>;
  /** Waits until `count` runs have started. */
  waitForStart(count: number, timeoutMs?: number): Promise<void>;
  /** Stops supervising and ends the running agent with SIGKILL. */
  stop(): Promise<void>;
}

/** Runs the agent daemon and restarts it as its unit would; see the module documentation. */
export function superviseAgent(options: SupervisorOptions): SupervisedAgent {
  let out = "";
  let starts = 0;
  const ends: ProcessEnd[] = [];
  let child: Deno.ChildProcess | undefined;
  let stopped = false;
  let wake: (() => void) | undefined;
  const program = options.command?.program ?? Deno.execPath();
  const args = [...(options.command?.args ?? ["run", "-A", AGENT_MAIN]), "--config", options.configPath];

  const runOnce = async () => {
    starts++;
    out += `--- start ${starts} ---\n`;
    // With core dumps, a shell raises the core size limit and then becomes the agent (same pid).
    child = new Deno.Command(options.coreDumps ? "sh" : program, {
      args: options.coreDumps ? ["-c", 'ulimit -c unlimited && exec "$@"', "sh", program, ...args] : args,
      cwd: options.cwd,
      env: { NO_COLOR: "1", ...options.env },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const pump = async (stream: ReadableStream<Uint8Array>) => {
      for await (const chunk of stream.pipeThrough(new TextDecoderStream())) out += chunk;
    };
    const pumps = Promise.all([pump(child.stdout), pump(child.stderr)]);
    const status = await child.status;
    await pumps;
    const end = { code: status.code, signal: status.signal };
    ends.push(end);
    out += `--- run ${starts} ended: code ${end.code}${end.signal ? ` (${end.signal})` : ""} ---\n`;
    options.onEnd?.(end, starts);
    return end;
  };

  const running = (async () => {
    while (!stopped) {
      const end = await runOnce();
      if (stopped || !systemdRestarts(options.restart, end)) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, options.restartDelayMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  })();

  return {
    output: () => out,
    starts: () => starts,
    ends: () => [...ends],
    kill(signal) {
      try {
        child?.kill(signal);
      } catch { /* already gone */ }
    },
    async segfault() {
      if (!child) throw new Error("no agent runs");
      const out = await new Deno.Command("gdb", {
        args: ["-p", String(child.pid), "-batch", "-nx", "-ex", "set $pc = 0", "-ex", "detach"],
        stdout: "piped",
        stderr: "piped",
      }).output().catch((err) => {
        throw new Error(`cannot crash the agent with gdb (install Debian's gdb package): ${err.message}`);
      });
      if (!out.success) {
        throw new Error(`gdb could not crash the agent:\n${new TextDecoder().decode(out.stderr)}`);
      }
    },
    async waitForLog(pattern, timeoutMs = 30_000, from = 0) {
      await eventually(() => pattern.test(out.slice(from)), timeoutMs, `agent log ${pattern}`, () => out);
    },
    async waitForStart(count, timeoutMs = 30_000) {
      await eventually(() => starts >= count, timeoutMs, `agent start ${count}`, () => out);
    },
    async stop() {
      stopped = true;
      wake?.();
      try {
        child?.kill("SIGKILL");
      } catch { /* already gone */ }
      await running;
    },
  };
}
