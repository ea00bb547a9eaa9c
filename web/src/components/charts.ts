/**
 * Small SVG charts, drawn here (no chart library): shares of a whole (donut), counts per category (bars) and
 * values over time (lines or stacked areas). Each is a `<figure>` whose SVG has a text summary as its
 * accessible name, and a legend with the numbers, so nothing is conveyed by colour alone; a time chart also
 * carries its every number in a data table.
 */
import { html, nothing, svg, type TemplateResult } from "lit";
import { boundProperties, LightElement } from "./light_element.ts";

/** One value of a chart. */
export interface ChartSegment {
  label: string;
  value: number;
  /** A CSS colour, usually a Shoelace token such as `var(--sl-color-success-600)`. */
  color: string;
  /** Optional link (e.g. the filtered list behind the number). */
  href?: string;
  /**
   * How the value splits (a bar chart draws them stacked, in order, and names them in its summary); the
   * parts' values add up to `value`.
   */
  parts?: ReadonlyArray<{ label: string; value: number; color: string }>;
}

function summary(title: string, segments: readonly ChartSegment[]): string {
  const parts = segments.map((s) => {
    const split = s.parts?.filter((p) => p.value > 0).map((p) => `${p.label} ${p.value}`).join(", ");
    return `${s.label}: ${s.value}${split ? ` (${split})` : ""}`;
  }).join(", ");
  return `${title}. ${parts || "no data"}`;
}

function legend(segments: readonly ChartSegment[]): TemplateResult {
  return html`
    <ul class="chart-legend">
      ${segments.map((s) =>
        html`<li>
          <span class="swatch" style=${`background:${s.color}`} aria-hidden="true"></span>
          ${s.href ? html`<a href=${s.href}>${s.label}</a>` : s.label}
          <strong>${s.value}</strong>
        </li>`
      )}
    </ul>
  `;
}

/** A chart of segments under a title: what the donut and the bar chart share. */
class SegmentChart extends LightElement {
  static override properties = { chartTitle: { attribute: "chart-title" }, segments: { attribute: false } };
  declare chartTitle: string;
  declare segments: ChartSegment[];

  constructor() {
    super();
    this.chartTitle = "";
    this.segments = [];
  }
}

/** `<svc-donut-chart>`: shares of a whole (node status, compliance status). */
class SvcDonutChart extends SegmentChart {
  override render() {
    const total = this.segments.reduce((n, s) => n + s.value, 0);
    const radius = 40;
    const circumference = 2 * Math.PI * radius;
    let offset = 0;
    const arcs = this.segments.filter((s) => s.value > 0).map((s) => {
      const length = (s.value / total) * circumference;
      const arc = svg`
        <circle r=${radius} cx="50" cy="50" fill="none" stroke=${s.color} stroke-width="16"
          stroke-dasharray=${`${length} ${circumference - length}`} stroke-dashoffset=${-offset}
          transform="rotate(-90 50 50)"></circle>
      `;
      offset += length;
      return arc;
    });
    return html`
      <figure class="chart donut">
        <figcaption>${this.chartTitle}</figcaption>
        <div class="chart-body">
          <svg viewBox="0 0 100 100" width="120" height="120" role="img" aria-label=${summary(
            this.chartTitle,
            this.segments,
          )}>
            <circle r=${radius} cx="50" cy="50" fill="none" stroke="var(--sl-color-neutral-200)" stroke-width="16"></circle>
            ${arcs}
            <text x="50" y="50" text-anchor="middle" dominant-baseline="central" class="chart-total">${total}</text>
          </svg>
          ${legend(this.segments)}
        </div>
      </figure>
    `;
  }
}

/**
 * `<svc-bar-chart>`: counts per category (policies by type, certificates by expiry window). Segments with
 * `parts` are drawn as stacked bars with a legend of the parts under the chart.
 */
