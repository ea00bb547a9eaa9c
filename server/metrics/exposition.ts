/**
 * Exposition of metric families in the two Prometheus text formats: OpenMetrics 1.0 and the classic text
 * format 0.0.4, chosen by content negotiation on the scraper's `Accept` header.
 *
 * Rendering is done here rather than by prom-client's `Registry#metrics()` because prom-client switches format
 * per registry (a shared registry cannot answer two scrapers that ask for different formats at the same time)
 * and, in OpenMetrics mode, permanently strips `_total` from the counter objects it renders, so a later classic
 * scrape would print counters without their suffix. prom-client still owns the instruments; this module only
 * turns their values (and the gauges computed from the database) into text.
 *
 * @module
 */
import { setImmediate } from "node:timers";
import type { Registry } from "prom-client";
import type { Logger } from "../core/log.ts";

/** Metric types this server exposes. */
export type MetricType = "counter" | "gauge" | "histogram";

/** One sample line: full sample name (with `_total`, `_bucket`, … suffix), labels and value. */
export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  /**
   * The labels already rendered (`{k="v",…}`, escaped), used instead of `labels` when set: families of a
   * series per node keep it between scrapes rather than escape 200,000 labels at each one.
   */
  labelText?: string;
  value: number;
}

/**
 * One metric family. Counter family names carry their `_total` suffix (the classic-format name); the
 * OpenMetrics renderer removes it from the descriptor lines as that format requires.
 */
export interface MetricFamily {
  name: string;
  help: string;
  type: MetricType;
  samples: MetricSample[];
}

/**
 * A family whose sample lines are kept rendered (the per-node families, node_series.ts): the renderers write
 * `renderLines()` out as it is instead of formatting `samples`. The lines must be the same in both formats
 * (gauges: no `_total`, no bucket bounds), and each string whole lines.
 */
export interface PrerenderedFamily extends MetricFamily {
  renderLines(): Iterable<string>;
}

function isPrerendered(family: MetricFamily): family is PrerenderedFamily {
  return typeof (family as Partial<PrerenderedFamily>).renderLines === "function";
}

/** The two exposition formats. */
export type ExpositionFormat = "openmetrics" | "text";

/** Content type of the classic text format. */
export const TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";
/** Content type of OpenMetrics 1.0.0. */
export const OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/** Result of content negotiation: the format and the `Content-Type` to answer with. */
export interface Negotiated {
  format: ExpositionFormat;
  contentType: string;
}

const OPENMETRICS_VERSIONS = new Set(["", "1.0.0", "0.0.1"]);
const TEXT_VERSIONS = new Set(["", "0.0.4", "1.0.0"]);

/**
 * Chooses the exposition format from an `Accept` header the way Prometheus' own client libraries do: the
 * acceptable media range with the highest quality wins (ties keep header order); `application/openmetrics-text`
 * (versions 0.0.1 and 1.0.0, which share one text layout) selects OpenMetrics, `text/plain` (0.0.4, or 1.0.0,
 * identical for legacy metric names like ours) and wildcards select the classic format. Anything else,
 * including a missing header, falls back to the classic format rather than 406, so curl and old scrapers work.
 */
export function negotiate(accept: string | null): Negotiated {
  const text = { format: "text", contentType: TEXT_CONTENT_TYPE } as const;
  if (!accept) return text;
  const ranges = accept.split(",").map((part, index) => {
    const [type, ...params] = part.split(";").map((s) => s.trim());
    let q = 1;
    let version = "";
    for (const param of params) {
      const eq = param.indexOf("=");
      if (eq < 0) continue;
      const key = param.slice(0, eq).trim().toLowerCase();
      const value = param.slice(eq + 1).trim().replace(/^"(.*)"$/, "$1");
      if (key === "q") q = Number(value);
      else if (key === "version") version = value;
    }
    return { type: type.toLowerCase(), version, q: Number.isFinite(q) ? q : 0, index };
  }).filter((r) => r.q > 0).sort((a, b) => b.q - a.q || a.index - b.index);
  for (const range of ranges) {
    if (range.type === "application/openmetrics-text" && OPENMETRICS_VERSIONS.has(range.version)) {
      const version = range.version === "0.0.1" ? "0.0.1" : "1.0.0";
      return {
        format: "openmetrics",
        contentType: `application/openmetrics-text; version=${version}; charset=utf-8`,
      };
    }
    if (range.type === "text/plain" && TEXT_VERSIONS.has(range.version)) return text;
    if (range.type === "*/*" || range.type === "text/*") return text;
  }
  return text;
}

/** Formats a sample value: `+Inf`, `-Inf`, `NaN` or the shortest decimal that round-trips. */
export function formatValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}

/** OpenMetrics wants bucket bounds as canonical numbers: integers carry `.0` (`1.0`, not `1`). */
function canonicalBound(le: string): string {
  const n = Number(le);
  if (le === "+Inf" || !Number.isFinite(n)) return le;
  const s = formatValue(n);
  return /^-?\d+$/.test(s) ? `${s}.0` : s;
}

