/**
 * `/audit-logs`: who did what to which thing, by name (the ids an entry mentions resolved by the server, the
 * id once the thing is deleted), what changed (before → after), filtered on the server, with the recorded
 * details of each entry and an export of the filtered set (CSV or JSON; needs `audit_log:export`).
 */
import { html, nothing, type TemplateResult } from "lit";
import { api } from "../api.ts";
import { session } from "../session.ts";
import { PageElement } from "../components/page.ts";
import { ListController } from "../components/list_page.ts";
import { columns, downloadText, formatDate, notifyError, statusBadge } from "../components/ui.ts";
import type { ListRow } from "../api_types.ts";
import { auditSummary, changeLines } from "../audit_text.ts";

type AuditEntry = ListRow<"GET /api/v1/audit-logs">;

/** Where a resource of the console lives, when it still exists. */
function resourceHref(type: string, id: string, name: string): string | undefined {
  if (type === "policy") return `/policies/${id}/edit`;
  if (type === "node") return `/nodes?node=${id}`;
  if (type === "node_group") return `/node-groups?search=${encodeURIComponent(name)}`;
  return undefined;
}

/** Kinds of resource whose current names the server resolves (server/audit/audit_names.ts). */
const RESOLVED_TYPES = new Set(["policy", "node", "node_group", "user", "role", "user_group", "binding"]);

/** "policy: Browser" — the resource by name, linked while it exists; its id when nothing else is known. */
function resourceCell(e: AuditEntry): TemplateResult {
  const name = e.resource_name || e.resource_id;
  if (!name) return html`${e.resource_type}`;
  const exists = !!e.names?.[e.resource_id.toLowerCase()];
  const href = exists ? resourceHref(e.resource_type, e.resource_id, name) : undefined;
  const gone = !exists && RESOLVED_TYPES.has(e.resource_type) && /^[0-9a-f-]{36}$/i.test(e.resource_id);
  return html`${e.resource_type}: ${href ? html`<a href=${href}>${name}</a>` : name}${
    gone && e.resource_name
      ? html`
        <span class="muted">(deleted or renamed)</span>
      `
      : nothing
  }`;
}

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
  static override properties = PageElement.withState("selected");
  declare selected: AuditEntry | undefined;

  override pageTitle = "Audit logs";

  readonly list = new ListController(this, {
    operation: "GET /api/v1/audit-logs",
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
    await this.list.load(dayBounds(this.list.query.filters()));
  }

  async #export(format: "csv" | "json"): Promise<void> {
    try {
      const res = await api.fetch("GET /api/v1/audit-logs/export", {
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
        ${columns("Time", "User", "Action", "Resource", "What changed", "Outcome", "Source IP")}
        <th scope="col"><span class="visually-hidden">Details</span></th>
      `,
      row: (e) =>
        html`
          <tr>
            <td>${formatDate(e.created_at)}</td>
            <td>${e.username || html`<span class="muted">${e.node_id ? "agent" : "system"}</span>`}</td>
            <td><code>${e.action}</code></td>
            <td class="audit-resource">${resourceCell(e)}</td>
            <td class="audit-changes">${auditSummary(e)}</td>
            <td>${statusBadge(e.outcome)}</td>
            <td>${e.source_ip}</td>
            <td>
              <sl-button size="small" @click=${() => this.selected = e}>Details</sl-button>
            </td>
          </tr>
        `,
    });
  }

  #renderChanges(e: AuditEntry): TemplateResult | typeof nothing {
    const lines = changeLines(e);
    const summary = auditSummary(e);
    if (!lines.length) {
      return summary
        ? html`
          <h3>What happened</h3>
          <p class="audit-summary">${summary}</p>
        `
        : nothing;
    }
    return html`
      <h3>What changed</h3>
      <table class="data-table audit-change-table">
        <caption class="visually-hidden">Fields changed by this entry</caption>
        <thead>
          <tr>
            ${columns("Field", "Before", "After")}
          </tr>
        </thead>
        <tbody>
          ${lines.map((l) =>
            html`
              <tr data-field=${l.field}>
                <th scope="row">${l.label}</th>
                <td>${l.kind === "set" ? l.from || "—" : l.from}</td>
                <td>${l.to}</td>
              </tr>
            `
          )}
        </tbody>
      </table>
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
          <dd>${resourceCell(e)} <code>${e.resource_id}</code></dd>
          <dt>Source IP</dt>
          <dd>${e.source_ip || "—"}</dd>
        </dl>
        ${this.#renderChanges(e)}
        ${Object.keys(e.names ?? {}).length
          ? html`
            <h3>Named in this entry</h3>
            <dl class="facts audit-names">${Object.entries(e.names ?? {}).map(([id, n]) =>
              html`
                <dt>${n.type.replaceAll("_", " ")}</dt>
                <dd>${n.name} <code class="muted">${id}</code></dd>
              `
            )}</dl>
          `
          : nothing}
        <h3>Details</h3>
        <pre class="block">${JSON.stringify(e.details ?? {}, null, 2)}</pre>
      </sl-drawer>
    `;
  }
}

customElements.define("svc-audit-logs-page", SvcAuditLogsPage);
