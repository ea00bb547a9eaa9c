/**
 * Work too heavy for the server's event loop, and the workers that do it: the jobs ({@link runJob}), and
 * {@link runOffLoop}, which runs one in a worker with a bounded number of jobs at a time per lane and a
 * deadline. Two lanes: content work (bundles, policy content, large JSON bodies and answers, stream members)
 * and password hashing, so a login never queues behind a large import. When no worker can be started (a
 * build that did not ship `worker.ts`), the job runs in-process: correct, but then it blocks the loop while
 * it runs, and a warning says so once.
 *
 * Policy content goes through {@link checkContentOffLoop}: small content (the common case) is checked on the
 * calling thread, which takes well under a few milliseconds; larger content is checked in a worker, and the
 * result ({@link CheckedContent}) is handed to the policy domain, which then stores it without checking again.
 * The same worker encodes large delivered content as the stream's content and typed members once per content
 * (`server/hub/typed_content_cache.ts`), so no snapshot parses it on the loop.
 */
import {
  type BundleFormat,
  checkBundle,
  checkContent,
  type CheckedBundle,
  type CheckedContent,
  type ExportBindingRow,
  type ExportPolicyRow,
  type RenderedExport,
  renderExport,
} from "../domain/bundle_codec.ts";
import { DomainError, type DomainErrorKind, type DomainFieldError, invalidError } from "../core/errors.ts";
import { PolicyContentError } from "../../shared/policy_types/mod.ts";
import { type EncodedMembers, encodeMembers } from "../hub/typed_content.ts";
import { type ParsedBody, parseJsonBody } from "../http/json_body.ts";
import { argon2idHash, argon2idVerify } from "../auth/argon2.ts";
import type { JsonSchema } from "../http/json_schema.ts";

/** A unit of work too heavy for the event loop; pure (no database), so any worker runs it. */
export type OffLoopJob =
  | { op: "check"; text: string; format?: BundleFormat }
  | { op: "content"; type: string; content: string }
  /** A large request body (UTF-8) parsed and checked against its route's schema (server/http/json_body.ts). */
  | { op: "body"; bytes: Uint8Array; schema: JsonSchema }
  /** A large answer serialized as JSON, returned as UTF-8 (moved back to the caller, not copied). */
  | { op: "stringify"; value: unknown }
  /** Stored content as the stream's encoded content and typed members (server/hub/typed_content.ts). */
  | { op: "members"; type: string; content: string }
  | {
    op: "render";
    policies: ExportPolicyRow[];
    bindings?: ExportBindingRow[];
    format: BundleFormat;
  }
  /** argon2id of a password with a fresh salt (server/auth/argon2.ts): the PHC string. */
  | { op: "password-hash"; password: string }
  /** Whether a password matches a PHC string. */
  | { op: "password-verify"; password: string; hash: string };

/** What a job returns. */
export type OffLoopValue =
  | CheckedBundle
  | RenderedExport
  | CheckedCanonical
  | EncodedMembers
  | ParsedBody
  | Uint8Array<ArrayBuffer>
  | string
  | boolean
  | null;

/**
 * A content check's answer from a worker: the canonical form, or null when it is the content itself. The
 * caller holds the content already; sending it back would cost the loop a copy of it.
 */
export interface CheckedCanonical {
  canonical: string | null;
}

/**
 * The answer to a job: its value, or the error it threw (domain errors keep kind and fields; content that
 * does not parse is `invalid`).
 */
export type OffLoopAnswer =
  | { ok: true; value: OffLoopValue }
  | { ok: false; kind: DomainErrorKind | "internal"; message: string; fields?: DomainFieldError[] };

