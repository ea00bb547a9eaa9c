/**
 * `<svc-rollout-trend policy-id=… .current=…>`: a released policy's rollout over time, as a stacked area of
 * its reached nodes by state: the hourly points the server kept since the current version started to be
 * delivered (`GET /api/v1/policies/all/{id}/trends`), then where it stands now. The rollout panel mounts it
 * and hands it the live counts it already keeps fresh, so only the hourly points are fetched here (again when
 * the version changes, and every few minutes).
 */
import { html, LitElement, nothing, type PropertyValues } from "lit";
import type { Operations } from "../../../shared/api/svc_api.gen.ts";
import { api } from "../api.ts";
import { errorText } from "./page.ts";
import { formatDate } from "./ui.ts";
import type { RolloutCounts } from "./policy_rollout.ts";
import { hourLabel, TREND_COLORS } from "./trend_colors.ts";
import "./charts.ts";

type PolicyTrend = Operations["GET /api/v1/policies/all/{id}/trends"]["response"];

/** How often the points are read again (one comes an hour). */
const RELOAD_MS = 5 * 60_000;

/** The bands, bottom up. */
const BANDS = [
  ["compliant", "Applied"],
  ["inapplicable", "Inapplicable"],
  ["pending", "Pending"],
  ["non_compliant", "Non-compliant"],
  ["error", "Error"],
] as const;

class SvcRolloutTrend extends LitElement {
  static override properties = {
    policyId: { attribute: "policy-id" },
    version: { type: Number },
    current: { attribute: false },
    trend: { state: true },
    error: { state: true },
  };
  declare policyId: string;
  /** The version the rollout panel shows; a new one reloads the points. */
  declare version: number;
  /** Counts now, from the rollout panel. */
  declare current: RolloutCounts | undefined;
  declare trend: PolicyTrend | undefined;
  declare error: unknown;
  #timer: ReturnType<typeof setInterval> | undefined;

  protected override createRenderRoot(): HTMLElement {
    return this;
  }

  override connectedCallback(): void {
    super.connectedCallback();
    this.#timer = setInterval(() => void this.load(), RELOAD_MS);
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    clearInterval(this.#timer);
  }

  protected override updated(changed: PropertyValues<this>): void {
    if (changed.has("policyId") || changed.has("version")) void this.load();
  }

  /** Reads the hourly points. */
  async load(): Promise<void> {
    if (!this.policyId) return;
    try {
      this.trend = await api.get<PolicyTrend>(`/policies/all/${encodeURIComponent(this.policyId)}/trends`);
      this.error = undefined;
    } catch (err) {
      this.error = err;
    }
  }

  override render() {
    if (this.error) return html`<p class="muted rollout-trend-error">${errorText(this.error)}</p>`;
    const t = this.trend;
    if (!t || t.started_at === null) return nothing;
    const now = this.current ?? t.current;
    const rows = [...t.points, { ...now, bucket: new Date().toISOString() }];
    return html`
      <div class="rollout-trend">
        <svc-time-chart chart-title=${`Rollout of version ${t.version} over time`} kind="area"
          .stepMs=${3_600_000} .times=${rows.map((r) => Date.parse(r.bucket))} .formatTime=${hourLabel}
          .series=${BANDS.map(([key, label]) => ({
            label,
            color: TREND_COLORS[key],
            values: rows.map((r) => r[key]),
          }))}></svc-time-chart>
        <p class="muted">Since version ${t.version} was released (${formatDate(t.started_at)}): the nodes it
          reaches, a point per hour and the last one now.</p>
      </div>
    `;
  }
}

customElements.define("svc-rollout-trend", SvcRolloutTrend);
