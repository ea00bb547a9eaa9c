/**
 * `/audit-logs`: who did what, filtered on the server, with the recorded details of each entry and an
 * export of the filtered set (CSV or JSON; needs `audit_log:export`).
 */
import { html, nothing, type TemplateResult } from "lit";
import { api, type ListPage } from "../api.ts";
import { session } from "../session.ts";
import { setQuery } from "../router.ts";
import { PageElement } from "../components/page.ts";
import { downloadText, formatDate, notifyError, statusBadge, valueOf } from "../components/ui.ts";
import type { PageChange } from "../components/pager.ts";
import type { AuditEntry } from "../types.ts";

const FILTERS = ["action", "resource_type", "user", "outcome", "from", "to"] as const;

class SvcAuditLogsPage extends PageElement {
  static override properties = {
    ...PageElement.properties,
    page: { state: true },
    selected: { state: true },
  };
  declare page: ListPage<AuditEntry> | undefined;
  declare selected: AuditEntry | undefined;

  override pageTitle = "Audit logs";

  #q(name: string): string {
    return this.route?.query.get(name) ?? "";
  }

  #filters(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const f of FILTERS) {
      const v = this.#q(f);
      if (!v) continue;
      // Date inputs give a local day; the API takes instants, "to" exclusive: end at the next midnight.
      if (f === "from") out[f] = new Date(`${v}T00:00:00`).toISOString();
      else if (f === "to") {
        const end = new Date(`${v}T00:00:00`);
        end.setDate(end.getDate() + 1);
        out[f] = end.toISOString();
      } else out[f] = v;
    }
    return out;
  }

  protected override async load(): Promise<void> {
    this.page = await api.get<ListPage<AuditEntry>>("/audit-logs", {
      ...this.#filters(),
      page: this.#q("page") || 1,
      per_page: this.#q("per_page") || 50,
    });
  }

  #filter(name: string, value: string): void {
    if (value) this.route.query.set(name, value);
    else this.route.query.delete(name);
    this.route.query.delete("page");
    setQuery({ [name]: value, page: undefined });
    void this.reload();
  }

  #onPage = (e: CustomEvent<PageChange>) => {
    this.route.query.set("page", String(e.detail.page));
    this.route.query.set("per_page", String(e.detail.perPage));
    setQuery({ page: e.detail.page, per_page: e.detail.perPage });
    void this.reload();
  };

  async #export(format: "csv" | "json"): Promise<void> {
    try {
      const res = await api.request("GET", "/audit-logs/export", { query: { ...this.#filters(), format } });
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
      <div class="toolbar" role="search">
        <sl-input label="Action" placeholder="e.g. create, auth.login" clearable value=${this.#q("action")}
          @sl-change=${(e: Event) => this.#filter("action", valueOf(e))}></sl-input>
        <sl-input label="Resource type" placeholder="e.g. policy" clearable value=${this.#q("resource_type")}
          @sl-change=${(e: Event) => this.#filter("resource_type", valueOf(e))}></sl-input>
        <sl-input label="User" placeholder="Exact username" clearable value=${this.#q("user")}
          @sl-change=${(e: Event) => this.#filter("user", valueOf(e))}></sl-input>
        <sl-select label="Outcome" clearable value=${this.#q("outcome")}
          @sl-change=${(e: Event) => this.#filter("outcome", valueOf(e))}>
          <sl-option value="success">Success</sl-option>
          <sl-option value="failure">Failure</sl-option>
          <sl-option value="denied">Denied</sl-option>
        </sl-select>
        <sl-input type="date" label="From" value=${this.#q("from")} @sl-change=${(e: Event) =>
          this.#filter("from", valueOf(e))}></sl-input>
        <sl-input type="date" label="To" value=${this.#q("to")} @sl-change=${(e: Event) =>
          this.#filter("to", valueOf(e))}></sl-input>
      </div>
      ${this.#renderTable()} ${this.#renderDetail()}
    `;
  }

  #renderTable(): TemplateResult {
    const page = this.page;
    if (!page) return this.renderSpinner();
    if (page.items.length === 0) {
      return html`
        <div class="empty-state">
          <p>No entries match.</p>
        </div>
      `;
    }
    return html`
      <div class="table-wrap">
        <table class="data">
          <caption class="visually-hidden">Audit log</caption>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">User</th>
              <th scope="col">Action</th>
              <th scope="col">Resource</th>
              <th scope="col">Outcome</th>
              <th scope="col">Source IP</th>
              <th scope="col"><span class="visually-hidden">Details</span></th>
            </tr>
          </thead>
          <tbody>
            ${page.items.map((e) =>
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
              `
            )}
          </tbody>
        </table>
      </div>
      <svc-pager label="entries" .page=${page.page} .perPage=${page.per_page} .total=${page.total}
        @page-change=${this.#onPage}></svc-pager>
    `;
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
