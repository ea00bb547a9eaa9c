/**
 * `<svc-node-detail>`: the node drawer — facts, groups, certificate, notes, per-policy compliance with the
 * per-item breakdown, per-setting provenance, and the actions (request metadata, revoke, re-enroll a revoked
 * node, delete).
 * Fires `closed` when the drawer closes and `changed` after an action altered the node.
 */
import { boundProperties, LightElement, stateProperties } from "./light_element.ts";
import { html, nothing, type TemplateResult } from "lit";
import { api, ApiError } from "../api.ts";
import { LiveRefresh } from "../live_events.ts";
import { session } from "../session.ts";
import { errorText } from "./page.ts";
import { itemMessage, itemTitle } from "../compliance_items.ts";
import {
  complianceBadge,
  confirmAction,
  formatDate,
  notify,
  notifyError,
  relativeTime,
  statusBadge,
  whenHidden,
} from "./ui.ts";
import "./provenance.ts";
import { renderPendingReasons } from "./node_pending.ts";
import type { Answer } from "../api.ts";
import type { ComplianceRow, NodeDetail, NodeGroup } from "../api_types.ts";

class SvcNodeDetail extends LightElement {
  static override properties = {
    ...boundProperties("nodeId", "groups"),
    ...stateProperties("node", "compliance", "error", "addGroup", "reEnrollToken"),
  };
  declare nodeId: string;
  declare groups: NodeGroup[];
  declare node: NodeDetail | undefined;
  declare compliance: Answer<"GET /api/v1/nodes/{id}/compliance"> | undefined;
  declare error: unknown;
  declare addGroup: string;
  /** The answer of `POST /nodes/{id}/re-enroll`, shown once. */
  declare reEnrollToken: Answer<"POST /api/v1/nodes/{id}/re-enroll"> | undefined;

  constructor() {
    super();
    this.nodeId = "";
    this.groups = [];
    this.addGroup = "";
  }

