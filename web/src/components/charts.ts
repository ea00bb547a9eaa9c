/**
 * Small SVG charts for the dashboard. Each is a `<figure>` whose SVG has a text summary as its accessible
 * name, and a legend with the numbers, so nothing is conveyed by colour alone.
 */
import { html, LitElement, nothing, svg, type TemplateResult } from "lit";

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

/** `<svc-donut-chart>`: shares of a whole (node status, compliance status). */
class SvcDonutChart extends LitElement {
  static override properties = { chartTitle: { attribute: "chart-title" }, segments: { attribute: false } };
  declare chartTitle: string;
  declare segments: ChartSegment[];

  constructor() {
    super();
    this.chartTitle = "";
    this.segments = [];
  }

  protected override createRenderRoot(): HTMLElement {
    return this;
  }

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
class SvcBarChart extends LitElement {
  static override properties = { chartTitle: { attribute: "chart-title" }, segments: { attribute: false } };
  declare chartTitle: string;
  declare segments: ChartSegment[];

  constructor() {
    super();
    this.chartTitle = "";
    this.segments = [];
  }

  protected override createRenderRoot(): HTMLElement {
    return this;
  }

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
