/**
 * `<svc-fleet-trends>`: the fleet over time on the dashboard, from the points the server keeps
 * (`GET /api/v1/trends`): the share of nodes compliant, nodes by worst result and nodes by connection, over
 * the last 48 hours (hourly points) or 90 days (daily points). Each chart shows only when the reader may see
 * its part (compliance:view, node:view: the server leaves the other part out). Points are taken once an
 * hour, so the charts reload every few minutes rather than on live hints.
 */
import { html, nothing, type TemplateResult } from "lit";
import type { Operations } from "../../../shared/api/svc_api.gen.ts";
import { api } from "../api.ts";
import { session } from "../session.ts";
import { errorText } from "./page.ts";
import { valueOf } from "./ui.ts";
import type { TimeSeries } from "./charts.ts";
import { dayLabel, hourLabel, TREND_COLORS } from "./trend_colors.ts";
import "./charts.ts";
import { LightElement, stateProperties } from "./light_element.ts";

type Trend = Operations["GET /api/v1/trends"]["response"];
type Point = Trend["points"][number];

/** The ranges a reader can choose. */
const RANGES = {
  hours: { granularity: "hour", label: "Last 48 hours", stepMs: 3_600_000, format: hourLabel },
  days: { granularity: "day", label: "Last 90 days", stepMs: 86_400_000, format: dayLabel },
} as const;
type Range = keyof typeof RANGES;

/** How often the charts reload (a new point comes once an hour). */
const RELOAD_MS = 5 * 60_000;

class SvcFleetTrends extends LightElement {
  static override properties = {
    ...stateProperties("range", "trend", "error"),
  };
  declare range: Range;
  declare trend: Trend | undefined;
  declare error: unknown;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor() {
    super();
    this.range = "hours";
  }

  override connectedCallback(): void {
    super.connectedCallback();
    void this.load();
    this.#timer = setInterval(() => void this.load(), RELOAD_MS);
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    clearInterval(this.#timer);
  }

  /** Reads the points of the chosen range. */
  async load(): Promise<void> {
    const range = this.range;
    try {
      const trend = await api.call("GET /api/v1/trends", {
        query: { granularity: RANGES[range].granularity },
      });
      if (range !== this.range) return;
      this.trend = trend;
      this.error = undefined;
    } catch (err) {
      this.error = err;
    }
  }

  #choose(e: Event): void {
    const range = valueOf(e) as Range;
    if (range === this.range || !(range in RANGES)) return;
    this.range = range;
    this.trend = undefined;
    void this.load();
  }

  override render() {
    return html`
      <section class="fleet-trends" aria-labelledby="fleet-trends-heading">
        <header class="trends-header">
          <h2 id="fleet-trends-heading">Trends</h2>
          <sl-radio-group label="Period" class="trend-range" value=${this.range} size="small"
            @sl-change=${(e: Event) => this.#choose(e)}>
            ${(Object.keys(RANGES) as Range[]).map((r) =>
              html`<sl-radio-button value=${r}>${RANGES[r].label}</sl-radio-button>`
            )}
          </sl-radio-group>
        </header>
        ${this.error
          ? html`<sl-alert variant="danger" open>${errorText(this.error)}
            <sl-button size="small" @click=${() => this.load()}>Try again</sl-button></sl-alert>`
          : nothing}
        ${this.trend
          ? this.#charts(this.trend.points)
          : this.error
          ? nothing
          : html`<sl-spinner aria-label="Loading the trends"></sl-spinner>`}
      </section>
    `;
  }

  #charts(points: Point[]): TemplateResult {
    const { stepMs, format } = RANGES[this.range];
    const times = points.map((p) => Date.parse(p.bucket));
    // The server leaves out the parts the reader may not see.
    const compliance = session.can("compliance:view") && points.every((p) => p.compliance)
      ? points.map((p) => p.compliance!)
      : undefined;
    const nodes = session.can("node:view") && points.every((p) => p.nodes)
      ? points.map((p) => p.nodes!)
      : undefined;
    const chart = (
      title: string,
      kind: "line" | "area",
      series: TimeSeries[],
      scale: { max?: number; unit?: string } = {},
    ) =>
      html`
        <svc-time-chart chart-title=${title} kind=${kind} unit=${scale.unit ?? ""} .max=${scale.max}
          .stepMs=${stepMs} .times=${times} .series=${series} .formatTime=${format}></svc-time-chart>
      `;
    const series = <T>(
      rows: T[],
      keys: ReadonlyArray<readonly [keyof T & keyof typeof TREND_COLORS, string]>,
    ) =>
      keys.map(([key, label]) => ({
        label,
        color: TREND_COLORS[key],
        values: rows.map((r) => r[key] as number),
      }));
    return html`
      ${points.length === 0
        ? html`<p class="muted trends-empty">The server samples the fleet once an hour; the first point appears
          within the hour.</p>`
        : nothing}
      <div class="trend-charts">
        ${compliance
          ? chart("Share of nodes compliant", "line", [{
            label: "Compliant",
            color: TREND_COLORS.share,
            values: compliance.map((c) => c.percent_compliant),
          }], { max: 100, unit: "%" })
          : nothing}
        ${compliance
          ? chart(
            "Nodes by worst result",
            "area",
            series(compliance, [
              ["compliant", "Compliant"],
              ["unknown", "Not reported yet"],
              ["non_compliant", "Non-compliant"],
              ["error", "Error"],
            ]),
          )
          : nothing}
        ${nodes
          ? chart(
            "Nodes by connection",
            "area",
            series(nodes, [
              ["online", "Online"],
              ["degraded", "Degraded"],
              ["offline", "Offline"],
              ["never_seen", "Never seen"],
            ]),
          )
          : nothing}
      </div>
    `;
  }
}

customElements.define("svc-fleet-trends", SvcFleetTrends);
