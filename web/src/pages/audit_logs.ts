/**
 * `/audit-logs`: who did what, filtered on the server, with the recorded details of each entry and an
 * export of the filtered set (CSV or JSON; needs `audit_log:export`).
 */
import { html, nothing, type TemplateResult } from "lit";
import { api } from "../api.ts";
import { session } from "../session.ts";
import { PageElement } from "../components/page.ts";
import { ListController } from "../components/list_page.ts";
import { downloadText, formatDate, notifyError, statusBadge } from "../components/ui.ts";
import type { AuditEntry } from "../types.ts";

/** Date inputs give a local day; the API takes instants, "to" exclusive: it ends at the next midnight. */
function dayBounds(filters: Record<string, string>): Record<string, string> {
  const out = { ...filters };
  if (out.from) out.from = new Date(`${out.from}T00:00:00`).toISOString();
  if (out.to) {
    const end = new Date(`${out.to}T00:00:00`);
    end.setDate(end.getDate() + 1);
    out.to = end.toISOString();
  }
  return out;
}

class SvcAuditLogsPage extends PageElement {
  static override properties = {
    ...PageElement.properties,
    selected: { state: true },
  };
  declare selected: AuditEntry | undefined;

  override pageTitle = "Audit logs";

  readonly list = new ListController<AuditEntry>(this, {
    noun: "entries",
    perPage: 50,
    // The log grows without bound: an offset deep into it reads every row before the page.
    paging: "cursor",
    filters: [
      { name: "action", label: "Action", kind: "search", placeholder: "e.g. create, auth.login" },
      { name: "resource_type", label: "Resource type", kind: "search", placeholder: "e.g. policy" },
      { name: "user", label: "User", kind: "search", placeholder: "Exact username" },
      {
        name: "outcome",
        label: "Outcome",
        kind: "select",
        options: () => [["success", "Success"], ["failure", "Failure"], ["denied", "Denied"]],
      },
      { name: "from", label: "From", kind: "date" },
      { name: "to", label: "To", kind: "date" },
    ],
  });

  protected override async load(): Promise<void> {
    await this.list.load("/audit-logs", dayBounds(this.list.query.filters()));
  }

  async #export(format: "csv" | "json"): Promise<void> {
    try {
      const res = await api.request("GET", "/audit-logs/export", {
        query: { ...dayBounds(this.list.query.filters()), format },
      });
      downloadText(`audit-log.${format}`, await res.text(), res.headers.get("content-type") ?? "text/plain");
    } catch (err) {
      notifyError(err);
    }
  }

  override render() {
    const actions = session.can("audit_log:export")
      ? html`
        <sl-dropdown>
          <sl-button slot="trigger" caret><sl-icon slot="prefix" name="download"></sl-icon>Export</sl-button>
          <sl-menu @sl-select=${(e: CustomEvent<{ item: { value: string } }>) =>
            this.#export(e.detail.item.value as "csv" | "json")}>
            <sl-menu-item value="csv">CSV</sl-menu-item>
            <sl-menu-item value="json">JSON</sl-menu-item>
          </sl-menu>
        </sl-dropdown>
      `
      : nothing;
    return html`
      ${this.renderHeader(
        actions,
        "Every change, login and refused request, newest first. Secrets are redacted.",
      )}
      ${this.renderLoadError()}
      ${this.list.renderFilters()}
      ${this.#renderTable()} ${this.#renderDetail()}
    `;
  }

  #renderTable(): TemplateResult | typeof nothing {
    return this.list.renderTable({
      caption: "Audit log",
      empty: "No entries yet.",
      head: html`
        <th scope="col">Time</th>
        <th scope="col">User</th>
        <th scope="col">Action</th>
        <th scope="col">Resource</th>
        <th scope="col">Outcome</th>
        <th scope="col">Source IP</th>
        <th scope="col"><span class="visually-hidden">Details</span></th>
      `,
      row: (e) =>
        html`
          <tr>
            <td>${formatDate(e.created_at)}</td>
            <td>${e.username || html`<span class="muted">${e.node_id ? "agent" : "system"}</span>`}</td>
            <td><code>${e.action}</code></td>
            <td>${e.resource_type}${e.resource_name || e.resource_id
              ? html`: ${e.resource_name || e.resource_id}`
              : nothing}</td>
            <td>${statusBadge(e.outcome)}</td>
            <td>${e.source_ip}</td>
            <td>
              <sl-button size="small" @click=${() => this.selected = e}>Details</sl-button>
            </td>
          </tr>
        `,
    });
  }

  #renderDetail(): TemplateResult | typeof nothing {
    const e = this.selected;
    if (!e) return nothing;
    return html`
      <sl-drawer open label=${`Audit entry ${e.id}`} @sl-after-hide=${(ev: Event) => {
        if (ev.target === ev.currentTarget) this.selected = undefined;
      }}>
        <dl class="facts">
          <dt>Time</dt>
          <dd>${formatDate(e.created_at)}</dd>
          <dt>User</dt>
          <dd>${e.username || "—"}</dd>
          <dt>Action</dt>
          <dd><code>${e.action}</code></dd>
          <dt>Outcome</dt>
          <dd>${statusBadge(e.outcome)}</dd>
          <dt>Resource</dt>
          <dd>${e.resource_type} ${e.resource_name} <code>${e.resource_id}</code></dd>
          <dt>Source IP</dt>
          <dd>${e.source_ip || "—"}</dd>
        </dl>
        <h3>Details</h3>
        <pre class="block">${JSON.stringify(e.details ?? {}, null, 2)}</pre>
      </sl-drawer>
    `;
  }
}

customElements.define("svc-audit-logs-page", SvcAuditLogsPage);
