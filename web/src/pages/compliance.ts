/**
 * `/compliance`: one row per (node, policy) result, filtered by status with counts, searchable, and each row
 * expandable into its per-key breakdown.
 */
import { html, nothing, type TemplateResult } from "lit";
import { PageElement } from "../components/page.ts";
import { ListController } from "../components/list_page.ts";
import { complianceBadge, complianceLabel, relativeTime } from "../components/ui.ts";
import { itemTable } from "../components/node_detail.ts";
import type { Answer } from "../api_types.ts";

/** Problems first, as the list is sorted by default. */
const STATUSES = ["error", "non_compliant", "unknown", "compliant", "inapplicable"] as const;

class SvcCompliancePage extends PageElement {
  static override properties = PageElement.withState("expanded");
  declare expanded: Set<string>;

  override pageTitle = "Compliance";
  protected override autoRefreshMs = 10_000;
  protected override liveTopics = ["compliance", "nodes", "policies"] as const;

  readonly list: ListController<"GET /api/v1/compliance"> = new ListController(this, {
    operation: "GET /api/v1/compliance",
    noun: "results",
    sort: { key: "severity", dir: "asc" },
    filters: [
      { name: "search", label: "Search", kind: "search", placeholder: "Node or policy name" },
      // Set by the dashboard's failing settings: the results where that setting of that policy fails.
      { name: "policy_id", label: "Policy", kind: "hidden" },
      { name: "setting", label: "Failing setting", kind: "hidden" },
      { name: "setting_schema", label: "Setting schema", kind: "hidden" },
      {
        name: "status",
        label: "Status",
        kind: "radio",
        anyLabel: () => `All ${this.#counts ? `(${this.#counts.total})` : ""}`,
        options: () =>
          STATUSES.map((s) =>
            [s, `${complianceLabel(s)} ${this.#counts ? `(${this.#counts[s]})` : ""}`] as const
          ),
      },
    ],
  });

  constructor() {
    super();
    this.expanded = new Set();
  }

  /** Results per status over the search, whatever status is chosen. */
  get #counts(): Answer<"GET /api/v1/compliance">["status_counts"] | undefined {
    return this.list.page?.status_counts;
  }

  protected override async load(): Promise<void> {
    // Pairs not reported yet count too, so the numbers equal the dashboard's.
    await this.list.load({ include_unreported: true });
  }

  #toggle(key: string): void {
    const next = new Set(this.expanded);
    if (next.has(key)) next.delete(key);
    else next.add(key);
    this.expanded = next;
  }

  override render() {
    return html`
      ${this.renderHeader(
        html`<sl-button @click=${() =>
          this.reload()}><sl-icon slot="prefix" name="arrow-clockwise"></sl-icon>Refresh</sl-button>`,
        "Every policy on every node it reaches, problems first; Pending means the node has not reported on its current version yet. Expand a row for the per-key breakdown.",
      )}
      ${this.renderLoadError()}
      ${this.list.renderFilters()}
      ${this.#renderTable()}
    `;
  }

  #renderTable(): TemplateResult | typeof nothing {
    return this.list.renderTable({
      caption: "Compliance results",
      empty: "No results yet. Results appear once agents apply bound policies.",
      head: (s) =>
        html`
          <th scope="col"><span class="visually-hidden">Details</span></th>
          ${s("Node", "node")} ${s("Policy", "policy")} ${s(
            "Status",
            "severity",
          )} <th scope="col">Message</th>
          ${s("Reported", "reported_at")}
        `,
      row: (r) => {
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
            <td>${complianceBadge(r.status)}</td>
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
      },
    });
  }
}

customElements.define("svc-compliance-page", SvcCompliancePage);
