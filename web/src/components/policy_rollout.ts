/**
 * `<svc-policy-rollout policy-id=…>`: where a released policy stands on the nodes it reaches — counts per
 * state that double as filters, and one row per node with the bindings that reach it, its state for the
 * current version ("pending" until the node reports on it, with "offline since …" for an offline node) and
 * its last report. Refreshes itself every few seconds (and says when it last did), keeping filter, page and
 * scroll, so a release can be watched as it lands.
 */
import { LightElement, stateProperties } from "./light_element.ts";
import { html, nothing, type TemplateResult } from "lit";
import { api } from "../api.ts";
import { LiveRefresh } from "../live_events.ts";
import { errorText } from "./page.ts";
import { formatDate, relativeTime } from "./ui.ts";
import type { PageChange } from "./pager.ts";
// The editor shows the rollout over time beside this panel; defined with it.
import "./rollout_trend.ts";

/** Rollout states, in the order the panel lists them. */
export const ROLLOUT_STATES = ["pending", "error", "non_compliant", "compliant", "inapplicable"] as const;
/** A rollout state. */
export type RolloutState = (typeof ROLLOUT_STATES)[number];
/** Counts per state. */
export type RolloutCounts = Record<RolloutState, number> & { total: number };

/** Words for rollout states. */
export const ROLLOUT_LABELS: Record<RolloutState, string> = {
  pending: "Pending",
  error: "Error",
  non_compliant: "Non-compliant",
  compliant: "Applied",
  inapplicable: "Inapplicable",
};

const VARIANTS: Record<RolloutState, string> = {
  pending: "warning",
  error: "danger",
  non_compliant: "danger",
  compliant: "success",
  inapplicable: "neutral",
};

interface RolloutRow {
  node_id: string;
  node_name: string;
  node_status: string;
  last_seen: string | null;
  state: RolloutState;
  reported_version: number | null;
  message: string;
  reported_at: string | null;
  via: Array<{ binding_id: string; node_group_id: string; node_group_name: string; priority: number }>;
}

interface RolloutPage {
  items: RolloutRow[];
  total: number;
  page: number;
  per_page: number;
  version: number;
  counts: RolloutCounts;
}

/** How often the panel refreshes itself. */
const REFRESH_MS = 5_000;

/** A state as a badge with its words (colour is never the only signal). */
export function rolloutBadge(state: RolloutState): TemplateResult {
  return html`<sl-badge class="rollout-state" data-state=${state} variant=${VARIANTS[state]} pill>${
    ROLLOUT_LABELS[state]
  }</sl-badge>`;
}

/** Compact counts for a list cell: "3 of 4 applied · 1 pending". */
export function rolloutSummary(counts: RolloutCounts | undefined): TemplateResult | string {
  if (!counts) return "—";
  if (counts.total === 0) return html`<span class="muted">No nodes</span>`;
  const problems = (["pending", "error", "non_compliant"] as const).filter((s) => counts[s] > 0);
  return html`<span class="rollout-summary">${counts.compliant} of ${counts.total} applied${
    problems.map((s) =>
      html`
        · <span data-state=${s}>${counts[s]} ${ROLLOUT_LABELS[s].toLowerCase()}</span>
      `
    )
  }</span>`;
}

