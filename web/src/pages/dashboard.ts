/**
 * `/`: the fleet at a glance — node status, compliance by status, policies by type and state, bindings by
 * state, certificate expiry over every node — as small charts whose numbers link to the filtered lists.
 * Everything comes from one request (`GET /api/v1/dashboard/summary`), which leaves out the sections the
 * person may not see; the page draws what it gets.
 */
import { html, nothing } from "lit";
import { api } from "../api.ts";
import { PageElement } from "../components/page.ts";
import type { ChartSegment } from "../components/charts.ts";
import { complianceLabel } from "../components/ui.ts";
import type { DashboardSummary } from "../types.ts";
import { CERT_EXPIRY_BUCKETS, type CertExpiryBucket } from "../cert_expiry.ts";

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

const STATES = ["draft", "released", "archived"] as const;

const STATE_COLORS: Record<string, string> = {
  draft: "var(--sl-color-primary-400)",
  released: "var(--sl-color-success-600)",
  archived: "var(--sl-color-neutral-500)",
};

const BINDING_COLORS: Record<string, string> = {
  enabled: "var(--sl-color-success-600)",
  disabled: "var(--sl-color-neutral-400)",
};

const EXPIRY_COLORS: Record<CertExpiryBucket, string> = {
  expired: "var(--sl-color-danger-700)",
  within_7_days: "var(--sl-color-danger-500)",
  within_30_days: "var(--sl-color-warning-500)",
  within_90_days: "var(--sl-color-success-500)",
  later: "var(--sl-color-success-700)",
  none: "var(--sl-color-neutral-300)",
  revoked: "var(--sl-color-neutral-600)",
};

function capitalize(text: string): string {
  return text[0].toUpperCase() + text.slice(1);
}

/** The charts for a summary: what is drawn, and where each number links. */
function dashboardCharts(summary: DashboardSummary): {
  nodes?: ChartSegment[];
  compliance?: ChartSegment[];
  score?: number | null;
  policyTypes?: ChartSegment[];
  policyStates?: ChartSegment[];
  bindings?: ChartSegment[];
  expiry?: ChartSegment[];
} {
  const { nodes, compliance, policies, bindings, certificates } = summary;
  return {
    nodes: nodes && (["online", "degraded", "offline", "unknown"] as const).map((s) => ({
      label: capitalize(s),
      value: nodes[s],
      color: NODE_STATUS_COLORS[s],
      href: `/nodes?status=${s}`,
    })),
    compliance: compliance &&
      (["compliant", "non_compliant", "error", "inapplicable", "unknown"] as const).map((s) => ({
        label: complianceLabel(s),
        value: compliance.results[s],
        color: COMPLIANCE_COLORS[s],
        href: `/compliance?status=${s}`,
      })),
    score: compliance?.score,
    policyStates: policies && STATES.map((s) => ({
      label: capitalize(s),
      value: policies.by_state[s],
      color: STATE_COLORS[s],
      href: `/policies?state=${s}`,
    })),
    policyTypes: policies?.by_type.map((t) => ({
      label: t.type,
      value: t.total,
      color: "var(--sl-color-primary-600)",
      href: `/policies?type=${encodeURIComponent(t.type)}`,
      parts: STATES.map((s) => ({ label: capitalize(s), value: t.by_state[s], color: STATE_COLORS[s] })),
    })),
    bindings: bindings && (["enabled", "disabled"] as const).map((s) => ({
      label: capitalize(s),
      value: bindings[s],
      color: BINDING_COLORS[s],
      href: `/policy-bindings?state=${s}`,
    })),
    expiry: certificates &&
      CERT_EXPIRY_BUCKETS.map((b) => ({
        label: b.label,
        value: certificates[b.key],
        color: EXPIRY_COLORS[b.key],
        href: `/nodes?cert_expiry=${b.key}`,
      })),
  };
}

class SvcDashboardPage extends PageElement {
  static override properties = { ...PageElement.properties, summary: { state: true } };
  declare summary: DashboardSummary | undefined;

  override pageTitle = "Dashboard";
  protected override autoRefreshMs = 10_000;
  protected override liveTopics = ["nodes", "compliance", "policies"] as const;

  protected override async load(): Promise<void> {
    this.summary = await api.get<DashboardSummary>("/dashboard/summary");
  }

  override render() {
    const d = this.summary ? dashboardCharts(this.summary) : undefined;
    const score = d?.score === undefined || d.score === null ? undefined : Math.round(d.score * 100);
    const empty = d && !d.nodes && !d.compliance && !d.policyStates && !d.bindings;
    return html`
      ${this.renderHeader(
        nothing,
        "The state of the fleet and its policies. Numbers link to the lists behind them.",
      )}
      ${this.renderLoadError()}
      ${this.loading && !d ? html`<sl-spinner></sl-spinner>` : nothing}
      ${empty
        ? html`<p class="muted">Your roles include none of the views the dashboard summarises (nodes, compliance,
          policies, bindings).</p>`
        : nothing}
      <section class="charts" aria-label="Fleet overview">
        ${d?.nodes
          ? html`<svc-donut-chart chart-title="Nodes by status" .segments=${d.nodes}></svc-donut-chart>`
          : nothing}
        ${d?.compliance
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
        ${d?.policyStates
          ? html`<svc-bar-chart chart-title="Policies by state" .segments=${d.policyStates}></svc-bar-chart>`
          : nothing}
        ${d?.policyTypes
          ? html`<svc-bar-chart chart-title="Policies by type and state" .segments=${d.policyTypes}></svc-bar-chart>`
          : nothing}
        ${d?.bindings
          ? html`<svc-donut-chart chart-title="Policy bindings by state" .segments=${d.bindings}></svc-donut-chart>`
          : nothing}
        ${d?.expiry
          ? html`
            <div>
              <svc-bar-chart chart-title="Agent certificates by expiry" .segments=${d.expiry}></svc-bar-chart>
              <p class="muted">Every node counted once. Agents renew at start when 30 days or fewer are left.
                          <a href="/nodes?sort=cert_not_after&order=asc">Nodes, soonest expiry first</a></p>
            </div>
          `
          : nothing}
      </section>
    `;
  }
}

customElements.define("svc-dashboard-page", SvcDashboardPage);
