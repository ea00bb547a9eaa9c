/**
 * `/nodes`: the fleet, paginated and filtered on the server; a row opens the node's detail drawer
 * (`?node=<id>` keeps it open across reloads and makes it linkable). Rows can be picked (or every node the
 * filters match) for bulk actions — move to a group, re-enroll, delete — each confirmed with the count and
 * its effects and reported node by node; the filters and sort can be saved as named views. A node stuck at
 * Pending says why in a tooltip.
 */
import { html, nothing, type TemplateResult } from "lit";
import { type Answer, api, type CallArgs } from "../api.ts";
import { session } from "../session.ts";
import { setQuery } from "../router.ts";
import { PageElement } from "../components/page.ts";
import { ListController } from "../components/list_page.ts";
import { complianceBadge, relativeTime, statusBadge, statusLabel } from "../components/ui.ts";
import "../components/node_detail.ts";
import "../components/deploy_agent.ts";
import "../components/node_bulk.ts";
import { pendingText } from "../components/node_pending.ts";
import type { NodeGroup, NodeSummary } from "../api_types.ts";
import { CERT_EXPIRY_BUCKETS } from "../cert_expiry.ts";

type FilterOptions = Answer<"GET /api/v1/nodes/filter-options">;

/** Worst compliance status with counts; never green while a policy fails or has not been reported on. */
function complianceCell(n: NodeSummary): TemplateResult | string {
  const r = n.compliance_rollup;
  if (!r) return "—";
  if (r.worst === "none") return html`<span class="muted">No policy</span>`;
  const detail = r.problems
    ? `${r.problems} of ${r.total} failing`
    : r.unknown
    ? `${r.unknown} of ${r.total} pending`
    : `${r.total} ${r.total === 1 ? "policy" : "policies"}`;
  const why = n.pending_reasons ?? [];
  return html`${complianceBadge(r.worst)} <span class="muted">${detail}</span>${
    why.length
      ? html`
        <sl-tooltip class="pending-why" content=${pendingText(why)} hoist>
          <sl-icon-button name="question-circle" label=${`Why ${n.name} is pending: ${pendingText(why)}`}
          ></sl-icon-button>
        </sl-tooltip>
      `
      : nothing
  }`;
}

class SvcNodesPage extends PageElement {
  static override properties = PageElement.withState("groups", "options", "openNode");
  declare groups: NodeGroup[];
  declare options: FilterOptions;
  declare openNode: string;

  override pageTitle = "Nodes";
  protected override autoRefreshMs = 10_000;
  protected override liveTopics = ["nodes", "compliance"] as const;

  constructor() {
    super();
    this.groups = [];
    this.options = { os: [], agent_versions: [], desktops: [] };
    this.openNode = "";
  }

  readonly list = new ListController(this, {
    operation: "GET /api/v1/nodes",
    noun: "nodes",
    views: "nodes",
    sort: { key: "name", dir: "asc" },
    filters: [
      { name: "search", label: "Search", kind: "search", placeholder: "Name, FQDN, IP or machine ID" },
      {
        name: "status",
        label: "Status",
        kind: "select",
        options: () => ["online", "degraded", "offline", "unknown"].map((s) => [s, statusLabel(s)]),
      },
      {
        name: "compliance",
        label: "Compliance",
        kind: "select",
        options: () => [
          ["error", "Error"],
          ["non_compliant", "Non-compliant"],
          ["unknown", "Pending"],
          ["compliant", "Compliant"],
          ["inapplicable", "Inapplicable"],
          ["none", "No policy"],
        ],
      },
      {
        name: "group",
        label: "Node group",
        kind: "select",
        options: () => [["none", "(no group)"], ...this.groups.map((g) => [g.id, g.name] as const)],
      },
      {
        name: "os",
        label: "Operating system",
        kind: "select",
        options: () => this.options.os.map((v) => [v, v]),
      },
      {
        name: "desktop",
        label: "Desktop",
        kind: "select",
        options: () => this.options.desktops.map((v) => [v, v]),
      },
      {
        name: "agent_version",
        label: "Agent version",
        kind: "select",
        options: () => this.options.agent_versions.map((v) => [v, v]),
      },
      {
        name: "cert_expiry",
        label: "Certificate expires",
        kind: "select",
        options: () => CERT_EXPIRY_BUCKETS.map((b) => [b.key, b.label]),
      },
    ],
  });