function escapeLabelValue(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll('"', '\\"');
}

function formatLabels(labels: Record<string, string>, openMetrics: boolean): string {
  const parts = Object.entries(labels).map(([k, v]) =>
    `${k}="${escapeLabelValue(openMetrics && k === "le" ? canonicalBound(v) : v)}"`
  );
  return parts.length ? `{${parts.join(",")}}` : "";
}

/** Renders families in the requested format; OpenMetrics output ends with `# EOF`. */
export function render(families: readonly MetricFamily[], format: ExpositionFormat): string {
  return [...renderChunks(families, format)].join("");
}

/**
 * Samples per chunk of {@link renderChunks}: about 40 KiB of text and well under a millisecond of work, so
 * a streamed scrape gives the loop back that often.
 */
export const SAMPLES_PER_CHUNK = 500;

/**
 * The exposition as text chunks of at most {@link SAMPLES_PER_CHUNK} samples each, in order; their
 * concatenation is {@link render}'s text.
 */
export function* renderChunks(
  families: readonly MetricFamily[],
  format: ExpositionFormat,
): Generator<string> {
  const openMetrics = format === "openmetrics";
  let lines: string[] = [];
  for (const family of families) {
    // OpenMetrics names a counter family without `_total`; its samples keep the suffix.
    const name = openMetrics && family.type === "counter" ? family.name.replace(/_total$/, "") : family.name;
    // HELP escaping differs: OpenMetrics also escapes double quotes.
    let help = family.help.replaceAll("\\", "\\\\").replaceAll("\n", "\\n");
    if (openMetrics) help = help.replaceAll('"', '\\"');
    lines.push(`# HELP ${name} ${help}\n# TYPE ${name} ${family.type}\n`);
    if (isPrerendered(family)) {
      yield lines.join("");
      lines = [];
      for (const text of family.renderLines()) if (text !== "") yield text;
      continue;
    }
    for (const s of family.samples) {
      lines.push(`${s.name}${s.labelText ?? formatLabels(s.labels, openMetrics)} ${formatValue(s.value)}\n`);
      if (lines.length >= SAMPLES_PER_CHUNK) {
        yield lines.join("");
        lines = [];
      }
    }
  }
  if (openMetrics) lines.push("# EOF\n");
  if (lines.length > 0) yield lines.join("");
}

/**
 * The exposition as a byte stream that renders a chunk ({@link renderChunks}) each time the response asks
 * for more. A fleet's scrape is two samples per node (1.8 MB of text for 10,000 nodes, tens of milliseconds
 * to render): rendered in one piece it held every other request and agent stream of the server that long.
 */
export function renderStream(
  families: readonly MetricFamily[],
  format: ExpositionFormat,
): ReadableStream<Uint8Array> {
  const chunks = renderChunks(families, format);
  const encoder = new TextEncoder();
  let first = true;
  return new ReadableStream({
    async pull(controller) {
      // A turn of the loop between chunks: a reader that takes each chunk at once (the gzip pipe does) would
      // otherwise pull the next in the same turn, and the whole scrape would be rendered in one piece again.
      // setImmediate, not setTimeout: nested timeouts are clamped to 4 ms, 45 of them doubled a scrape's time.
      if (!first) await new Promise((resolve) => setImmediate(resolve));
      first = false;
      const next = chunks.next();
      if (next.done) controller.close();
      else controller.enqueue(encoder.encode(next.value));
    },
  });
}

interface PromValue {
  value: number;
  labels?: Record<string, string | number>;
  metricName?: string;
}

/**
 * Reads every metric of a prom-client registry into families. Each metric is collected on its own: one whose
 * collection throws is omitted and logged (`metrics: …`), the others are still returned.
 */
export async function familiesFromRegistry(registry: Registry, log: Logger): Promise<MetricFamily[]> {
  // getMetricsAsArray() is typed as plain descriptors; getSingleMetric gives the instrument with get().
  const names = registry.getMetricsAsArray().map((m) => m.name);
  const collected = await Promise.all(names.map(async (name) => {
    try {
      return await registry.getSingleMetric(name)?.get();
    } catch (err) {
      log.error(`metrics: collecting ${name} failed; omitted from this scrape`, {
        error: String(err),
      });
      return undefined;
    }
  }));
  const families: MetricFamily[] = [];
  for (const item of collected) {
    if (!item) continue;
    const type = String(item.type);
    if (type !== "counter" && type !== "gauge" && type !== "histogram") {
      log.error(`metrics: ${item.name} has unsupported type ${type}; omitted`);
      continue;
    }
    // Counter families always carry `_total`, so both renderers can rely on it.
    const name = type === "counter" && !item.name.endsWith("_total") ? `${item.name}_total` : item.name;
    const samples = (item.values as PromValue[]).map((v) => ({
      name: type === "counter" ? name : v.metricName ?? name,
      labels: Object.fromEntries(Object.entries(v.labels ?? {}).map(([k, x]) => [k, String(x)])),
      value: v.value,
    }));
    families.push({ name, help: item.help, type, samples });
  }
  return families;
}
