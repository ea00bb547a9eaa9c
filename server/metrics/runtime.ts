/**
 * Runtime families of the metrics listener: the standard `process_*` families and Deno/V8 families in place of
 * the Go runtime's `go_*` families the spec mentions (svc-server runs on Deno, not Go).
 *
 * What is exported and why (probed on Deno 2.9):
 * - `process_*` come from prom-client's `collectDefaultMetrics` and are correct under Deno: CPU seconds
 *   (`process.cpuUsage`), start time, resident/virtual memory and data segment (`/proc/self/status`), open and
 *   maximum file descriptors (`/proc/self/fd`, `/proc/self/limits`).
 * - prom-client's `nodejs_*` families are dropped: under Deno the event-loop delay monitor does not see a
 *   blocked loop (a 120 ms busy loop reported a 50 µs maximum), the GC observer never receives entries, and
 *   `nodejs_version_info` reports Deno's Node-compatibility version rather than the runtime in use.
 * - Own families instead: `deno_info{version,v8,typescript}` (like `go_info`), V8 heap figures
 *   (`v8_heap_*`, `v8_external_memory_bytes`, `v8_malloced_memory_bytes`, per-space `v8_heap_space_*`), and
 *   `deno_event_loop_lag_seconds`, a histogram of how late a 500 ms timer fires (the event-loop analogue of
 *   scheduler latency), sampled only while a metrics listener runs.
 * - No garbage-collection families: Deno exposes no GC events to JavaScript.
 *
 * @module
 */
import { collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { getHeapSpaceStatistics, getHeapStatistics } from "node:v8";
import type { Logger } from "../core/log.ts";
import { familiesFromRegistry, type MetricFamily } from "./exposition.ts";

const runtimeRegistry = new Registry();

collectDefaultMetrics({ register: runtimeRegistry });
for (const metric of runtimeRegistry.getMetricsAsArray()) {
  if (!metric.name.startsWith("process_")) runtimeRegistry.removeSingleMetric(metric.name);
}

new Gauge({
  name: "deno_info",
  help: "Versions of the Deno runtime, its V8 engine and TypeScript; the value is always 1.",
  labelNames: ["version", "v8", "typescript"],
  registers: [runtimeRegistry],
  collect() {
    this.set({ version: Deno.version.deno, v8: Deno.version.v8, typescript: Deno.version.typescript }, 1);
  },
});

/** Declares a V8 gauge whose value is read at each scrape. */
function v8Gauge(name: string, help: string, read: () => number): void {
  new Gauge({
    name,
    help,
    registers: [runtimeRegistry],
    collect() {
      this.set(read());
    },
  });
}

v8Gauge("v8_heap_used_bytes", "Bytes of the V8 heap in use.", () => Deno.memoryUsage().heapUsed);
v8Gauge("v8_heap_total_bytes", "Bytes reserved for the V8 heap.", () => Deno.memoryUsage().heapTotal);
v8Gauge(
  "v8_heap_size_limit_bytes",
  "Maximum size the V8 heap may grow to.",
  () => getHeapStatistics().heap_size_limit,
);
v8Gauge(
  "v8_external_memory_bytes",
  "Bytes of memory held outside the V8 heap by JavaScript objects (buffers, WebAssembly memory).",
  () => Deno.memoryUsage().external,
);
v8Gauge(
  "v8_malloced_memory_bytes",
  "Bytes V8 allocated with malloc.",
  () => getHeapStatistics().malloced_memory,
);

const spaceFields = [
  ["v8_heap_space_size_bytes", "Bytes reserved for each V8 heap space.", "space_size"],
  ["v8_heap_space_used_bytes", "Bytes in use in each V8 heap space.", "space_used_size"],
  ["v8_heap_space_available_bytes", "Bytes still available in each V8 heap space.", "space_available_size"],
] as const;
for (const [name, help, field] of spaceFields) {
  new Gauge({
    name,
    help,
    labelNames: ["space"],
    registers: [runtimeRegistry],
    collect() {
      this.reset();
      for (const space of getHeapSpaceStatistics()) {
        this.set({ space: space.space_name.replace(/_space$/, "") }, space[field]);
      }
    },
  });
}

const LAG_INTERVAL_MS = 500;
const eventLoopLag = new Histogram({
  name: "deno_event_loop_lag_seconds",
  help: "How late a timer due every 500 ms fired: time the event loop was busy with other work.",
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [runtimeRegistry],
});

let samplerUsers = 0;
let samplerTimer: ReturnType<typeof setTimeout> | undefined;

function scheduleLagSample(due: number): void {
  const timer = setTimeout(() => {
    const now = performance.now();
    eventLoopLag.observe(Math.max(0, now - due) / 1000);
    scheduleLagSample(now + LAG_INTERVAL_MS);
  }, LAG_INTERVAL_MS);
  // The sampler must never keep the process alive on its own.
  Deno.unrefTimer(timer);
  samplerTimer = timer;
}

/**
 * Starts the event-loop lag sampler (shared by every listener of the process); returns the function that
 * releases it. The timer stops when the last user releases it.
 */
export function startRuntimeSampler(): () => void {
  if (samplerUsers++ === 0) scheduleLagSample(performance.now() + LAG_INTERVAL_MS);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--samplerUsers === 0) clearTimeout(samplerTimer);
  };
}

/** Collects the process and Deno/V8 families; one that fails is omitted and logged. */
export function runtimeFamilies(log: Logger): Promise<MetricFamily[]> {
  return familiesFromRegistry(runtimeRegistry, log);
}
