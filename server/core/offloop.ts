/**
 * The off-loop worker pool: work too heavy for the server's event loop runs in a worker thread, with a
 * bounded number of jobs at a time per lane and a deadline. Two lanes: content work (bundles, policy content,
 * large JSON bodies and answers, stream members) and password hashing, so a login never queues behind a
 * large import. When no worker can be started (a build that did not ship the worker module), the job runs
 * in-process: correct, but then it blocks the loop while it runs, and a warning says so once.
 *
 * The pool knows no job: each floor declares its own with {@link defineOffLoopJob} beside the pure function
 * the job runs (policy content and bundles in server/domain/content_offloop.ts, stream members in
 * server/hub/typed_content.ts, JSON bodies in server/http/json_body.ts, passwords in server/auth/argon2.ts),
 * and gets back the function that runs it off the loop. The worker entry (server/offloop/worker.ts, at the
 * top of the house) imports those modules, which registers the same jobs in the worker; this file only
 * computes the worker's address, so the ground floor imports nothing above it.
 */
import { DomainError, type DomainErrorKind, type DomainFieldError, invalidError } from "./errors.ts";

/** A job as it travels to a worker: `op` names a job declared with {@link defineOffLoopJob}; the rest is its input. */
export type OffLoopJob = { readonly op: string } & Readonly<Record<string, unknown>>;

/**
 * The answer to a job: its value, or the error it threw (domain errors keep kind and fields; the errors a
 * job declares as bad input are `invalid`).
 */
export type OffLoopAnswer =
  | { ok: true; value: unknown }
  | { ok: false; kind: DomainErrorKind | "internal"; message: string; fields?: DomainFieldError[] };

/** The lanes: content work, and password hashing (which must never wait behind an import). */
export type OffLoopLane = "content" | "password";

interface JobKind {
  run: (job: OffLoopJob) => unknown;
  lane: OffLoopLane;
  invalidWhen?: (err: unknown) => boolean;
}

/** The jobs declared in this thread (the server's, or a worker's: each imports the same declaring modules). */
const jobKinds = new Map<string, JobKind>();

/**
 * Declares the job `op`, which runs `run` on its input (pure: no database, so any worker runs it), and
 * returns the function that runs it in a worker. `lane` is `password` for password hashing; `invalidWhen`
 * names the errors `run` throws for bad input (answered as `invalid` with their message). The module that
 * declares a job must be imported by server/offloop/worker.ts.
 */
export function defineOffLoopJob<I extends Record<string, unknown>, V>(
  op: string,
  run: (input: I) => V | Promise<V>,
  options: { lane?: OffLoopLane; invalidWhen?: (err: unknown) => boolean } = {},
): (input: I) => Promise<V> {
  if (jobKinds.has(op)) throw new Error(`off-loop job ${op} is declared twice`);
  jobKinds.set(op, {
    run: run as (job: OffLoopJob) => unknown,
    lane: options.lane ?? "content",
    invalidWhen: options.invalidWhen,
  });
  return async (input) => await runOffLoop({ ...input, op }) as V;
}

/** Runs `job` here and now. */
export async function runJob(job: OffLoopJob): Promise<OffLoopAnswer> {
  const kind = jobKinds.get(job.op);
  try {
    if (!kind) throw new Error(`no off-loop job ${job.op} is declared in this thread`);
    return { ok: true, value: await kind.run(job) };
  } catch (err) {
    if (err instanceof DomainError) {
      return { ok: false, kind: err.kind, message: err.message, fields: err.fields };
    }
    if (kind?.invalidWhen?.(err)) return { ok: false, kind: "invalid", message: (err as Error).message };
    if (err instanceof RangeError) {
      return { ok: false, kind: "invalid", message: `bundle is too complex to process: ${err.message}` };
    }
    return { ok: false, kind: "internal", message: (err as Error).message };
  }
}

