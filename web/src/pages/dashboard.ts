/**
 * `/`: the fleet at a glance. It leads with the fleet: the share of nodes compliant, and what needs attention
 * (nodes failing or non-compliant, the policies and the settings failing on most nodes, nodes offline, agents
 * older than the server, certificates about to expire, disks without an escrowed key), each a link to the
 * list behind it. Then the releases in flight as progress bars that move on live hints, and the fleet's
 * trends over hours or days (`<svc-fleet-trends>`).
 * Then node status, compliance by status, policies by type and state, bindings by state and certificate
 * expiry as small charts whose numbers link to the filtered lists. The charts come from one request
 * (`GET /api/v1/dashboard/summary`), which leaves out the sections the person may not see; the attention list
 * asks the list endpoints for the counts it needs, again only those the person may read.
 */
import { html, nothing, type TemplateResult } from "lit";
import { type Answer, api, type CallArgs } from "../api.ts";
import { session } from "../session.ts";
import type { RolloutCounts } from "../components/policy_rollout.ts";
import { PageElement } from "../components/page.ts";
import type { ChartSegment } from "../components/charts.ts";
import { complianceLabel } from "../components/ui.ts";
import { CERT_EXPIRY_BUCKETS, type CertExpiryBucket } from "../cert_expiry.ts";
import { itemTitle } from "../compliance_items.ts";
import type { ReleaseInFlight } from "../components/release_progress.ts";
import "../components/fleet_trends.ts";
import "../components/release_progress.ts";

type FailingSetting = Answer<"GET /api/v1/compliance/failing-settings">[number];
type DashboardSummary = Answer<"GET /api/v1/dashboard/summary">;

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

/** What the attention list needs besides the summary; a part is absent when the person may not read it. */
interface Attention {
  /** Nodes whose worst result is an error. */
  errorNodes?: number;
  /** Released policies with failing nodes, most failing first (at most three). */
  failing?: Array<{ id: string; name: string; problems: number }>;
  /** Nodes whose agent is not the server's version, and those versions. */
  outdated?: { nodes: number; versions: string[] };
  /** Encrypted volumes whose recovery key is not escrowed. */
  unescrowed?: number;
  /** The settings failing on most nodes (at most three). */
  settings?: FailingSetting[];
  /** CA certificates distributed by Certificates policies that expire within 30 days, and how many have. */
  expiringCertificates?: { count: number; expired: number };
}

async function nodeCount(query: CallArgs<"GET /api/v1/nodes">["query"]): Promise<number> {
  return (await api.call("GET /api/v1/nodes", { query: { ...query, per_page: 1 } })).total;
}