/** Runs `job` here and now. */
export async function runJob(job: OffLoopJob): Promise<OffLoopAnswer> {
  try {
    if (job.op === "password-hash") return { ok: true, value: await argon2idHash(job.password) };
    if (job.op === "password-verify") {
      return { ok: true, value: await argon2idVerify(job.password, job.hash) };
    }
    const value = job.op === "check"
      ? withoutParsedContent(checkBundle(job.text, job.format))
      : job.op === "content"
      ? canonicalOnly(checkContent(job.type, job.content))
      : job.op === "body"
      ? parseJsonBody(new TextDecoder().decode(job.bytes), job.schema)
      : job.op === "stringify"
      ? new TextEncoder().encode(JSON.stringify(job.value))
      : job.op === "members"
      ? encodeMembers(job.type, job.content)
      : renderExport(job.policies, job.bindings, job.format);
    return { ok: true, value };
  } catch (err) {
    if (err instanceof DomainError) {
      return { ok: false, kind: err.kind, message: err.message, fields: err.fields };
    }
    if (err instanceof PolicyContentError) return { ok: false, kind: "invalid", message: err.message };
    if (err instanceof RangeError) {
      return { ok: false, kind: "invalid", message: `bundle is too complex to process: ${err.message}` };
    }
    return { ok: false, kind: "internal", message: (err as Error).message };
  }
}

function canonicalOnly(checked: CheckedContent): CheckedCanonical {
  return { canonical: checked.canonical === checked.content ? null : checked.canonical };
}

/** `content` as checked: the worker's answer ({@link CheckedCanonical}) with the content the caller holds. */
function withContent(type: string, content: string, answer: CheckedCanonical): CheckedContent {
  return { type, content, canonical: answer.canonical ?? content };
}

/**
 * The checked bundle without each policy's parsed content object: the caller needs only its JSON text and
 * canonical form (in `contents`), and copying a 100,000-key object back to the server's thread would cost
 * that thread as much as a parse.
 */
function withoutParsedContent(checked: CheckedBundle): CheckedBundle {
  for (const doc of checked.docs) if (doc.kind === "Policy") doc.spec.content = null;
  return checked;
}

/**
 * Longest content (in UTF-16 code units) checked on the calling thread. Checking costs about 1 ms per 2 KB
 * of content on a loaded machine (parse, semantic checks, canonical form), so this keeps the loop's share to
 * a few milliseconds while ordinary policies (a few KB) never wait for a worker.
 */
export const INLINE_CONTENT_LENGTH = 8 * 1024;

/**
 * Validates policy content and returns what to store ({@link checkContent}): on this thread when it is short,
 * in a worker when it is longer than {@link INLINE_CONTENT_LENGTH}. Throws `invalid` naming the field.
 */
export async function checkContentOffLoop(type: string, content: string): Promise<CheckedContent> {
  if (content.length <= INLINE_CONTENT_LENGTH) return checkContent(type, content);
  return withContent(type, content, await runOffLoop<CheckedCanonical>({ op: "content", type, content }));
}

/**
 * Checks stored content that a unit of work is about to check again (a release), off the event loop and
 * before the unit opens: the result lets the domain skip its own check (`assertReleasable`, policies.ts).
 * Undefined for short content (checked inline in the unit, cheaply) and for content that fails, which the
 * domain then refuses with its own message.
 */
export async function precheckContent(type: string, content: string): Promise<CheckedContent | undefined> {
  if (content.length <= INLINE_CONTENT_LENGTH) return undefined;
  return await runOffLoop<CheckedCanonical>({ op: "content", type, content }).then(
    (answer) => withContent(type, content, answer),
    () => undefined,
  );
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
 * The worker module: `worker.ts` beside this file in a checkout or a compiled build (which includes
 * it), `worker.js` beside the one-module bundle of the portable build (packaging/program.ts bundles
 * it there).
 */
const WORKER_URL = new URL(
  import.meta.url.endsWith(".ts") ? "./worker.ts" : "./worker.js",
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
  return job.op === "password-hash" || job.op === "password-verify" ? lanes.password : lanes.content;
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

/** Runs `job` in a worker thread and returns its value (or throws its error). */
export async function runOffLoop<T extends OffLoopValue>(
  job: OffLoopJob,
): Promise<T> {
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