class SvcPolicyRollout extends LightElement {
  static override properties = {
    policyId: { attribute: "policy-id" },
    ...stateProperties("data", "state", "pageNumber", "error", "updatedAt", "now"),
  };
  declare policyId: string;
  declare data: RolloutPage | undefined;
  declare state: RolloutState | "";
  declare pageNumber: number;
  declare error: unknown;
  declare updatedAt: number | undefined;
  declare now: number;
  #timer: ReturnType<typeof setInterval> | undefined;
  #inFlight = false;
  /** Reloads when nodes report or connect, or the policy is released again; polls while that is down. */
  #live = new LiveRefresh(this, {
    topics: ["compliance", "nodes", "policies"],
    reload: () => this.refresh(),
    pollMs: () => REFRESH_MS,
    loadedAt: () => this.updatedAt,
  });

  constructor() {
    super();
    this.state = "";
    this.pageNumber = 1;
    this.now = Date.now();
  }

  override connectedCallback(): void {
    super.connectedCallback();
    void this.refresh();
    this.#timer = setInterval(() => this.now = Date.now(), REFRESH_MS);
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    clearInterval(this.#timer);
  }

  /** Fetches the current rollout (skipped while a fetch is still running). */
  async refresh(): Promise<void> {
    if (this.#inFlight || !this.policyId) return;
    this.#inFlight = true;
    try {
      this.data = await api.call("GET /api/v1/policies/all/{id}/rollout", {
        path: { id: this.policyId },
        query: { state: this.state || undefined, page: this.pageNumber, per_page: 25 },
      });
      this.error = undefined;
      this.updatedAt = Date.now();
      this.now = this.updatedAt;
    } catch (err) {
      this.error = err;
    } finally {
      this.#inFlight = false;
    }
  }

  #filter(state: RolloutState | ""): void {
    this.state = state;
    this.pageNumber = 1;
    void this.refresh();
  }

  #onPage = (e: CustomEvent<PageChange>) => {
    this.pageNumber = e.detail.page;
    void this.refresh();
  };

  #where(row: RolloutRow): TemplateResult | string {
    if (row.node_status === "offline") {
      return html`<span class="offline-since">Offline since ${
        row.last_seen
          ? html`<time datetime=${row.last_seen} title=${formatDate(row.last_seen)}>${
            relativeTime(row.last_seen, this.now)
          }</time>`
          : "never seen"
      }</span>`;
    }
    return row.node_status === "online"
      ? "Online"
      : row.node_status[0].toUpperCase() + row.node_status.slice(1);
  }

  override render() {
    const d = this.data;
    return html`
      <section class="card policy-rollout" aria-labelledby="rollout-heading">
        <header class="rollout-header">
          <h2 id="rollout-heading">Rollout${d
            ? html`
              of version ${d.version}
            `
            : nothing}</h2>
          <span class="muted rollout-updated" aria-live="off">${this.#live.live && this.updatedAt
            ? "Live"
            : this.updatedAt
            ? this.now - this.updatedAt < 5_000
              ? "Updated just now"
              : `Updated ${relativeTime(new Date(this.updatedAt).toISOString(), this.now)}`
            : ""}</span>
        </header>
        ${this.error
          ? html`<sl-alert variant="danger" open>${errorText(this.error)}
            <sl-button size="small" @click=${() => this.refresh()}>Try again</sl-button></sl-alert>`
          : nothing}
        ${d
          ? this.#body(d)
          : this.error
          ? nothing
          : html`<sl-spinner aria-label="Loading the rollout"></sl-spinner>`}
      </section>
    `;
  }

  #body(d: RolloutPage): TemplateResult {
    const c = d.counts;
    return html`
      <div class="rollout-filters" role="group" aria-label="Show nodes by state">
        <sl-button size="small" class="rollout-filter" data-state="" variant=${this.state === ""
          ? "primary"
          : "default"}
          aria-pressed=${this.state === "" ? "true" : "false"} @click=${() => this.#filter("")}>
          All <span class="count">${c.total}</span></sl-button>
        ${ROLLOUT_STATES.map((s) =>
          html`
            <sl-button size="small" class="rollout-filter" data-state=${s}
              variant=${this.state === s ? "primary" : "default"} aria-pressed=${this.state === s
                ? "true"
                : "false"}
              @click=${() =>
                this.#filter(s)}>${ROLLOUT_LABELS[s]} <span class="count">${c[s]}</span></sl-button>
          `
        )}
      </div>
      ${d.items.length === 0
        ? html`<p class="muted empty-state">${
          c.total === 0
            ? "This policy reaches no node: no enabled binding links it to a group with members."
            : "No node is in this state."
        }</p>`
        : html`
          <div class="table-wrap">
            <table class="data rollout-table">
              <caption class="visually-hidden">Nodes the policy reaches</caption>
              <thead>
                <tr>
                  <th scope="col">Node</th>
                  <th scope="col">State</th>
                  <th scope="col">Connection</th>
                  <th scope="col">Through</th>
                  <th scope="col">Last report</th>
                </tr>
              </thead>
              <tbody>
                ${d.items.map((r) =>
                  html`
                    <tr data-node=${r.node_name} data-state=${r.state}>
                      <th scope="row"><a href=${`/nodes?node=${r.node_id}`}>${r.node_name}</a></th>
                      <td>${rolloutBadge(
                        r.state,
                      )}${r.message && (r.state === "error" || r.state === "non_compliant")
                        ? html`<div class="muted rollout-message">${r.message}</div>`
                        : nothing}</td>
                      <td>${this.#where(r)}</td>
                      <td>${r.via.map((v, i) =>
                        html`${
                          i ? ", " : ""
                        }<a href=${`/policy-bindings?node_group_id=${v.node_group_id}`}>${v.node_group_name}</a>`
                      )}</td>
                      <td>${r.reported_at
                        ? html`<time datetime=${r.reported_at} title=${formatDate(r.reported_at)}>${
                          relativeTime(r.reported_at, this.now)
                        }</time>${
                          r.reported_version !== null && r.reported_version !== d.version
                            ? html`
                              <span class="muted">(version ${r.reported_version})</span>
                            `
                            : nothing
                        }`
                        : html`<span class="muted">Never</span>`}</td>
                    </tr>
                  `
                )}
              </tbody>
            </table>
          </div>
          <svc-pager label="nodes" .page=${d.page} .perPage=${d.per_page} .total=${d.total}
            @page-change=${this.#onPage}></svc-pager>
        `}
    `;
  }
}

customElements.define("svc-policy-rollout", SvcPolicyRollout);
