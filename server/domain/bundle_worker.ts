/**
 * Worker entry of bundle parsing and rendering: runs one {@link BundleJob} per message and answers with its
 * value or its error, so a large or hostile bundle costs this worker's time, never the server's event loop.
 */
/// <reference lib="deno.worker" />
import { type BundleJob, type BundleJobAnswer, runBundleJob } from "./bundle_job.ts";

self.onmessage = (event: MessageEvent<BundleJob>) => {
  self.postMessage(runBundleJob(event.data) satisfies BundleJobAnswer);
};
