/**
 * Measuring how long the event loop is held, for the stall test and `bench/import_stall.ts`: a timer chain
 * that records the longest gap between two turns of the loop (how long every other request and stream
 * waited), and a policy stream that only counts what it receives, so that decoding a large message on the
 * test's side (the same thread as the server) is not mistaken for a stall of the server.
 */
import { openSubscribeCall, type StreamTarget } from "./counting_stream_client.ts";
import type { Agent, AgentServer } from "./agents.ts";

/**
 * The longest the event loop was held: `wallMs` is the longest gap between two turns of the loop as a clock
 * sees it; `busyMs` is the processor time the loop's thread used within that gap's worst case (the longest
 * gap counted in the thread's own run time, from `/proc/thread-self/schedstat`). On a loaded machine a
 * thread waits for a processor too, which stretches every gap without any work of ours in it; `busyMs` leaves
 * that wait out, so it measures the work that held the loop whatever the load. Where the run time cannot be
 * read (not Linux), `busyMs` equals `wallMs`.
 */
export interface Stall {
  wallMs: number;
  busyMs: number;
}

/** A running stall monitor. */
export interface LoopMonitor {
  /** Stops the chain; returns the worst gaps seen. */
  stop(): Stall;
}

/** This thread's scheduler statistics (the test runner does not run tests on the process's first thread). */
const SCHEDSTAT = "/proc/thread-self/schedstat";

/** Run time of this (the event loop's) thread in milliseconds, or undefined where the kernel does not tell. */
function loopThreadRunMs(): number | undefined {
  try {
    return Number(Deno.readTextFileSync(SCHEDSTAT).split(" ")[0]) / 1e6;
  } catch {
    return undefined;
  }
}

/**
 * Starts a timer chain (`setTimeout(0)` after `setTimeout(0)`): every gap between two of its turns is a time
 * the loop was busy with something else, or the process was not scheduled at all (see {@link Stall}).
 */
export function monitorLoop(): LoopMonitor {
  const worst: Stall = { wallMs: 0, busyMs: 0 };
  let last = performance.now();
  let lastRun = loopThreadRunMs();
  let running = true;
  const observe = () => {
    const now = performance.now();
    const run = loopThreadRunMs();
    const wall = now - last;
    worst.wallMs = Math.max(worst.wallMs, wall);
    worst.busyMs = Math.max(worst.busyMs, run !== undefined && lastRun !== undefined ? run - lastRun : wall);
    last = now;
    lastRun = run;
  };
  const tick = () => {
    observe();
    if (running) setTimeout(tick, 0);
  };
  setTimeout(tick, 0);
  return {
    stop() {
      if (running) observe();
      running = false;
      return { ...worst };
    },
  };
}

/** Runs `work` under a {@link monitorLoop}; returns its result and the worst stall meanwhile. */
export async function stallDuring<T>(work: () => Promise<T>): Promise<{ value: T; stall: Stall }> {
  const monitor = monitorLoop();
  try {
    const value = await work();
    return { value, stall: monitor.stop() };
  } finally {
    monitor.stop();
  }
}

/**
 * Worst stall of an idle loop over `ms` milliseconds: what the machine alone (other processes, garbage
 * collection, timers of the server) costs the monitor, the baseline a measured stall is compared with.
 */
export async function idleStall(ms: number): Promise<Stall> {
  return (await stallDuring(() => new Promise((resolve) => setTimeout(resolve, ms)))).stall;
}

/**
 * Processor time `work` takes on this thread, in milliseconds (the clock's time where the kernel does not
 * tell): what the same work would hold the loop for if it ran there, the yardstick a stall is compared with.
 */
export function cpuTime(work: () => unknown): number {
  const run = loopThreadRunMs();
  const started = performance.now();
  work();
  const after = loopThreadRunMs();
  return run !== undefined && after !== undefined ? after - run : performance.now() - started;
}

/**
 * Processor time this thread spends on `work` until it settles, in milliseconds (see {@link cpuTime}); only
 * meaningful when nothing else runs on the thread meanwhile (the work itself, yielding, counts whole).
 */
export async function cpuTimeOf(work: () => Promise<unknown>): Promise<number> {
  const run = loopThreadRunMs();
  const started = performance.now();
  await work();
  const after = loopThreadRunMs();
  return run !== undefined && after !== undefined ? after - run : performance.now() - started;
}

/** Attempts of a measured step; it passes when one of them stays under its bound (see `leastStall`). */
const ATTEMPTS = 3;

