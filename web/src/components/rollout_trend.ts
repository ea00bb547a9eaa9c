/**
 * `<svc-rollout-trend policy-id=… version=…>`: a released policy's rollout over time, as a stacked area of its
 * reached nodes by state: the hourly points the server kept since the current version started to be
 * delivered, then where it stands now (`GET /api/v1/policies/all/{id}/trends`). Read again when nodes report
 * or the policy changes (live hints, polling while they are down) and when the version changes. Shows
 * nothing for a policy that is not released, or to a reader without compliance:view.
 */
import { html, nothing, type PropertyValues } from "lit";
import type { Operations } from "../../../shared/api/svc_api.gen.ts";
import { api } from "../api.ts";
import { session } from "../session.ts";
import { LiveRefresh } from "../live_events.ts";
import { errorText } from "./page.ts";
import { formatDate } from "./ui.ts";
import { hourLabel, TREND_COLORS } from "./trend_colors.ts";
import "./charts.ts";
import { LightElement, stateProperties } from "./light_element.ts";

type PolicyTrend = Operations["GET /api/v1/policies/all/{id}/trends"]["response"];

/** Polling interval while live hints are down. */
const POLL_MS = 10_000;

/** The bands, bottom up. */
const BANDS = [
  ["compliant", "Applied"],
  ["inapplicable", "Inapplicable"],
  ["pending", "Pending"],
  ["non_compliant", "Non-compliant"],
  ["error", "Error"],
] as const;

class SvcRolloutTrend extends LightElement {
  static override properties = {
    policyId: { attribute: "policy-id" },
    version: { type: Number },
    ...stateProperties("trend", "error"),
  };
  declare policyId: string;
  /** The policy's version as the page shows it; a new one reloads the points. */
  declare version: number;
  declare trend: PolicyTrend | undefined;
  declare error: unknown;
  #loadedAt: number | undefined;
  #live = new LiveRefresh(this, {
    topics: ["compliance", "policies"],
    reload: () => this.load(),
    pollMs: () => (this.trend?.started_at ? POLL_MS : 0),
    loadedAt: () => this.#loadedAt,
  });

  protected override updated(changed: PropertyValues<this>): void {
    if (changed.has("policyId") || changed.has("version")) void this.load();
  }

  /** Reads the hourly points. */
  async load(): Promise<void> {
    if (!this.policyId || !session.can("compliance:view")) return;
    try {
      this.trend = await api.call("GET /api/v1/policies/all/{id}/trends", { path: { id: this.policyId } });
      this.#loadedAt = Date.now();
      this.error = undefined;
    } catch (err) {
      this.error = err;
    }
  }

  override render() {
    if (this.error) return html`<p class="muted rollout-trend-error">${errorText(this.error)}</p>`;
    const t = this.trend;
    if (!t || t.started_at === null) return nothing;
    const rows = [...t.points, {
      ...t.current,
      bucket: new Date(this.#loadedAt ?? Date.now()).toISOString(),
    }];
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
