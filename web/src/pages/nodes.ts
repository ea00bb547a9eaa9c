/**
 * `/nodes`: the fleet, paginated and filtered on the server; a row opens the node's detail drawer
 * (`?node=<id>` keeps it open across reloads and makes it linkable).
 */
import { html, nothing, type TemplateResult } from "lit";
import { api, type ListPage } from "../api.ts";
import { setQuery } from "../router.ts";
import { PageElement } from "../components/page.ts";
import {
  fromOptionValue,
  relativeTime,
  sortHeader,
  type SortState,
  statusBadge,
  toOptionValue,
  valueOf,
} from "../components/ui.ts";
import type { PageChange } from "../components/pager.ts";
import "../components/node_detail.ts";
import "../components/deploy_agent.ts";
import type { NodeGroup, NodeSummary } from "../types.ts";

interface FilterOptions {
  os: string[];
  agent_versions: string[];
  desktops: string[];
}

/** Worst compliance status with counts; never green while a policy fails or has not been reported on. */
function complianceCell(n: NodeSummary): TemplateResult | string {
  const r = n.compliance_rollup;
  if (!r) return "—";
  if (r.worst === "none") return html`<span class="muted">No policy</span>`;
  const detail = r.problems
    ? `${r.problems} of ${r.total} failing`
    : r.unknown
    ? `${r.unknown} of ${r.total} not reported`
    : `${r.total} ${r.total === 1 ? "policy" : "policies"}`;
  return html`${statusBadge(r.worst)} <span class="muted">${detail}</span>`;
}

class SvcNodesPage extends PageElement {
  static override properties = {
    ...PageElement.properties,
    page: { state: true },
    groups: { state: true },
    options: { state: true },
    sort: { state: true },
    openNode: { state: true },
  };
  declare page: ListPage<NodeSummary> | undefined;
  declare groups: NodeGroup[];
  declare options: FilterOptions;
  declare sort: SortState;
  declare openNode: string;

  override pageTitle = "Nodes";
  protected override autoRefreshMs = 10_000;
  protected override liveTopics = ["nodes", "compliance"] as const;

  constructor() {
    super();
    this.groups = [];
    this.options = { os: [], agent_versions: [], desktops: [] };
    this.sort = { key: "name", dir: "asc" };
    this.openNode = "";
  }

  override connectedCallback(): void {
    const q = this.route?.query;
    if (q?.get("sort")) this.sort = { key: q.get("sort")!, dir: q.get("order") === "desc" ? "desc" : "asc" };
    this.openNode = q?.get("node") ?? "";
    super.connectedCallback();
  }

  #q(name: string): string {
    return this.route?.query.get(name) ?? "";
  }

  protected override async load(): Promise<void> {
    const [page, groups, options] = await Promise.all([
      api.get<ListPage<NodeSummary>>("/nodes", {
        page: this.#q("page") || 1,
        per_page: this.#q("per_page") || 25,
        status: this.#q("status"),
        group: this.#q("group"),
        os: this.#q("os"),
        agent_version: this.#q("agent_version"),
        desktop: this.#q("desktop"),
        compliance: this.#q("compliance"),
        search: this.#q("search"),
        sort: this.sort.key,
        order: this.sort.dir,
      }),
      this.groups.length
        ? Promise.resolve({ items: this.groups })
        : api.get<ListPage<NodeGroup>>("/node-groups", {
          per_page: 200,
        }).catch(() => ({ items: [] as NodeGroup[] })),
      api.get<FilterOptions>("/nodes/filter-options").catch(() => this.options),
    ]);
    this.page = page;
    this.groups = groups.items;
    this.options = options;
  }

  #filter(name: string, value: string): void {
    if (value) this.route.query.set(name, value);
    else this.route.query.delete(name);
    this.route.query.delete("page");
    setQuery({ [name]: value, page: undefined });
    void this.reload();
  }

  #onSort = (sort: SortState) => {
    this.sort = sort;
    setQuery({ sort: sort.key, order: sort.dir });
    void this.reload();
  };

  #onPage = (e: CustomEvent<PageChange>) => {
    this.route.query.set("page", String(e.detail.page));
    this.route.query.set("per_page", String(e.detail.perPage));
    setQuery({ page: e.detail.page, per_page: e.detail.perPage });
    void this.reload();
  };

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
      <div class="toolbar" role="search">
        <sl-input label="Search" placeholder="Name, FQDN, IP or machine ID" clearable value=${this.#q(
          "search",
        )}
          @sl-change=${(e: Event) => this.#filter("search", valueOf(e))}></sl-input>
        ${this.#select("status", "Status", ["online", "degraded", "offline", "unknown"].map((s) => [s, s]))}
        ${this.#select("compliance", "Compliance", [
          ["error", "Error"],
          ["non_compliant", "Non-compliant"],
          ["unknown", "Not reported yet"],
          ["compliant", "Compliant"],
          ["inapplicable", "Inapplicable"],
          ["none", "No policy"],
        ])}
        ${this.#select("group", "Node group", [
          ["none", "(no group)"],
          ...this.groups.map((g) => [g.id, g.name] as [string, string]),
        ])}
        ${this.#select("os", "Operating system", this.options.os.map((v) => [v, v]))}
        ${this.#select("desktop", "Desktop", this.options.desktops.map((v) => [v, v]))}
        ${this.#select("agent_version", "Agent version", this.options.agent_versions.map((v) => [v, v]))}
      </div>
      ${this.#renderTable()}
      <svc-node-detail .nodeId=${this.openNode} .groups=${this.groups} @closed=${this.#closed}
        @changed=${() => this.reload()}></svc-node-detail>
    `;
  }

  #select(name: string, label: string, options: Array<[string, string]>): TemplateResult {
    return html`
      <sl-select label=${label} clearable hoist value=${toOptionValue(this.#q(name))}
        @sl-change=${(e: Event) => this.#filter(name, fromOptionValue(valueOf(e)))}>
            ${options.map(([v, text]) => html`<sl-option value=${toOptionValue(v)}>${text}</sl-option>`)}
          </sl-select>
    `;
  }

  #renderTable(): TemplateResult {
    const page = this.page;
    if (!page) return this.renderSpinner();
    if (page.items.length === 0) {
      return html`
        <div class="empty-state">
          <p>No nodes match. New nodes appear here after they enroll with a token from a node group.</p>
        </div>
      `;
    }
    const s = (label: string, key: string) => sortHeader(label, key, this.sort, this.#onSort);
    return html`
      <div class="table-wrap">
        <table class="data">
          <caption class="visually-hidden">Nodes</caption>
          <thead>
            <tr>
              ${s("Node", "name")} ${s("Status", "status")} <th scope="col">Compliance</th>
              <th scope="col">Groups</th> ${s(
                "Operating system",
                "os",
              )}
              ${s("Agent", "agent_version")} ${s("Last seen", "last_seen")} ${s(
                "Certificate expires",
                "cert_not_after",
              )}
            </tr>
          </thead>
          <tbody>
            ${page.items.map((n) =>
              html`
                <tr data-node-id=${n.id}>
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
              `
            )}
          </tbody>
        </table>
      </div>
      <svc-pager label="nodes" .page=${page.page} .perPage=${page.per_page} .total=${page.total}
        @page-change=${this.#onPage}></svc-pager>
    `;
  }
}

customElements.define("svc-nodes-page", SvcNodesPage);