/**
 * Test hook: when set, awaited on the server's thread while a job is in its worker, before the answer is
 * used; a test makes a job as slow as it needs (e.g. to look at the database meanwhile) without timing.
 */
export const offLoopHooks: { whileInWorker?: (job: OffLoopJob) => Promise<void> } = {};

/**
 * Most jobs of one lane running at once; more wait their turn (each holds one worker thread). Content and
 * password jobs have a lane each, so up to twice this many workers run.
 */
export const MAX_PARALLEL_JOBS = 2;
/**
 * Longest a job may take before its worker is stopped and the request refused. Far above what the size and
 * node limits allow (about 2 s on a loaded machine); it only stops a job that something unforeseen makes slow.
 */
export const JOB_DEADLINE_MS = 60_000;

/**
 * The worker module: server/offloop/worker.ts in a checkout or a compiled build (which includes it),
 * `worker.js` beside the one-module bundle of the portable build (packaging/program.ts bundles it there).
 * A URL, not an import: the worker entry imports every floor that declares a job.
 */
const WORKER_URL = new URL(
  import.meta.url.endsWith(".ts") ? "../offloop/worker.ts" : "./worker.js",
  import.meta.url,
);
let workerUnavailable = false;

/** The jobs of one lane: how many run, and who waits for a turn. */
interface Lane {
  running: number;
  waiting: (() => void)[];
}

const lanes = { content: { running: 0, waiting: [] } as Lane, password: { running: 0, waiting: [] } as Lane };

function laneOf(job: OffLoopJob): Lane {
  return jobKinds.get(job.op)?.lane === "password" ? lanes.password : lanes.content;
}

async function acquire(lane: Lane): Promise<void> {
  if (lane.running < MAX_PARALLEL_JOBS) {
    lane.running++;
    return;
  }
  await new Promise<void>((resolve) => lane.waiting.push(resolve));
}

function release(lane: Lane): void {
  const next = lane.waiting.shift();
  if (next) next();
  else lane.running--;
}

function answerValue<T>(answer: OffLoopAnswer): T {
  if (answer.ok) return answer.value as T;
  if (answer.kind === "internal") throw new Error(answer.message);
  throw new DomainError(answer.kind, answer.message, answer.fields);
}

/**
 * Runs `job` in a worker thread and returns its value (or throws its error). The functions that
 * {@link defineOffLoopJob} returns call this with their job; tests call it with a job message as is.
 */
export async function runOffLoop<T = unknown>(job: OffLoopJob): Promise<T> {
  const lane = laneOf(job);
  await acquire(lane);
  try {
    if (workerUnavailable) return answerValue<T>(await runJob(job));
    const answering = inWorker(job);
    if (offLoopHooks.whileInWorker) {
      // Keep a rejection from going unhandled while the hook runs; it is thrown below.
      answering.catch(() => {});
      await offLoopHooks.whileInWorker(job);
    }
    const answer = await answering;
    return answerValue<T>(answer ?? await runJob(job));
  } finally {
    release(lane);
  }
}

/**
 * How long a worker waits for its next job before it is stopped. Starting a worker costs the starting thread
 * 10–30 ms (a new isolate), so workers are kept for the next job rather than started per job; an idle worker
 * also keeps the process alive, so it does not wait forever.
 */
export const WORKER_IDLE_MS = 5_000;

interface PooledWorker {
  worker: Worker;
  idleTimer?: ReturnType<typeof setTimeout>;
}

/** Workers waiting for a job (at most {@link MAX_PARALLEL_JOBS}: one per running job before). */
const idleWorkers: PooledWorker[] = [];

/** An idle worker, or a new one; undefined when none can be started. */
function takeWorker(): PooledWorker | undefined {
  const pooled = idleWorkers.pop();
  if (pooled) {
    clearTimeout(pooled.idleTimer);
    return pooled;
  }
  try {
    return { worker: new Worker(WORKER_URL.href, { type: "module" }) };
  } catch (err) {
    unavailable(err);
    return undefined;
  }
}

