/**
 * One scrape for the whole server when policy workers serve the policy port (`server.policy_workers` > 1):
 * the main process's listener adds each worker's instruments, labelled `worker="N"`.
 *
 * - The policy-stream families live only in the workers (the main process serves no stream then), so the
 *   main process's own, always-empty series of those families are replaced by the workers' series.
 * - `process_*` families gain the workers' series next to the main process's unlabelled ones, so memory and
 *   CPU of the whole server are one `sum()` away.
 * - Everything else (database gauges, REST-side counters) is the main process's alone.
 *
 * @module
 */
import type { MetricFamily } from "./exposition.ts";

/** Families that only the processes serving policy streams update. */
export const POLICY_STREAM_FAMILIES: ReadonlySet<string> = new Set([
  "svc_policy_streams_open",
  "svc_policy_propagation_seconds",
]);

/** The instruments one worker reported. */
export interface WorkerFamilies {
  /** The worker's index as the label value. */
  worker: string;
  families: MetricFamily[];
}

function isMerged(name: string): boolean {
  return POLICY_STREAM_FAMILIES.has(name) || name.startsWith("process_");
}

/** Merges the workers' families into the main process's (see the module comment for the rules). */
export function mergeWorkerFamilies(
  own: readonly MetricFamily[],
  workers: readonly WorkerFamilies[],
): MetricFamily[] {
  return own.map((family) => {
    if (!isMerged(family.name)) return family;
    const samples = POLICY_STREAM_FAMILIES.has(family.name) ? [] : [...family.samples];
    for (const { worker, families } of workers) {
      const theirs = families.find((f) => f.name === family.name && f.type === family.type);
      for (const s of theirs?.samples ?? []) samples.push({ ...s, labels: { worker, ...s.labels } });
    }
    return { ...family, samples };
  });
}