/**
 * Runs `step` (after `before`, which is not measured) up to {@link ATTEMPTS} times under the stall monitor,
 * until its worst stall on the processor stays under `boundMs`; returns every stall seen. Work that holds the
 * loop does so on every attempt, whereas a garbage collection or the machine's noise rarely lands on all.
 */
export async function leastStall(options: {
  before?: (attempt: number) => Promise<void>;
  step: (attempt: number) => Promise<void>;
  boundMs: number;
}): Promise<{ passed: boolean; stalls: string }> {
  const seen: Stall[] = [];
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    await options.before?.(attempt);
    const { stall } = await stallDuring(() => options.step(attempt));
    seen.push(stall);
    if (stall.busyMs < options.boundMs) break;
  }
  return {
    passed: seen.some((s) => s.busyMs < options.boundMs),
    stalls: seen.map((s) => `${s.busyMs.toFixed(0)} ms on CPU (${s.wallMs.toFixed(0)} ms by the clock)`).join(
      ", ",
    ),
  };
}

/** A policy stream that counts messages without decoding them. */
export interface CountingStream {
  /** Messages received so far. */
  count(): number;
  /** Resolves once `n` messages have been received in all. */
  waitFor(n: number, timeoutMs?: number): Promise<void>;
  close(): void;
}

/** Options of {@linkcode countingStream}. */
export interface CountingStreamOptions {
  /**
   * Receive in a child process (tests/helpers/counting_stream_client.ts), as a real agent does on its own
   * machine: receiving a 1 MiB message (TLS, HTTP/2 frames, reassembly) then costs the measured thread nothing.
   */
  ownProcess?: boolean;
}

/** Opens `SubscribePolicyUpdates` for `agent` on `server` (revision 0: a full snapshot first). */
export function countingStream(
  server: AgentServer,
  agent: Agent,
  options: CountingStreamOptions = {},
): CountingStream {
  const counter = options.ownProcess ? childCounter(server, agent) : inProcessCounter(server, agent);
  return {
    count: () => counter.received,
    async waitFor(n, timeoutMs = 120_000) {
      const deadline = Date.now() + timeoutMs;
      while (counter.received < n) {
        if (counter.ended !== undefined) throw new Error(`policy stream ended: ${String(counter.ended)}`);
        const left = deadline - Date.now();
        if (left <= 0) {
          throw new Error(`timed out waiting for policy message #${n} (got ${counter.received})`);
        }
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            counter.waiters.delete(done);
            resolve();
          };
          const timer = setTimeout(done, left);
          counter.waiters.add(done);
        });
      }
    },
    close: () => counter.close(),
  };
}

/** What both kinds of counter share: the count, how the stream ended, who waits for news. */
interface Counter {
  received: number;
  ended: unknown;
  waiters: Set<() => void>;
  close(): void;
}

function newCounter(close: () => void): Counter & { onMessage(): void; onEnd(err: unknown): void } {
  const counter = {
    received: 0,
    ended: undefined as unknown,
    waiters: new Set<() => void>(),
    close,
    onMessage() {
      counter.received++;
      counter.waiters.forEach((w) => w());
    },
    onEnd(err: unknown) {
      counter.ended ??= err;
      counter.waiters.forEach((w) => w());
    },
  };
  return counter;
}

function childCounter(server: AgentServer, agent: Agent): Counter {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", new URL("./counting_stream_client.ts", import.meta.url).pathname],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const counter = newCounter(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
  });
  const writer = child.stdin.getWriter();
  void writer.write(new TextEncoder().encode(JSON.stringify(streamTarget(server, agent))))
    .then(() => writer.close());
  void (async () => {
    let buffered = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      buffered += chunk;
      let nl;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        buffered = buffered.slice(nl + 1);
        counter.onMessage();
      }
    }
    const why = await new Response(child.stderr).text();
    counter.onEnd(new Error(why.trim() || "stream client exited"));
  })();
  return counter;
}

function inProcessCounter(server: AgentServer, agent: Agent): Counter {
  const stream = openSubscribeCall(streamTarget(server, agent));
  const counter = newCounter(() => stream.close());
  stream.call.on("data", () => counter.onMessage());
  stream.call.on("error", (err) => counter.onEnd(err));
  stream.call.on("end", () => counter.onEnd(new Error("stream ended")));
  return counter;
}

function streamTarget(server: AgentServer, agent: Agent): StreamTarget {
  return {
    port: server.policyPort,
    caPem: server.ctx.ca.certPem,
    keyPem: agent.keyPem,
    certPem: agent.certPem,
  };
}