class SvcBarChart extends SegmentChart {
  override render() {
    const max = Math.max(1, ...this.segments.map((s) => s.value));
    return html`
      <figure class="chart bars">
        <figcaption>${this.chartTitle}</figcaption>
        <ul class="bar-list" aria-label=${summary(this.chartTitle, this.segments)}>
          ${this.segments.map((s) =>
            html`
              <li>
                <span class="bar-label">${s.href ? html`<a href=${s.href}>${s.label}</a>` : s.label}</span>
                <svg class="bar" viewBox="0 0 100 10" preserveAspectRatio="none" aria-hidden="true">
                  ${s.parts ? stacked(s.parts, max) : svg`
                    <rect x="0" y="0" height="10" rx="2" fill=${s.color}
                      width=${s.value > 0 ? Math.max(2, (s.value / max) * 100) : 0}></rect>
                  `}
                </svg>
                <strong class="bar-value">${s.value}</strong>
              </li>
            `
          )}
        </ul>
        ${partsLegend(this.segments)}
      </figure>
    `;
  }
}

function stacked(parts: NonNullable<ChartSegment["parts"]>, max: number): TemplateResult[] {
  let x = 0;
  return parts.filter((p) => p.value > 0).map((p) => {
    const width = (p.value / max) * 100;
    const rect = svg`<rect x=${x} y="0" height="10" width=${width} fill=${p.color}></rect>`;
    x += width;
    return rect;
  });
}

/** The colours of the parts (once per part label), so a stacked bar can be read without guessing. */
function partsLegend(segments: readonly ChartSegment[]): TemplateResult | typeof nothing {
  const seen = new Map<string, string>();
  for (const s of segments) for (const p of s.parts ?? []) if (!seen.has(p.label)) seen.set(p.label, p.color);
  if (seen.size === 0) return nothing;
  return html`
    <ul class="chart-legend parts-legend" aria-hidden="true">
      ${[...seen].map(([label, color]) =>
        html`<li><span class="swatch" style=${`background:${color}`}></span>${label}</li>`
      )}
    </ul>
  `;
}

customElements.define("svc-donut-chart", SvcDonutChart);
customElements.define("svc-bar-chart", SvcBarChart);

/** One line (or band of a stacked area) of a {@link SvcTimeChart}. */
export interface TimeSeries {
  label: string;
  /** A CSS colour with at least 3:1 against the card in both themes (a Shoelace token). */
  color: string;
  /** One value per time; null where the series has no value. */
  values: ReadonlyArray<number | null>;
}

/**
 * Margins and height of a time chart's plot, in SVG units; its width is the element's own in CSS pixels (so
 * labels keep their size however wide the chart is drawn).
 */
const PLOT = { height: 200, left: 44, right: 14, top: 10, bottom: 26 } as const;

/** Where each time lies across a plot `width` wide, and where a line must break (a gap of more than one step). */
function timeScale(
  times: readonly number[],
  stepMs: number,
  width: number,
): { x: (i: number) => number; breaks: Set<number> } {
  const first = times[0] ?? 0;
  const span = Math.max(stepMs, (times.at(-1) ?? first) - first);
  const plotWidth = width - PLOT.left - PLOT.right;
  const breaks = new Set<number>();
  times.forEach((t, i) => {
    if (i > 0 && t - times[i - 1] > stepMs * 1.5) breaks.add(i);
  });
  return {
    x: (i) => PLOT.left + (times.length === 1 ? plotWidth : ((times[i] - first) / span) * plotWidth),
    breaks,
  };
}

/** Runs of consecutive indexes with no break and no null in `values`. */
function runs(values: ReadonlyArray<number | null>, breaks: Set<number>): number[][] {
  const out: number[][] = [];
  let run: number[] = [];
  values.forEach((v, i) => {
    if (v === null || breaks.has(i)) {
      if (run.length) out.push(run);
      run = [];
    }
    if (v !== null) run.push(i);
  });
  if (run.length) out.push(run);
  return out;
}

