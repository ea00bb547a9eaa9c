/**
 * Worker entry of bundle parsing and rendering: runs one {@link BundleJob} per message and answers with its
 * value or its error, so a large or hostile bundle costs this worker's time, never the server's event loop.
 */
/// <reference lib="deno.worker" />
import { type BundleJob, type BundleJobAnswer, runBundleJob } from "./bundle_job.ts";

self.onmessage = (event: MessageEvent<BundleJob>) => {
  const answer: BundleJobAnswer = runBundleJob(event.data);
  // Serialized JSON goes back by moving its buffer: a copy would cost the server's thread as much as the
  // serializing this worker just took off it.
  const moved = answer.ok && answer.value instanceof Uint8Array ? [answer.value.buffer] : [];
  self.postMessage(answer, moved);
};
