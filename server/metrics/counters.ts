/**
 * Process-lifetime instruments of the metrics listener: the spec's four counters (they count since process
 * start and reset on restart) plus the policy-stream histogram and gauge. Every part of the server imports
 * these module-level instruments and updates them; the listener renders them together with the gauges it
 * computes from the database at each scrape.
 *
 * @module
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";

/** The one registry holding every process-lifetime instrument of the server. */
export const metricsRegistry: Registry = new Registry();

/** Package formats served by the agent repository (label `format`). */
export const PACKAGE_FORMATS = ["deb", "rpm", "apk", "arch"] as const;
/** Agent architectures (label `arch`); `unknown` when the file name does not tell. */
export const PACKAGE_ARCHES = ["amd64", "arm64", "ppc64le", "unknown"] as const;
/** Flatpak catalog refresh outcomes (label `outcome`). */
export const FLATPAK_REFRESH_OUTCOMES = ["ok", "unchanged", "error", "upload"] as const;
/** Recovery-key escrow operations (label `op`). */
export const LUKS_ESCROW_OPS = ["escrow", "confirm", "release", "destroy"] as const;
/** Escrow operation outcomes (label `outcome`). */
export const LUKS_ESCROW_OUTCOMES = ["ok", "error"] as const;

/**
 * Successful GETs of agent package files (not index or key files).
 * Labels: `format` ∈ {@link PACKAGE_FORMATS}, `arch` ∈ {@link PACKAGE_ARCHES}.
 */
export const agentPackageDownloads: Counter<"format" | "arch"> = new Counter({
  name: "svc_agent_package_downloads_total",
  help:
    "Successful downloads of agent package files since process start, by package format and architecture.",
  labelNames: ["format", "arch"],
  registers: [metricsRegistry],
});

/**
 * Flatpak catalog refresh attempts. Labels: `repo` (repository name), `outcome` ∈
 * {@link FLATPAK_REFRESH_OUTCOMES}.
 */
export const flatpakCatalogRefresh: Counter<"repo" | "outcome"> = new Counter({
  name: "svc_flatpak_catalog_refresh_total",
  help: "Flatpak catalog refresh attempts since process start, by repository and outcome.",
  labelNames: ["repo", "outcome"],
  registers: [metricsRegistry],
});

/**
 * Recovery-key escrow operations. Labels: `op` ∈ {@link LUKS_ESCROW_OPS}, `outcome` ∈
 * {@link LUKS_ESCROW_OUTCOMES}. Never add a node or volume label: disk-encryption metrics must not
 * identify nodes.
 */
export const luksEscrowOperations: Counter<"op" | "outcome"> = new Counter({
  name: "svc_luks_escrow_operations_total",
  help: "Disk-encryption recovery-key escrow operations since process start, by operation and outcome.",
  labelNames: ["op", "outcome"],
  registers: [metricsRegistry],
});

/** Recovery keys revealed to administrators (each reveal is also audited). No labels. */
export const luksRecoveryKeyReveals: Counter = new Counter({
  name: "svc_luks_recovery_key_reveals_total",
  help: "Disk-encryption recovery keys revealed to administrators since process start.",
  registers: [metricsRegistry],
});

const policyPropagation = new Histogram({
  name: "svc_policy_propagation_seconds",
  help: "Seconds from a policy resync being published to a node's snapshot_complete being sent.",
  // 1 ms (a local stream) up to 60 s (a large fleet draining a resync), roughly 1-2.5-5 per decade.
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers: [metricsRegistry],
});

const policyStreamsOpen = new Gauge({
  name: "svc_policy_streams_open",
  help: "Agent policy streams currently open on this server process.",
  registers: [metricsRegistry],
});

const liveEventStreamsOpen = new Gauge({
  name: "svc_live_event_streams_open",
  help: "Console live-event streams (GET /api/v1/events) currently open on this server process.",
  registers: [metricsRegistry],
});

/**
 * Records one propagation: the time from a resync being published to a node's `snapshot_complete`
 * being sent, in seconds. Negative or non-finite values (clock steps) are ignored rather than
 * distorting the histogram.
 */
export function observePolicyPropagation(seconds: number): void {
  if (!Number.isFinite(seconds) || seconds < 0) return;
  policyPropagation.observe(seconds);
}

/** Sets the number of policy streams open on this process. */
export function setPolicyStreamsOpen(n: number): void {
  policyStreamsOpen.set(n);
}

/** Adds `delta` (+1 on open, -1 on close) to the number of open policy streams. */
export function incPolicyStreamsOpen(delta: number): void {
  policyStreamsOpen.inc(delta);
}

/** Adds `delta` (+1 on open, -1 on close) to the number of open console live-event streams. */
export function incLiveEventStreamsOpen(delta: number): void {
  liveEventStreamsOpen.inc(delta);
}

// Series with fixed label values exist from process start at 0, so rate() and absent() behave before
// the first event; repository names are not known in advance, so the Flatpak counter starts empty.
for (const format of PACKAGE_FORMATS) {
  for (const arch of PACKAGE_ARCHES) agentPackageDownloads.inc({ format, arch }, 0);
}
for (const op of LUKS_ESCROW_OPS) {
  for (const outcome of LUKS_ESCROW_OUTCOMES) luksEscrowOperations.inc({ op, outcome }, 0);
}