/**
 * The y axis's ticks from 0 to at least `max`: about four steps of 1, 2 or 5 × a power of ten, never below 1
 * (counts of nodes have no fractions).
 */
function yTicks(max: number): number[] {
  const rough = Math.max(1, max / 4);
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((m) => m >= rough)!;
  const top = Math.max(step, Math.ceil(max / step) * step);
  return Array.from({ length: Math.round(top / step) + 1 }, (_, i) => i * step);
}

/**
 * `<svc-time-chart>`: values over time, as lines (`kind="line"`) or as a stacked area whose bands add up to
 * the whole (`kind="area"`), drawn in SVG by this code. Lines break where samples are missing. The SVG's
 * accessible name summarises the latest values; the legend names each series with its latest value; and a
 * "Data table" disclosure (a real table with caption and headers, reachable by keyboard) holds every number.
 */
class SvcTimeChart extends LightElement {
  static override properties = {
    chartTitle: { attribute: "chart-title" },
    kind: {},
    unit: {},
    ...boundProperties("stepMs", "times", "series", "max", "formatTime"),
    width: { state: true },
  };
  declare chartTitle: string;
  /** `line` or `area` (stacked). */
  declare kind: "line" | "area";
  /** Appended to values ("%"). */
  declare unit: string;
  /** The sampling step; a longer gap between two times breaks the lines. */
  declare stepMs: number;
  /** Sample times (ms since the epoch), oldest first. */
  declare times: number[];
  declare series: TimeSeries[];
  /** Top of the y axis (default: a round number over the largest value or stacked total). */
  declare max: number | undefined;
  /** How a time reads on the axis and in the table. */
  declare formatTime: (t: number) => string;
  /** The element's width in CSS pixels, followed as it changes. */
  declare width: number;
  #resize = new ResizeObserver(([entry]) => {
    const width = Math.round(entry.contentRect.width);
    // Small changes are not worth a redraw (and a scroll bar coming and going must not make it loop).
    if (width > 0 && Math.abs(width - this.width) >= 8) this.width = width;
  });

  constructor() {
    super();
    this.width = 360;
    this.chartTitle = "";
    this.kind = "line";
    this.unit = "";
    this.stepMs = 3_600_000;
    this.times = [];
    this.series = [];
    this.max = undefined;
    this.formatTime = (t) => new Date(t).toLocaleString();
  }

  override connectedCallback(): void {
    super.connectedCallback();
    this.#resize.observe(this);
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    this.#resize.disconnect();
  }

  #value(v: number | null): string {
    return v === null ? "—" : `${v}${this.unit}`;
  }

  /** "Title, from A to B. Latest (B): Series 1 5, Series 2 3." */
  #summary(): string {
    const last = this.times.length - 1;
    if (last < 0) return `${this.chartTitle}. No samples yet`;
    const latest = this.series.map((s) => `${s.label} ${this.#value(s.values[last] ?? null)}`).join(", ");
    const range = last > 0
      ? `, from ${this.formatTime(this.times[0])} to ${this.formatTime(this.times[last])}`
      : "";
    return `${this.chartTitle}${range}. Latest (${this.formatTime(this.times[last])}): ${latest}`;
  }

  override render() {
    const last = this.times.length - 1;
    return html`
      <figure class="chart time-chart">
        <figcaption>${this.chartTitle}</figcaption>
        ${last < 0 ? html`<p class="muted chart-empty">No samples yet.</p>` : this.#plot()}
        <ul class="chart-legend time-legend">
          ${this.series.map((s) =>
            html`<li>
              <span class="swatch" style=${`background:${s.color}`} aria-hidden="true"></span>${s.label}
              <strong>${last < 0 ? "—" : this.#value(s.values[last] ?? null)}</strong>
            </li>`
          )}
        </ul>
        ${last < 0 ? nothing : this.#table()}
      </figure>
    `;
  }

  #plot(): TemplateResult {
    const width = Math.max(200, this.width);
    const { x, breaks } = timeScale(this.times, this.stepMs, width);
    const stacked = this.kind === "area";
    // Cumulative tops of the bands (a missing value stacks as 0 but breaks its own band).
    const tops: number[][] = [];
    this.series.forEach((s, k) =>
      tops.push(this.times.map((_, i) => (stacked && k > 0 ? tops[k - 1][i] : 0) + (s.values[i] ?? 0)))
    );
    const highest = Math.max(
      0,
      ...(stacked ? tops.at(-1) ?? [] : this.series.flatMap((s) => s.values))
        .map((v) => v ?? 0),
    );
    const ticks = yTicks(this.max ?? highest);
    const top = ticks.at(-1)!;
    const plotHeight = PLOT.height - PLOT.top - PLOT.bottom;
    const y = (v: number) => PLOT.top + plotHeight - (Math.min(v, top) / top) * plotHeight;
    // Times on the axis: both ends, and the middle when there is room for three labels.
    const middle = width >= 480 ? [Math.floor(this.times.length / 2)] : [];
    const labelled = [...new Set([0, ...middle, this.times.length - 1])];
    const shapes = this.series.map((s, k) =>
      runs(s.values, breaks).map((run) => {
        const line = run.map((i) =>
          `${x(i).toFixed(1)},${y(stacked ? tops[k][i] : s.values[i]!).toFixed(1)}`
        );
        if (run.length === 1) {
          return svg`<circle class="series-point" cx=${x(run[0])} cy=${
            y(stacked ? tops[k][run[0]] : s.values[run[0]]!)
          } r="3.5" fill=${s.color}></circle>`;
        }
        const base = run.map((i) =>
          `${x(i).toFixed(1)},${y(stacked && k > 0 ? tops[k - 1][i] : 0).toFixed(1)}`
        )
          .reverse();
        return svg`
          ${stacked
            ? svg`<polygon class="series-area" points=${
              [...line, ...base].join(" ")
            } fill=${s.color}></polygon>`
            : nothing}
          <polyline class="series-line" points=${line.join(" ")} fill="none" stroke=${s
            .color} stroke-width="2.5"
            stroke-linejoin="round"></polyline>
        `;
      })
    );
    return html`
      <svg class="time-plot" viewBox=${`0 0 ${width} ${PLOT.height}`} role="img" aria-label=${this
        .#summary()}>
        ${ticks.map((t) =>
          svg`
            <line class="grid" x1=${PLOT.left} x2=${width - PLOT.right} y1=${y(t)} y2=${y(t)}></line>
            <text class="axis-label" x=${PLOT.left - 6} y=${y(t)} text-anchor="end"
              dominant-baseline="middle">${t}${this
                .unit}</text>
          `
        )}
        ${shapes}
        ${labelled.map((i) =>
          svg`<text class="axis-label" x=${x(i)} y=${PLOT.height - 6} text-anchor=${
            i === 0 && this.times.length > 1 ? "start" : i === this.times.length - 1 ? "end" : "middle"
          }>${this.formatTime(this.times[i])}</text>`
        )}
      </svg>
    `;
  }

  #table(): TemplateResult {
    return html`
      <details class="chart-data">
        <summary>Data table</summary>
        <div class="table-wrap" tabindex="0" role="region" aria-label=${`${this.chartTitle}: data`}>
          <table class="data">
            <caption>${this.chartTitle}</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                ${this.series.map((s) => html`<th scope="col">${s.label}</th>`)}
              </tr>
            </thead>
            <tbody>
              ${this.times.map((t, i) =>
                html`<tr>
                  <th scope="row"><time datetime=${new Date(t).toISOString()}>${
                  this.formatTime(t)
                }</time></th>
                  ${this.series.map((s) => html`<td>${this.#value(s.values[i] ?? null)}</td>`)}
                </tr>`
              ).reverse()}
            </tbody>
          </table>
        </div>
      </details>
    `;
  }
}

customElements.define("svc-time-chart", SvcTimeChart);