function giveBack(pooled: PooledWorker): void {
  pooled.worker.onmessage = null;
  // An idle worker that fails (say its module cannot load) leaves the pool instead of failing the process.
  pooled.worker.onerror = (event) => {
    event.preventDefault();
    dropIdle(pooled);
  };
  if (warmHolders > 0 && !idleWorkers.some((idle) => idle.idleTimer === undefined)) {
    // The one warm worker waits without a deadline: starting a worker later would stall the loop.
    pooled.idleTimer = undefined;
    idleWorkers.push(pooled);
    return;
  }
  const timer = setTimeout(() => dropIdle(pooled), WORKER_IDLE_MS);
  Deno.unrefTimer(timer);
  pooled.idleTimer = timer;
  idleWorkers.push(pooled);
}

function dropIdle(pooled: PooledWorker): void {
  clearTimeout(pooled.idleTimer);
  const at = idleWorkers.indexOf(pooled);
  if (at >= 0) idleWorkers.splice(at, 1);
  pooled.worker.terminate();
}

/** The idle workers: how many, and how many of them wait without a deadline (the warm one). */
export function workerPool(): { idle: number; warm: number } {
  return {
    idle: idleWorkers.length,
    warm: idleWorkers.filter((idle) => idle.idleTimer === undefined).length,
  };
}

/** Running servers that asked for a warm worker ({@link keepWorkerWarm}). */
let warmHolders = 0;

/**
 * Keeps one idle worker ready until the returned function is called (a server calls this at start and the
 * returned function at stop). `new Worker` blocks the starting thread for 100–160 ms on a loaded machine, so
 * a server that let its last worker time out would stall every other request at the next large import; the
 * warm worker costs an idle isolate's memory instead. The worker starts now, while the server is starting.
 */
export function keepWorkerWarm(): () => void {
  warmHolders++;
  if (!workerUnavailable && !idleWorkers.some((idle) => idle.idleTimer === undefined)) {
    // An idle worker with a deadline becomes the warm one; otherwise a new one starts.
    const pooled = takeWorker();
    if (pooled) giveBack(pooled);
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    warmHolders--;
    if (warmHolders === 0) closeWorkers();
  };
}

/** Stops the idle workers now (at shutdown, or at the end of a benchmark, so the process can exit). */
export function closeWorkers(): void {
  for (const pooled of [...idleWorkers]) dropIdle(pooled);
}

/** The worker's answer, or undefined when no worker could be started. */
function inWorker(job: OffLoopJob): Promise<OffLoopAnswer | undefined> {
  return new Promise((resolve, reject) => {
    const pooled = takeWorker();
    if (!pooled) return resolve(undefined);
    const { worker } = pooled;
    const timer = setTimeout(() => {
      worker.terminate();
      const seconds = JOB_DEADLINE_MS / 1000;
      reject(
        laneOf(job) === lanes.password
          ? new Error(`password hashing took longer than ${seconds} s; the server is overloaded`)
          : invalidError(`bundle took longer than ${seconds} s to process; split it into smaller bundles`),
      );
    }, JOB_DEADLINE_MS);
    worker.onmessage = (event: MessageEvent<OffLoopAnswer>) => {
      clearTimeout(timer);
      giveBack(pooled);
      resolve(event.data);
    };
    worker.onerror = (event) => {
      event.preventDefault();
      clearTimeout(timer);
      worker.terminate();
      if (/module|import|not found/i.test(event.message ?? "")) {
        unavailable(event.message);
        resolve(undefined);
      } else {
        reject(new Error(`off-loop worker failed: ${event.message}`));
      }
    };
    worker.postMessage(job);
  });
}

function unavailable(reason: unknown): void {
  if (workerUnavailable) return;
  workerUnavailable = true;
  console.warn(
    `off-loop worker unavailable (${
      String(reason)
    }); imports, exports, large content and password hashing run on the main thread and delay other requests`,
  );
}
