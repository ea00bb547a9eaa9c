/**
 * `/`: the fleet at a glance — node status, compliance by status, policies by state and type, certificate
 * expiry — as small charts whose numbers link to the filtered lists. Counts come from the list endpoints'
 * `total` (one-row pages), never from fetching the whole fleet.
 */
import { html, nothing } from "lit";
import { api, type ListPage } from "../api.ts";
import { session } from "../session.ts";
import { PageElement } from "../components/page.ts";
import type { ChartSegment } from "../components/charts.ts";
import { normalizeStatus } from "../components/ui.ts";
import { listPolicyTypes } from "../../../shared/policy_types/mod.ts";
import type { FleetSummary, NodeSummary } from "../types.ts";

const NODE_STATUS_COLORS: Record<string, string> = {
  online: "var(--sl-color-success-600)",
  degraded: "var(--sl-color-warning-500)",
  offline: "var(--sl-color-neutral-500)",
  unknown: "var(--sl-color-neutral-300)",
};

const COMPLIANCE_COLORS: Record<string, string> = {
  compliant: "var(--sl-color-success-600)",
  non_compliant: "var(--sl-color-danger-600)",
  error: "var(--sl-color-danger-800)",
  inapplicable: "var(--sl-color-neutral-400)",
  unknown: "var(--sl-color-neutral-300)",
};

const STATE_COLORS: Record<string, string> = {
  draft: "var(--sl-color-primary-500)",
  released: "var(--sl-color-success-600)",
  archived: "var(--sl-color-neutral-500)",
};

/** How many nodes are read to bucket certificate expiry (the soonest first). */
const EXPIRY_SAMPLE = 200;
const DAY = 86400000;

async function total(path: string, query: Record<string, string>): Promise<number> {
  const page = await api.get<ListPage<unknown>>(path, { ...query, per_page: 1 });
  return page.total;
}

class SvcDashboardPage extends PageElement {
  static override properties = { ...PageElement.properties, data: { state: true } };
  declare data: {
    nodes?: ChartSegment[];
    compliance?: ChartSegment[];
    score?: number | null;
    policyStates?: ChartSegment[];
    policyTypes?: ChartSegment[];
    expiry?: ChartSegment[];
    expiryPartial?: boolean;
  };

  override pageTitle = "Dashboard";

  constructor() {
    super();
    this.data = {};
  }

  protected override async load(): Promise<void> {
    const tasks: Promise<void>[] = [];
    const data: typeof this.data = {};
    if (session.can("node:view")) {
      tasks.push((async () => {
        const statuses = ["online", "degraded", "offline", "unknown"];
        const counts = await Promise.all(statuses.map((s) => total("/nodes", { status: s })));
        data.nodes = statuses.map((s, i) => ({
          label: s[0].toUpperCase() + s.slice(1),
          value: counts[i],
          color: NODE_STATUS_COLORS[s],
          href: `/nodes?status=${s}`,
        }));
        await this.#loadExpiry(data);
      })());
    }
    if (session.can("compliance:view")) {
      tasks.push((async () => {
        const summary = await api.get<FleetSummary>("/compliance/summary");
        const results = summary.results as unknown as Record<string, number>;
        data.compliance = ["compliant", "non_compliant", "error", "inapplicable", "unknown"].map((s) => ({
          label: normalizeStatus(s).replace("_", " ").replace(/^./, (c) => c.toUpperCase()),
          value: results[s] ?? 0,
          color: COMPLIANCE_COLORS[s],
          href: `/compliance?status=${s}`,
        }));
        data.score = summary.score;
      })());
    }
    if (session.can("policy:view")) {
      tasks.push((async () => {
        const states = ["draft", "released", "archived"];
        const counts = await Promise.all(states.map((s) => total("/policies/all", { state: s })));
        data.policyStates = states.map((s, i) => ({
          label: s[0].toUpperCase() + s.slice(1),
          value: counts[i],
          color: STATE_COLORS[s],
          href: `/policies?state=${s}`,
        }));
        const types = listPolicyTypes().map((t) => t.wireName);
        const byType = await Promise.all(types.map((t) => total("/policies/all", { type: t })));
        data.policyTypes = types.map((t, i) => ({
          label: t,
          value: byType[i],
          color: "var(--sl-color-primary-600)",
          href: `/policies?type=${encodeURIComponent(t)}`,
        })).filter((s) => s.value > 0);
      })());
    }
    await Promise.all(tasks);
    this.data = data;
  }

  async #loadExpiry(data: typeof this.data): Promise<void> {
    const page = await api.get<ListPage<NodeSummary>>("/nodes", {
      sort: "cert_not_after",
      order: "asc",
      per_page: EXPIRY_SAMPLE,
    });
    const now = Date.now();
    const buckets = [
      { label: "Expired", max: 0, color: "var(--sl-color-danger-700)" },
      { label: "Within 7 days", max: 7 * DAY, color: "var(--sl-color-danger-500)" },
      { label: "Within 30 days", max: 30 * DAY, color: "var(--sl-color-warning-500)" },
      { label: "Within 60 days", max: 60 * DAY, color: "var(--sl-color-warning-300)" },
      { label: "Later", max: Infinity, color: "var(--sl-color-success-600)" },
    ];
    const counts = buckets.map(() => 0);
    for (const node of page.items) {
      if (!node.cert_not_after) continue;
      const left = new Date(node.cert_not_after).getTime() - now;
      counts[buckets.findIndex((b) => left <= b.max)]++;
    }
    data.expiry = buckets.map((b, i) => ({ label: b.label, value: counts[i], color: b.color }));
    data.expiryPartial = page.total > page.items.length;
  }

  override render() {
    const d = this.data;
    const score = d.score === undefined || d.score === null ? undefined : Math.round(d.score * 100);
    return html`
      ${this.renderHeader(
        nothing,
        "The state of the fleet and its policies. Numbers link to the lists behind them.",
      )}
      ${this.renderLoadError()}
      ${this.loading && !d.nodes && !d.policyStates ? html`<sl-spinner></sl-spinner>` : nothing}
      <section class="charts" aria-label="Fleet overview">
        ${d.nodes
          ? html`<svc-donut-chart chart-title="Nodes by status" .segments=${d.nodes}></svc-donut-chart>`
          : nothing}
        ${d.compliance
          ? html`<div>
            <svc-donut-chart chart-title="Compliance results by status" .segments=${d.compliance}></svc-donut-chart>
            ${
            score !== undefined
              ? html`<p class="muted">Compliance score: <strong>${score}%</strong> of results that count
                (compliant ÷ compliant, non-compliant and error).</p>`
              : nothing
          }
          </div>`
          : nothing}
        ${d.policyStates
          ? html`<svc-bar-chart chart-title="Policies by state" .segments=${d.policyStates}></svc-bar-chart>`
          : nothing}
        ${d.policyTypes
          ? html`<svc-bar-chart chart-title="Policies by type" .segments=${d.policyTypes}></svc-bar-chart>`
          : nothing}
        ${d.expiry
          ? html`<div>
            <svc-bar-chart chart-title="Agent certificates by expiry" .segments=${d.expiry}></svc-bar-chart>
            ${
            d.expiryPartial
              ? html`<p class="muted">Counted over the ${EXPIRY_SAMPLE} certificates that expire first.</p>`
              : nothing
          }
          </div>`
          : nothing}
      </section>
    `;
  }
}

customElements.define("svc-dashboard-page", SvcDashboardPage);
