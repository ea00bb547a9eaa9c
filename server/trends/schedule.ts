/**
 * The trend sampler every replica runs: at start and then once a minute it asks for the current hour's
 * sample; the first replica to ask in a new hour takes it and the others find it taken (see sampling.ts), so
 * the fleet gets exactly one sample an hour however many replicas run, and a replica that stops leaves the
 * job to the others without any hand-over.
 */
import type { ServerContext } from "../context.ts";
import { sampleTrends } from "./sampling.ts";

/** How often a replica looks whether the hour's sample is due. */
const CHECK_MS = 60_000;

/** Starts the sampler; returns its stop function, which waits for a sample in progress. */
export function startTrendSampler(ctx: ServerContext, intervalMs = CHECK_MS): () => Promise<void> {
  let running: Promise<void> | undefined;
  const run = () => {
    running ??= (async () => {
      try {
        const outcome = await sampleTrends(ctx.db, ctx.config.trends);
        if (outcome.sampled) {
          ctx.log.debug("trends: sampled", {
            bucket: outcome.bucket.toISOString(),
            rollouts: outcome.rollouts,
          });
        }
      } catch (err) {
        ctx.log.warn("trends: sampling failed; the next check tries again", { error: String(err) });
      } finally {
        running = undefined;
      }
    })();
  };
  run();
  const timer = setInterval(run, intervalMs);
  Deno.unrefTimer(timer);
  return async () => {
    clearInterval(timer);
    await running;
  };
}