  /** The open node refreshes itself in place (status, compliance), like the fleet pages behind it. */
  #live = new LiveRefresh(this, {
    topics: ["nodes", "compliance"],
    reload: () => this.nodeId && this.node ? this.#load({ quiet: true }) : Promise.resolve(),
    pollMs: () => 10_000,
    relevant: (hint) => !hint.ids || hint.ids.includes(this.nodeId),
  });

  override updated(changed: Map<string, unknown>): void {
    if (changed.has("nodeId")) {
      const drawer = this.querySelector("sl-drawer") as (HTMLElement & { open: boolean }) | null;
      if (this.nodeId) {
        void this.#load();
        if (drawer) drawer.open = true;
      } else if (drawer) {
        drawer.open = false;
      }
    }
  }

  async #load(options: { quiet?: boolean } = {}): Promise<void> {
    const id = this.nodeId;
    if (id !== this.node?.id) this.reEnrollToken = undefined;
    if (!options.quiet) {
      this.node = undefined;
      this.compliance = undefined;
      this.error = undefined;
    }
    try {
      const [node, compliance] = await Promise.all([
        api.call("GET /api/v1/nodes/{id}", { path: { id } }),
        session.can("compliance:view")
          ? api.call("GET /api/v1/nodes/{id}/compliance", { path: { id } })
          : Promise.resolve(undefined),
      ]);
      if (id !== this.nodeId) return;
      this.node = node;
      this.compliance = compliance;
      this.error = undefined;
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 401)) this.error = err;
    }
  }

  #changed(): void {
    this.dispatchEvent(new Event("changed", { bubbles: true }));
    void this.#load();
  }

  async #requestMetadata(): Promise<void> {
    try {
      await api.call("POST /api/v1/nodes/{id}/metadata-request", { path: { id: this.node!.id } });
      notify(`Asked ${this.node!.name} to send its facts; they appear after its next heartbeat.`, "success");
    } catch (err) {
      notifyError(err);
    }
  }

  async #revoke(): Promise<void> {
    const n = this.node!;
    const ok = await confirmAction({
      title: `Revoke the certificate of ${n.name}`,
      message:
        "Both ports refuse the certificate from now on and its open stream is closed. To bring the node " +
        "back, use Re-enroll: it keeps the node's record and history.",
      confirmLabel: "Revoke",
      danger: true,
      typeToConfirm: n.name,
    });
    if (!ok) return;
    try {
      await api.call("POST /api/v1/nodes/{id}/revoke", { path: { id: n.id } });
      notify(`Certificate of ${n.name} revoked`, "success");
      this.#changed();
    } catch (err) {
      notifyError(err);
    }
  }

  async #reEnroll(): Promise<void> {
    const n = this.node!;
    try {
      this.reEnrollToken = await api.call("POST /api/v1/nodes/{id}/re-enroll", { path: { id: n.id } });
    } catch (err) {
      notifyError(err);
    }
  }

  #renderReEnroll(): TemplateResult | typeof nothing {
    const t = this.reEnrollToken;
    if (!t) return nothing;
    return html`
      <div class="re-enroll-token">
        <sl-alert variant="warning" open>
          This token is shown only now. It re-enrolls this node only, works once and expires
          ${formatDate(t.expires_at)} (5 minutes). Run on the node, as root:
        </sl-alert>
        <pre class="block re-enroll-command">${t.command}</pre>
        <sl-copy-button value=${t
          .command} copy-label="Copy command" success-label="Command copied">
          <sl-icon slot="copy-icon" name="copy" label="Copy command"></sl-icon>
        </sl-copy-button>
        <p class="muted">The running agent picks the new certificate up at its next retry; the node keeps its
          groups, compliance history and audit trail.</p>
      </div>
    `;
  }

  async #delete(): Promise<void> {
    const n = this.node!;
    const ok = await confirmAction({
      title: `Delete ${n.name}`,
      message: "The node's certificates are revoked and its records (groups, compliance) are removed.",
      confirmLabel: "Delete",
      danger: true,
      typeToConfirm: n.name,
    });
    if (!ok) return;
    try {
      await api.call("DELETE /api/v1/nodes/{id}", { path: { id: n.id } });
      notify(`${n.name} deleted`, "success");
      this.dispatchEvent(new Event("changed", { bubbles: true }));
      this.#close();
    } catch (err) {
      notifyError(err);
    }
  }

  async #saveNotes(): Promise<void> {
    const notes = String((this.querySelector(".node-notes") as HTMLTextAreaElement | null)?.value ?? "");
    try {
      await api.call("PUT /api/v1/nodes/{id}", { path: { id: this.node!.id }, body: { notes } });
      notify("Notes saved", "success");
    } catch (err) {
      notifyError(err);
    }
  }

  async #addToGroup(): Promise<void> {
    if (!this.addGroup) return;
    try {
      await api.call("POST /api/v1/node-groups/{id}/members", {
        path: { id: this.addGroup },
        body: { node_ids: [this.node!.id] },
      });
      notify("Added. The node receives the group's policies when its stream next reconnects.", "success");
      this.addGroup = "";
      this.#changed();
    } catch (err) {
      notifyError(err);
    }
  }

  async #removeFromGroup(group: { id: string; name: string }): Promise<void> {
    const ok = await confirmAction({
      title: `Remove ${this.node!.name} from ${group.name}`,
      message: "The node stops receiving the group's policies when its stream next reconnects.",
      confirmLabel: "Remove",
    });
    if (!ok) return;
    try {
      await api.call("DELETE /api/v1/node-groups/{id}/members/{nodeId}", {
        path: { id: group.id, nodeId: this.node!.id },
      });
      this.#changed();
    } catch (err) {
      notifyError(err);
    }
  }

  #close(): void {
    const drawer = this.querySelector("sl-drawer") as (HTMLElement & { open: boolean }) | null;
    if (drawer) drawer.open = false;
  }

  override render() {
    const n = this.node;
    return html`
      <sl-drawer label=${n ? `Node ${n.name}` : "Node"} style="--size: min(52rem, 100vw)"
        @sl-after-hide=${whenHidden(() => this.dispatchEvent(new Event("closed")))}>
        ${this.error ? html`<sl-alert variant="danger" open>${errorText(this.error)}</sl-alert>` : nothing}
        ${this.nodeId && !n && !this.error ? html`<sl-spinner></sl-spinner>` : nothing}
        ${n ? this.#renderNode(n) : nothing}
      </sl-drawer>
    `;
  }

  #renderNode(n: NodeDetail): TemplateResult {
    const memberOf = new Set(n.groups.map((g) => g.id));
    const canEditGroups = session.can("node_group:edit");
    return html`
      <sl-tab-group>
        <sl-tab slot="nav" panel="details">Details</sl-tab>
        <sl-tab slot="nav" panel="compliance">Compliance</sl-tab>
        <sl-tab slot="nav" panel="settings">Effective settings</sl-tab>
        <sl-tab-panel name="details">
          ${renderPendingReasons(n.pending_reasons)}
          <section class="card" aria-labelledby="node-facts">
            <h2 id="node-facts">Facts</h2>
            <dl class="facts">
              <dt>Status</dt>
              <dd>${statusBadge(n.status)} ${n.status_reason}
                ${n.connected ? html`<span class="muted">(stream open)</span>` : nothing}</dd>
              <dt>FQDN</dt>
              <dd>${n.fqdn || "—"}</dd>
              <dt>IP address</dt>
              <dd>${n.ip_address || "—"}</dd>
              <dt>Operating system</dt>
              <dd>${[n.os_name, n.os_version].filter(Boolean).join(" ") || "—"}</dd>
              <dt>Desktop</dt>
              <dd>${n.desktop_environments.join(", ") || "—"}</dd>
              <dt>Agent</dt>
              <dd>${n.agent_version || "—"} ${n.agent_healthy
                ? nothing
                : html`<sl-badge variant="warning">unhealthy</sl-badge> ${n.agent_health_message}`}</dd>
              <dt>Machine ID</dt>
              <dd><code>${n.machine_id || "—"}</code></dd>
              ${n.connected_since
                ? html`
                  <dt>Connected since</dt>
                  <dd>${formatDate(n.connected_since)} (${relativeTime(n.connected_since)})</dd>
                `
                : html`
                  <dt>Last seen</dt>
                  <dd>${formatDate(n.last_seen)} (${relativeTime(n.last_seen)})</dd>
                `}
              <dt>Enrolled</dt>
              <dd>${formatDate(n.created_at)}</dd>
            </dl>
          </section>
          <section class="card" aria-labelledby="node-cert">
            <h2 id="node-cert">Certificate</h2>
            <dl class="facts">
              <dt>Serial</dt>
              <dd><code>${n.cert_serial ?? "—"}</code></dd>
              <dt>Expires</dt>
              <dd>${formatDate(n.cert_not_after)} (${relativeTime(n.cert_not_after)})</dd>
              <dt>Revoked</dt>
              <dd>${n.cert_revoked ? html`<sl-badge variant="danger">revoked</sl-badge>` : "no"}</dd>
            </dl>
          </section>
          <section class="card" aria-labelledby="node-groups">
            <h2 id="node-groups">Node groups</h2>
            ${n.groups.length === 0
              ? html`<p class="muted">In no group: the node receives no policy.</p>`
              : nothing}
            <ul>
              ${n.groups.map((g) =>
                html`<li>${g.name} ${
                  canEditGroups
                    ? html`
                      <sl-icon-button name="x-lg" label=${`Remove from ${g.name}`}
                        @click=${() => this.#removeFromGroup(g)}></sl-icon-button>
                    `
                    : nothing
                }</li>`
              )}
            </ul>
            ${canEditGroups
              ? html`
                <div class="toolbar">
                  <sl-select label="Add to group" hoist value=${this.addGroup}
                    @sl-change=${(e: Event) => this.addGroup = String((e.target as HTMLSelectElement).value)}>
                                  ${this.groups.filter((g) => !memberOf.has(g.id)).map((g) =>
                                    html`<sl-option value=${g.id}>${g.name}</sl-option>`
                                  )}
                                </sl-select>
                  <sl-button ?disabled=${!this.addGroup} @click=${this.#addToGroup}>Add</sl-button>
                </div>
              `
              : nothing}
          </section>
          <section class="card" aria-labelledby="node-notes">
            <h2 id="node-notes">Notes</h2>
            <sl-textarea class="node-notes" label="Notes" value=${n.notes} rows="3" ?disabled=${!session.can(
              "node:edit",
            )}>
            </sl-textarea>
            ${session.can("node:edit")
              ? html`<sl-button size="small" @click=${this.#saveNotes}>Save notes</sl-button>`
              : nothing}
          </section>
          <section class="card" aria-labelledby="node-actions">
            <h2 id="node-actions">Actions</h2>
            <div class="form-actions">
              ${session.can("node:edit")
                ? html`
                  <sl-button ?disabled=${!n.connected} @click=${this.#requestMetadata}
                    title=${n.connected
                      ? ""
                      : "The node has no open stream; it reports facts when it reconnects."}>
                                    Request metadata</sl-button>
                `
                : nothing}
              ${session.can("node:revoke")
                ? html`<sl-button variant="warning" ?disabled=${n.cert_revoked} @click=${this.#revoke}>
                  Revoke certificate</sl-button>`
                : nothing}
              ${session.can("node_group:create") && n.cert_revoked
                ? html`<sl-button variant="primary" class="re-enroll" @click=${this.#reEnroll}>Re-enroll</sl-button>`
                : nothing}
              ${session.can("node:delete")
                ? html`<sl-button variant="danger" @click=${this.#delete}>Delete node</sl-button>`
                : nothing}
            </div>
            ${this.#renderReEnroll()}
            ${!n.connected
              ? html`<p class="muted">Metadata can be requested only while the node is connected.</p>`
              : nothing}
          </section>
        </sl-tab-panel>
        <sl-tab-panel name="compliance">${renderPendingReasons(n.pending_reasons)}${this
          .#renderCompliance()}</sl-tab-panel>
        <sl-tab-panel name="settings">
          ${this.compliance
            ? html`<svc-provenance .node=${n} .results=${this.compliance.results}></svc-provenance>`
            : html`<p class="muted">Needs the compliance:view permission.</p>`}
        </sl-tab-panel>
      </sl-tab-group>
    `;
  }

  #renderCompliance(): TemplateResult {
    const c = this.compliance;
    if (!c) return html`<p class="muted">Needs the compliance:view permission.</p>`;
    if (c.results.length === 0) {
      return html`<p class="muted">No policy reaches this node: bind a released policy to one of its groups and
        enable the binding.</p>`;
    }
    return html`
      <p>${c.results.length} polic${c.results.length === 1 ? "y reaches" : "ies reach"} this node:
        ${c.summary.compliant} compliant, ${c.summary.non_compliant} non-compliant, ${c.summary.error} error,
        ${c.summary.inapplicable} inapplicable, ${c.summary.unknown} pending.</p>
      ${c.results.map((r) =>
        html`<sl-details class="compliance-row" data-policy-id=${r.policy_id}>
          <span slot="summary">${complianceBadge(r.status)} <strong>${r.policy_name}</strong>
            <span class="muted">${r.policy_type} · ${
          r.reported_at
            ? `reported ${relativeTime(r.reported_at)} for version ${r.reported_version}`
            : "not reported yet"
        }${
          r.reported_version !== null && r.reported_version !== r.policy_version
            ? ` (current version ${r.policy_version})`
            : ""
        }</span></span>
          ${r.message ? html`<p>${r.message}</p>` : nothing}
          ${itemTable(r)}
        </sl-details>`
      )}
    `;
  }
}

/** The per-item breakdown of one result. */
export function itemTable(r: ComplianceRow): TemplateResult {
  if (r.items.length === 0) return html`<p class="muted">No per-item results.</p>`;
  return html`
    <div class="table-wrap">
      <table class="data">
        <caption class="visually-hidden">Items of ${r.policy_name}</caption>
        <thead>
          <tr>
            <th scope="col">Setting</th>
            <th scope="col">Status</th>
            <th scope="col">Details</th>
          </tr>
        </thead>
        <tbody>
          ${r.items.map((i) => {
            const { title, key } = itemTitle(r.policy_type, i.schema_id, i.key);
            return html`
              <tr>
                <td>${key
                  ? html`${title}<br><code class="muted">${key}</code>`
                  : html`<code>${title}</code>`}</td>
                <td>${statusBadge(i.status)}</td>
                <td>${itemMessage(r.policy_type, i.message)}</td>
              </tr>
            `;
          })}
        </tbody>
      </table>
    </div>
  `;
}

customElements.define("svc-node-detail", SvcNodeDetail);
