/**
 * `/compliance`: one row per (node, policy) result, filtered by status with counts, searchable, and each row
 * expandable into its per-key breakdown.
 */
import { html, nothing, type TemplateResult } from "lit";
import { api, type ListPage } from "../api.ts";
import { setQuery } from "../router.ts";
import { PageElement } from "../components/page.ts";
import {
  relativeTime,
  sortHeader,
  type SortState,
  statusBadge,
  statusLabel,
  valueOf,
} from "../components/ui.ts";
import { itemTable } from "../components/node_detail.ts";
import type { PageChange } from "../components/pager.ts";
import type { ComplianceRow, StatusCounts } from "../types.ts";

/** Problems first, as the list is sorted by default. */
const STATUSES = ["error", "non_compliant", "unknown", "compliant", "inapplicable"] as const;

class SvcCompliancePage extends PageElement {
  static override properties = {
    ...PageElement.properties,
    page: { state: true },
    sort: { state: true },
    expanded: { state: true },
  };
  declare page: (ListPage<ComplianceRow> & { status_counts: StatusCounts }) | undefined;
  declare sort: SortState;
  declare expanded: Set<string>;

  override pageTitle = "Compliance";
  protected override autoRefreshMs = 10_000;
  protected override liveTopics = ["compliance", "nodes", "policies"] as const;

  constructor() {
    super();
    this.sort = { key: "severity", dir: "asc" };
    this.expanded = new Set();
  }

  #q(name: string): string {
    return this.route?.query.get(name) ?? "";
  }

  protected override async load(): Promise<void> {
    this.page = await api.get("/compliance", {
      page: this.#q("page") || 1,
      per_page: this.#q("per_page") || 25,
      status: this.#q("status"),
      search: this.#q("search"),
      // Pairs not reported yet count too, so the numbers equal the dashboard's.
      include_unreported: true,
      sort: this.sort.key,
      order: this.sort.dir,
    });
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
    void this.reload();
  };

  #onPage = (e: CustomEvent<PageChange>) => {
    this.route.query.set("page", String(e.detail.page));
    this.route.query.set("per_page", String(e.detail.perPage));
    setQuery({ page: e.detail.page, per_page: e.detail.perPage });
    void this.reload();
  };

  #toggle(key: string): void {
    const next = new Set(this.expanded);
    if (next.has(key)) next.delete(key);
    else next.add(key);
    this.expanded = next;
  }

  override render() {
    const counts = this.page?.status_counts;
    const active = this.#q("status");
    return html`
      ${this.renderHeader(
        html`<sl-button @click=${() =>
          this.reload()}><sl-icon slot="prefix" name="arrow-clockwise"></sl-icon>Refresh</sl-button>`,
        "Every policy on every node it reaches, problems first; Unknown means the node has not reported on it yet. Expand a row for the per-key breakdown.",
      )}
      ${this.renderLoadError()}
      <div class="toolbar" role="search">
        <sl-input label="Search" placeholder="Node or policy name" clearable value=${this.#q("search")}
          @sl-change=${(e: Event) => this.#filter("search", valueOf(e))}></sl-input>
        <sl-radio-group label="Status" value=${active || "all"} class="status-filter"
          @sl-change=${(e: Event) => {
            const v = valueOf(e);
            this.#filter("status", v === "all" ? "" : v);
          }}>
          <sl-radio-button value="all">All ${counts ? `(${counts.total})` : ""}</sl-radio-button>
          ${STATUSES.map((s) =>
            html`<sl-radio-button value=${s}>${statusLabel(s)} ${
              counts ? `(${counts[s]})` : ""
            }</sl-radio-button>`
          )}
        </sl-radio-group>
      </div>
      ${this.#renderTable()}
    `;
  }

  #renderTable(): TemplateResult {
    const page = this.page;
    if (!page) return this.renderSpinner();
    if (page.items.length === 0) {
      return html`
        <div class="empty-state">
          <p>No results match. Results appear once agents apply bound policies.</p>
        </div>
      `;
    }
    const s = (label: string, key: string) => sortHeader(label, key, this.sort, this.#onSort);
    return html`
      <div class="table-wrap">
        <table class="data">
          <caption class="visually-hidden">Compliance results</caption>
          <thead>
            <tr>
              <th scope="col"><span class="visually-hidden">Details</span></th>
              ${s("Node", "node")} ${s("Policy", "policy")} ${s(
                "Status",
                "severity",
              )} <th scope="col">Message</th>
              ${s("Reported", "reported_at")}
            </tr>
          </thead>
          <tbody>
            ${page.items.map((r) => {
              const key = `${r.node_id}/${r.policy_id}`;
              const open = this.expanded.has(key);
              return html`
                <tr>
                  <td>
                    <sl-icon-button name=${open ? "chevron-down" : "chevron-right"} @click=${() =>
                      this.#toggle(key)}
                      label=${`${open ? "Hide" : "Show"} items of ${r.policy_name} on ${r.node_name}`}
                      aria-expanded=${String(open)}></sl-icon-button>
                  </td>
                  <td><a href=${`/nodes?node=${r.node_id}`}>${r.node_name}</a></td>
                  <td><a href=${`/policies/${r.policy_id}/edit`}>${r.policy_name}</a> <span class="muted">${r
                    .policy_type}</span></td>
                  <td>${statusBadge(r.status)}</td>
                  <td>${r.message}</td>
                  <td>${relativeTime(
                    r.reported_at,
                  )}${r.reported_version !== null && r.reported_version !== r.policy_version
                    ? html`
                      <sl-badge variant="warning" title="The node reported on an older version">v${r
                        .reported_version}</sl-badge>
                    `
                    : nothing}</td>
                </tr>
                                ${open
                                  ? html`
                                    <tr>
                                      <td></td>
                                      <td colspan="5">${itemTable(r)}</td>
                                    </tr>
                                  `
                                  : nothing}
              `;
            })}
          </tbody>
        </table>
      </div>
      <svc-pager label="results" .page=${page.page} .perPage=${page.per_page} .total=${page.total}
        @page-change=${this.#onPage}></svc-pager>
    `;
  }
}

customElements.define("svc-compliance-page", SvcCompliancePage);
