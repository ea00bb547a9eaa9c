/**
 * `<svc-release-progress .releases=…>`: the dashboard's releases in flight (`GET /api/v1/policies/in-flight`:
 * versions released in the last hours whose reached nodes have not all applied them), one progress bar each:
 * applied of reached, with inapplicable, failing and pending nodes as further segments and the same words as
 * the rollout panel. The dashboard reloads the list on live hints, so the bars move as nodes report.
 */
import { html, nothing } from "lit";
import type { Operations } from "../../../shared/api/svc_api.gen.ts";
import { rolloutSummary } from "./policy_rollout.ts";
import { relativeTime } from "./ui.ts";
import { TREND_COLORS } from "./trend_colors.ts";
import { boundProperties, LightElement } from "./light_element.ts";

/** One release in flight. */
export type ReleaseInFlight = Operations["GET /api/v1/policies/in-flight"]["response"][number];

/** The bar's segments, in the order drawn. */
const SEGMENTS = [
  ["compliant", "Applied"],
  ["inapplicable", "Inapplicable"],
  ["error", "Error"],
  ["non_compliant", "Non-compliant"],
  ["pending", "Pending"],
] as const;

class SvcReleaseProgress extends LightElement {
  static override properties = {
    ...boundProperties("releases", "now"),
  };
  declare releases: ReleaseInFlight[];
  /** The clock the "released … ago" texts are measured against. */
  declare now: number;

  constructor() {
    super();
    this.releases = [];
    this.now = Date.now();
  }

  override render() {
    return html`
      <section class="card releases-in-flight" aria-labelledby="releases-heading">
        <h2 id="releases-heading">Releases in flight</h2>
        ${this.releases.length === 0
          ? html`<p class="muted releases-none">No release of the last 72 hours is still on its way.</p>`
          : html`<ul class="release-list">${this.releases.map((r) => this.#release(r))}</ul>`}
      </section>
    `;
  }

  #release(r: ReleaseInFlight) {
    const c = r.counts;
    const id = `release-${r.policy_id}`;
    const words = SEGMENTS.filter(([k]) => c[k] > 0).map(([k, label]) => `${c[k]} ${label.toLowerCase()}`);
    return html`
      <li class="release" data-policy=${r.policy_id}>
        <div class="release-title">
          <a id=${id} href=${`/policies/${r.policy_id}/edit`}>${r.policy_name}</a>
          <span class="muted">version ${r.version} · ${r.policy_type} · released
            <time datetime=${r.started_at}>${relativeTime(r.started_at, this.now)}</time></span>
        </div>
        <div class="release-bar" role="progressbar" aria-labelledby=${id} aria-valuemin="0"
          aria-valuemax=${c.total} aria-valuenow=${c.compliant}
          aria-valuetext=${`${c.compliant} of ${c.total} nodes applied: ${words.join(", ")}`}>
          ${SEGMENTS.map(([k]) =>
            c[k] > 0
              ? html`
                <span class="release-segment" data-state=${k}
                  style=${`width:${(c[k] / c.total) * 100}%;background:${TREND_COLORS[k]}`}></span>
              `
              : nothing
          )}
        </div>
        <div class="release-counts">${rolloutSummary(c)}</div>
      </li>
    `;
  }
}

customElements.define("svc-release-progress", SvcReleaseProgress);
