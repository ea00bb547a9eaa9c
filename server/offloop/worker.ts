/**
 * Worker entry of the off-loop jobs: runs one {@link OffLoopJob} per message and answers with its value or
 * its error, so a large or hostile bundle, or a password hash, costs this worker's time, never the server's
 * event loop. It stands at the top of the house because it imports every floor that declares a job (with
 * `defineOffLoopJob`, server/core/offloop.ts): importing them registers the jobs in this thread. A job
 * declared in a module missing here is answered as an internal error naming it. The pool finds this file by
 * its address (packaging/program.ts bundles it beside the portable program as `worker.js`).
 */
/// <reference lib="deno.worker" />
import { type OffLoopAnswer, type OffLoopJob, runJob } from "../core/offloop.ts";
import "../domain/content_offloop.ts";
import "../hub/typed_content.ts";
import "../http/json_body.ts";
import "../auth/argon2.ts";

self.onmessage = async (event: MessageEvent<OffLoopJob>) => {
  const answer: OffLoopAnswer = await runJob(event.data);
  self.postMessage(answer, answer.ok ? movableBuffers(answer.value) : []);
};

/**
 * The buffers of the byte arrays in an answer (serialized JSON, encoded stream members), found up to two
 * levels deep: they go back by moving, not copying. A copy of a 1 MiB answer would cost the server's thread
 * the very milliseconds this worker took off it, plus the first touch of the fresh memory. Nothing here
 * keeps an answer after sending it. Arrays that are views into a larger buffer are copied as before.
 */
function movableBuffers(value: unknown, depth = 0): ArrayBuffer[] {
  if (value instanceof Uint8Array) {
    // Only a buffer the array has to itself: a view into a shared pool (Node's Buffer pool) must stay.
    const own = value.buffer instanceof ArrayBuffer && value.byteOffset === 0 &&
      value.byteLength === value.buffer.byteLength;
    return own ? [value.buffer as ArrayBuffer] : [];
  }
  if (depth >= 2 || value === null || typeof value !== "object") return [];
  const buffers = new Set<ArrayBuffer>();
  for (const member of Object.values(value)) {
    for (const buffer of movableBuffers(member, depth + 1)) buffers.add(buffer);
  }
  return [...buffers];
}