  override connectedCallback(): void {
    this.openNode = this.route?.query.get("node") ?? "";
    super.connectedCallback();
  }

  protected override async load(): Promise<void> {
    const [, groups, options] = await Promise.all([
      this.list.load(),
      this.groups.length
        ? Promise.resolve({ items: this.groups })
        : api.call("GET /api/v1/node-groups", { query: { per_page: 200 } })
          .catch(() => ({ items: [] as NodeGroup[] })),
      api.call("GET /api/v1/nodes/filter-options").catch(() => this.options),
    ]);
    this.groups = groups.items;
    this.options = options;
  }

  #open(id: string): void {
    this.openNode = id;
    setQuery({ node: id });
  }

  #closed = () => {
    this.openNode = "";
    setQuery({ node: undefined });
  };

  override render() {
    return html`
      ${this.renderHeader(
        html`<svc-deploy-agent></svc-deploy-agent>`,
        "Enrolled machines. Select a node for its facts, certificate and compliance.",
      )}
      ${this.renderLoadError()}
      ${this.list.renderFilters()}
      ${this.list.renderSelectionBar({
        actions: html`
          <svc-node-bulk .selection=${this.list.selection} .groups=${this.groups}
            @bulk-done=${() => {
              this.list.clearSelection();
              void this.reload();
            }}></svc-node-bulk>
        `,
        // The list's filters are the node list's query keys, as text; the server validates their values.
        matching: () =>
          api.call("GET /api/v1/nodes/matching", {
            query: this.list.query.filters() as CallArgs<"GET /api/v1/nodes/matching">["query"],
          }),
      })}
      ${this.#renderTable()}
      <svc-node-detail .nodeId=${this.openNode} .groups=${this.groups} @closed=${this.#closed}
        @changed=${() => this.reload()}></svc-node-detail>
    `;
  }

  /** Whether this person may do any bulk action (then rows can be picked). */
  get #bulk(): boolean {
    return session.canAny("node_group:edit", "node:delete", "node_group:create");
  }

  #renderTable(): TemplateResult | typeof nothing {
    return this.list.renderTable({
      caption: "Nodes",
      empty: "No nodes yet. New nodes appear here after they enroll with a token from a node group.",
      head: (s) =>
        html`
          ${this.#bulk ? this.list.selectHeader((items) => items) : nothing} ${s("Node", "name")} ${s(
            "Status",
            "status",
          )} <th scope="col">Compliance</th>
          <th scope="col">Groups</th> ${s("Operating system", "os")} ${s("Agent", "agent_version")}
          ${s("Last seen", "last_seen")} ${s("Certificate expires", "cert_not_after")}
        `,
      row: (n) =>
        html`
          <tr data-node-id=${n.id}>
            ${this.#bulk ? this.list.selectCell(n) : nothing}
            <td>
                            <button class="link" type="button" @click=${() => this.#open(n.id)}>${n
                              .name}</button>
                            ${n.fqdn && n.fqdn !== n.name
                              ? html`<div class="muted">${n.fqdn}</div>`
                              : nothing}
                          </td>
            <td>${statusBadge(n.status)}</td>
            <td class="compliance-cell">${complianceCell(n)}</td>
            <td>${n.groups.length
              ? n.groups.map((g) => g.name).join(", ")
              : html`<span class="muted">none</span>`}</td>
            <td>${[n.os_name, n.os_version].filter(Boolean).join(" ") || "—"}</td>
            <td>${n.agent_version || "—"}</td>
            <td class="last-seen">${n.connected_since
              ? html`Connected since ${relativeTime(n.connected_since)}`
              : relativeTime(n.last_seen)}</td>
            <td>${n.cert_not_after ? relativeTime(n.cert_not_after) : "—"}</td>
          </tr>
        `,
    });
  }
}

customElements.define("svc-nodes-page", SvcNodesPage);