/** The counts behind the attention list, each asked only with the permission it needs. */
async function loadAttention(serverVersion: Promise<string>): Promise<Attention> {
  const out: Attention = {};
  const jobs: Promise<void>[] = [];
  if (session.can("node:view")) {
    jobs.push(nodeCount({ compliance: "error" }).then((n) => void (out.errorNodes = n)));
    jobs.push((async () => {
      const [options, version] = await Promise.all([
        api.call("GET /api/v1/nodes/filter-options"),
        serverVersion,
      ]);
      const older = options.agent_versions.filter((v) => v && v !== version);
      const counts = await Promise.all(older.map((v) => nodeCount({ agent_version: v })));
      out.outdated = { nodes: counts.reduce((a, b) => a + b, 0), versions: older };
    })());
  }
  if (session.can("policy:view") && session.can("compliance:view")) {
    jobs.push((async () => {
      const released = await api.call("GET /api/v1/policies/all", {
        query: { state: "released", per_page: 200 },
      });
      if (released.items.length === 0) return void (out.failing = []);
      const counts: Record<string, RolloutCounts> = await api.call("GET /api/v1/policies/rollout", {
        query: { ids: released.items.map((p) => p.id).join(",") },
      });
      out.failing = released.items
        .map((p) => ({
          id: p.id,
          name: p.name,
          problems: (counts[p.id]?.error ?? 0) + (counts[p.id]?.non_compliant ?? 0),
        }))
        .filter((p) => p.problems > 0)
        .sort((a, b) => b.problems - a.problems || a.name.localeCompare(b.name))
        .slice(0, 3);
    })());
  }
  if (session.can("compliance:view")) {
    jobs.push(
      api.call("GET /api/v1/compliance/failing-settings", { query: { limit: 3 } }).then((s) =>
        void (out.settings = s)
      ),
    );
  }
  if (session.can("policy:view")) {
    jobs.push((async () => {
      const { items } = await api.call("GET /api/v1/certificates/expiring");
      out.expiringCertificates = { count: items.length, expired: items.filter((i) => i.expired).length };
    })());
  }
  if (session.can("disk_encryption:view")) {
    jobs.push((async () => {
      const volumes = await api.call("GET /api/v1/disk-encryption/volumes", {
        query: { escrow: "none", per_page: 1 },
      });
      out.unescrowed = volumes.total;
    })());
  }
  // One part failing (a permission changed, a slow query) leaves the others shown.
  await Promise.allSettled(jobs);
  return out;
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** The attention list's entries: only the ones with something to do. */
function attentionItems(summary: DashboardSummary, attention: Attention): TemplateResult[] {
  const items: TemplateResult[] = [];
  const item = (href: string, count: number, text: string, variant: "danger" | "warning") =>
    html`<li class=${`attention-${variant}`}><a href=${href}><strong>${count}</strong> ${text}</a></li>`;
  const fleet = summary.compliance?.nodes;
  const errors = attention.errorNodes ?? 0;
  if (errors > 0) {
    items.push(
      item(
        "/nodes?compliance=error",
        errors,
        `${errors === 1 ? "node" : "nodes"} where a policy failed to apply`,
        "danger",
      ),
    );
  }
  const nonCompliant = fleet ? Math.max(0, fleet.non_compliant - errors) : 0;
  if (nonCompliant > 0) {
    items.push(
      item(
        "/nodes?compliance=non_compliant",
        nonCompliant,
        `${nonCompliant === 1 ? "node" : "nodes"} not compliant`,
        "danger",
      ),
    );
  }
  for (const p of attention.failing ?? []) {
    items.push(
      html`<li class="attention-danger"><a href=${`/policies/${p.id}/edit`}>Policy <strong>${p.name}</strong>
      fails on ${plural(p.problems, "node")}</a></li>`,
    );
  }
  for (const s of attention.settings ?? []) {
    const { title } = itemTitle(s.policy_type, s.schema_id, s.key);
    const query = new URLSearchParams({ policy_id: s.policy_id, setting: s.key });
    if (s.schema_id) query.set("setting_schema", s.schema_id);
    items.push(
      html`<li class="attention-danger failing-setting"><a href=${`/compliance?${query}`}>Setting
      <strong>${title}</strong> of ${s.policy_name} fails on ${plural(s.nodes, "node")}</a></li>`,
    );
  }
  const certs = summary.certificates;
  if (certs && certs.expired > 0) {
    items.push(
      item(
        "/nodes?cert_expiry=expired",
        certs.expired,
        `agent ${certs.expired === 1 ? "certificate has" : "certificates have"} expired`,
        "danger",
      ),
    );
  }
  if (certs && certs.within_7_days > 0) {
    items.push(
      item(
        "/nodes?cert_expiry=within_7_days",
        certs.within_7_days,
        `agent ${certs.within_7_days === 1 ? "certificate expires" : "certificates expire"} within 7 days`,
        "warning",
      ),
    );
  }
  const offline = summary.nodes?.offline ?? 0;
  if (offline > 0) {
    items.push(
      item(
        "/nodes?status=offline&sort=last_seen&order=asc",
        offline,
        `${offline === 1 ? "node" : "nodes"} offline`,
        "warning",
      ),
    );
  }
  if (attention.outdated && attention.outdated.nodes > 0) {
    items.push(
      item(
        "/nodes?sort=agent_version&order=asc",
        attention.outdated.nodes,
        `${attention.outdated.nodes === 1 ? "node runs" : "nodes run"} an older agent (${
          attention.outdated.versions.join(", ")
        })`,
        "warning",
      ),
    );
  }
  if ((attention.unescrowed ?? 0) > 0) {
    items.push(
      item(
        "/disk-encryption?escrow=none",
        attention.unescrowed!,
        `encrypted ${attention.unescrowed === 1 ? "disk has" : "disks have"} no escrowed recovery key`,
        "warning",
      ),
    );
  }
  const expiring = attention.expiringCertificates;
  if (expiring && expiring.count > 0) {
    items.push(
      item(
        "/policies?type=Certificates&state=released",
        expiring.count,
        `distributed CA ${
          expiring.count === 1 ? "certificate expires" : "certificates expire"
        } within 30 days${expiring.expired ? ` (${expiring.expired} already expired)` : ""}`,
        expiring.expired ? "danger" : "warning",
      ),
    );
  }
  return items;
}

class SvcDashboardPage extends PageElement {
  static override properties = PageElement.withState("summary", "attention", "releases");
  declare summary: DashboardSummary | undefined;
  declare attention: Attention | undefined;
  /** Releases in flight; undefined without compliance:view. */
  declare releases: ReleaseInFlight[] | undefined;
  #serverVersion: Promise<string> | undefined;

  override pageTitle = "Dashboard";
  protected override autoRefreshMs = 10_000;
  protected override liveTopics = ["nodes", "compliance", "policies"] as const;

  protected override async load(): Promise<void> {
    this.#serverVersion ??= api.call("GET /api/v1/version").then((v) => v.version);
    const [summary, attention, releases] = await Promise.all([
      api.call("GET /api/v1/dashboard/summary"),
      loadAttention(this.#serverVersion),
      session.can("compliance:view") ? api.call("GET /api/v1/policies/in-flight") : undefined,
    ]);
    this.summary = summary;
    this.attention = attention;
    this.releases = releases;
  }

  /** The share of nodes compliant, and the list of what needs attention. */
  #renderFleet(summary: DashboardSummary): TemplateResult | typeof nothing {
    const fleet = summary.compliance?.nodes;
    const items = this.attention ? attentionItems(summary, this.attention) : [];
    if (!fleet && !summary.nodes) return nothing;
    const reached = fleet ? fleet.total - fleet.without_policies : 0;
    const percent = fleet && reached > 0 ? Math.round((fleet.compliant / reached) * 100) : undefined;
    return html`
      <section class="fleet-health" aria-label="Fleet health">
        ${fleet
          ? html`
            <div class="card fleet-compliance">
              <h2>Fleet compliance</h2>
              ${percent === undefined ? html`<p class="muted">No node receives a policy yet.</p>` : html`
                <p class="fleet-percent"><strong>${percent}%</strong> of nodes compliant</p>
                <meter min="0" max="100" low="80" high="95" optimum="100" value=${percent}
                  aria-label="Share of nodes compliant">${percent}%</meter>
                <p class="muted"><a href="/nodes?compliance=compliant">${fleet
                  .compliant} of ${reached} nodes</a>
                  that receive policies apply every one of them.${fleet.without_policies
                    ? html`
                      <a href="/nodes?compliance=none">${plural(fleet.without_policies, "node")}</a>
                      ${fleet.without_policies === 1 ? "receives" : "receive"} no policy.
                    `
                    : nothing}</p>
              `}
            </div>
          `
          : nothing}
        <div class="card needs-attention">
          <h2>Needs attention</h2>
          ${!this.attention
            ? html`<sl-spinner aria-label="Loading"></sl-spinner>`
            : items.length
            ? html`<ul class="attention-list">${items}</ul>`
            : html`<p class="muted attention-none">Nothing needs attention.</p>`}
        </div>
      </section>
    `;
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
      ${this.summary ? this.#renderFleet(this.summary) : nothing}
      ${this.releases
        ? html`<svc-release-progress .releases=${this.releases} .now=${this.now}></svc-release-progress>`
        : nothing}
      ${session.can("compliance:view") || session.can("node:view")
        ? html`<svc-fleet-trends></svc-fleet-trends>`
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
