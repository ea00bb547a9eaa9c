/**
 * `/disk-encryption`: the fleet's volumes as agents report them (also without any policy): escrow state,
 * protectors, compliance with the node's DiskEncryption policy, pending (overdue) rotations and cloned
 * volumes, filtered by node group, compliance, escrow state, overdue and clone. `?node=<id>` opens the
 * node's detail: its facts, every volume with the key history (never key material) and pending tasks.
 * People with `disk_encryption:reveal` reveal a key (reason + password, audited) or ask for a rotation.
 */
import { html, nothing, type TemplateResult } from "lit";
import { type Answer, api, type CallArgs } from "../api.ts";
import type { ListRow } from "../api_types.ts";
import { setQuery } from "../router.ts";
import { session } from "../session.ts";
import { PageElement } from "../components/page.ts";
import { columns, notify, notifyError, relativeTime, statusLabel, valueOf } from "../components/ui.ts";
import type { PageChange } from "../components/pager.ts";
import "../components/disk_reveal_dialog.ts";
import type { RevealTarget } from "../components/disk_reveal_dialog.ts";

/** A volume of the inventory (`GET /disk-encryption/volumes`). */
type Volume = ListRow<"GET /api/v1/disk-encryption/volumes">;

/** One node's disk encryption, with each volume's key history. */
type NodeView = Answer<"GET /api/v1/disk-encryption/nodes/{id}">;

/** A page of the inventory, with counts over every volume the filters match (`summary`). */
type Inventory = Answer<"GET /api/v1/disk-encryption/volumes">;

const ESCROW_LABELS: Record<Volume["escrow_state"], [string, string]> = {
  escrowed: ["Escrowed", "success"],
  pending: ["Pending confirmation", "warning"],
  none: ["Not escrowed", "warning"],
  not_applicable: ["Not encrypted", "neutral"],
};
const COMPLIANCE_VARIANT: Record<Volume["compliance"], string> = {
  compliant: "success",
  non_compliant: "danger",
  no_policy: "neutral",
};

function escrowBadge(v: Volume): TemplateResult {
  const [label, variant] = ESCROW_LABELS[v.escrow_state];
  return html`<sl-badge variant=${variant} pill>${label}</sl-badge>`;
}

function complianceCell(v: Volume): TemplateResult {
  return html`
    <sl-badge variant=${COMPLIANCE_VARIANT[v.compliance]} pill>${statusLabel(v.compliance)}</sl-badge>
    ${v.issues.length ? html`<ul class="issues">${v.issues.map((i) => html`<li>${i}</li>`)}</ul>` : nothing}
  `;
}

function protectorsCell(v: Volume): TemplateResult | string {
  if (!v.encrypted) return "—";
  return html`${
    v.protectors.map((p) =>
      html`
        <sl-tag size="small">${p === "tpm2" && v.tpm2_pcrs.length
          ? `tpm2 (PCR ${v.tpm2_pcrs.join("+")})`
          : p}</sl-tag>
      `
    )
  }`;
}

function rotationCell(v: Volume): TemplateResult | string {
  if (!v.overdue) {
    return v.active_key_confirmed_at ? `key from ${relativeTime(v.active_key_confirmed_at)}` : "—";
  }
  return html`
    <sl-badge variant="warning" pill>Rotation pending</sl-badge>
    <span class="muted">${v.rotation_reason} · ${relativeTime(v.rotation_requested_at)}</span>
  `;
}

class SvcDiskEncryptionPage extends PageElement {
  static override properties = PageElement.withState("page", "detail", "revealing", "groups");
  declare page: Inventory | undefined;
  declare detail: NodeView | undefined;
  declare revealing: RevealTarget | undefined;
  declare groups: { id: string; name: string }[];

  override pageTitle = "Disk encryption";

  constructor() {
    super();
    this.groups = [];
  }

  #q(name: string): string {
    return this.route?.query.get(name) ?? "";
  }

  protected override async load(): Promise<void> {
    const node = this.#q("node");
    const [page, detail] = await Promise.all([
      api.call("GET /api/v1/disk-encryption/volumes", {
        // The URL's filters as text; the server validates their values.
        query: {
          page: this.#q("page") || 1,
          per_page: this.#q("per_page") || 50,
          group: this.#q("group") || undefined,
          compliance: this.#q("compliance") || undefined,
          escrow: this.#q("escrow") || undefined,
          overdue: this.#q("overdue") || undefined,
          clone: this.#q("clone") || undefined,
        } as CallArgs<"GET /api/v1/disk-encryption/volumes">["query"],
      }),
      node ? api.call("GET /api/v1/disk-encryption/nodes/{id}", { path: { id: node } }) : undefined,
    ]);
    this.page = page;
    this.detail = detail;
    if (this.groups.length === 0 && session.can("node_group:view")) {
      this.groups = (await api.call("GET /api/v1/node-groups", { query: { per_page: 200 } })
        .catch(() => ({ items: [] }))).items;
    }
  }

  #filter(name: string, value: string): void {
    if (value) this.route.query.set(name, value);
    else this.route.query.delete(name);
    this.route.query.delete("page");
    setQuery({ [name]: value || undefined, page: undefined });
    void this.reload();
  }

  #onPage = (e: CustomEvent<PageChange>) => {
    this.route.query.set("page", String(e.detail.page));
    this.route.query.set("per_page", String(e.detail.perPage));
    setQuery({ page: e.detail.page, per_page: e.detail.perPage });
    void this.reload();
  };

  async #rotate(v: Volume): Promise<void> {
    try {
      await api.call("POST /api/v1/disk-encryption/volumes/{id}/rotate", {
        path: { id: v.id },
        body: { reason: "requested in the console" },
      });
      notify(`Rotation requested for ${v.luks_uuid} on ${v.node_name}`, "success");
      await this.reload();
    } catch (err) {
      notifyError(err);
    }
  }

  override render() {
    const s = this.page?.summary;
    return html`
      ${this.renderHeader(
        html`<sl-button @click=${() =>
          this.reload()}><sl-icon slot="prefix" name="arrow-clockwise"></sl-icon>Refresh</sl-button>`,
        "Volumes reported by the agents, their recovery-key escrow, protectors and compliance.",
      )}
      ${this.renderLoadError()}
      ${s
        ? html`
          <dl class="summary-cards" aria-label="Summary">
            <div>
              <dt>Encrypted volumes</dt>
              <dd>${s.volumes}</dd>
            </div>
            <div>
              <dt>Recovery key escrowed</dt>
              <dd>${s.escrowed}</dd>
            </div>
            <div>
              <dt>Unencrypted fixed volumes</dt>
              <dd>${s.unencrypted}</dd>
            </div>
            <div>
              <dt>Non-compliant</dt>
              <dd>${s.non_compliant}</dd>
            </div>
            <div>
              <dt>Rotations pending</dt>
              <dd>${s.overdue}</dd>
            </div>
            <div>
              <dt>Cloned volumes</dt>
              <dd>${s.clones}</dd>
            </div>
          </dl>
        `
        : nothing}
      <div class="toolbar" role="search">
        ${this.groups.length
          ? html`
            <sl-select label="Node group" clearable value=${this.#q("group")}
              @sl-change=${(e: Event) => this.#filter("group", valueOf(e))}>
              ${this.groups.map((g) => html`<sl-option value=${g.id}>${g.name}</sl-option>`)}
            </sl-select>
          `
          : nothing}
        <sl-select label="Compliance" clearable value=${this.#q("compliance")}
          @sl-change=${(e: Event) => this.#filter("compliance", valueOf(e))}>
          <sl-option value="compliant">Compliant</sl-option>
          <sl-option value="non_compliant">Non-compliant</sl-option>
          <sl-option value="no_policy">No policy</sl-option>
        </sl-select>
        <sl-select label="Escrow" clearable value=${this.#q("escrow")}
          @sl-change=${(e: Event) => this.#filter("escrow", valueOf(e))}>
          ${Object.entries(ESCROW_LABELS).map(([v, [label]]) =>
            html`<sl-option value=${v}>${label}</sl-option>`
          )}
        </sl-select>
        <sl-checkbox ?checked=${this.#q("overdue") === "true"}
          @sl-change=${(e: Event) =>
            this.#filter("overdue", (e.target as HTMLInputElement).checked ? "true" : "")}>
          Rotation pending
        </sl-checkbox>
        <sl-checkbox ?checked=${this.#q("clone") === "true"}
          @sl-change=${(e: Event) =>
            this.#filter("clone", (e.target as HTMLInputElement).checked ? "true" : "")}>
          Cloned
        </sl-checkbox>
      </div>
      ${this.#table()} ${this.#detail()}
      ${this.revealing
        ? html`<svc-disk-reveal-dialog .target=${this.revealing} @close=${() => {
          this.revealing = undefined;
          void this.reload();
        }}></svc-disk-reveal-dialog>`
        : nothing}
    `;
  }

  #actions(v: Volume): TemplateResult | typeof nothing {
    if (!session.can("disk_encryption:reveal") || !v.encrypted) return nothing;
    return html`
      ${v.escrow_state === "escrowed"
        ? html`<sl-button size="small" variant="danger" outline @click=${() => {
          this.revealing = { id: v.id, node_name: v.node_name, luks_uuid: v.luks_uuid, device: v.device };
        }}>Reveal key</sl-button>`
        : nothing}
      ${v.escrow_state === "escrowed" && !v.overdue
        ? html`<sl-button size="small" @click=${() => this.#rotate(v)}>Rotate</sl-button>`
        : nothing}
    `;
  }

  #table(): TemplateResult {
    const page = this.page;
    if (!page) return this.loadError ? html`` : html`<sl-spinner></sl-spinner>`;
    if (page.items.length === 0) {
      return html`
        <div class="empty-state" role="status">
          <p>No volumes match. Agents report their volumes when they connect, with or without a policy.</p>
        </div>
      `;
    }
    return html`
      <div class="table-wrap">
        <table class="data">
          <caption class="visually-hidden">Volumes</caption>
          <thead>
            <tr>
              ${columns(
                "Node",
                "Volume",
                "Encryption",
                "Protectors",
                "Recovery key",
                "Compliance",
                "Rotation",
              )}
              <th scope="col"><span class="visually-hidden">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            ${page.items.map((v) =>
              html`
                <tr>
                  <td>${v.node_id
                    ? html`<a href=${`/disk-encryption?node=${v.node_id}`} @click=${(e: Event) => {
                      e.preventDefault();
                      this.#filter("node", v.node_id!);
                    }}>${v.node_name}</a>`
                    : html`${v.node_name} <span class="muted">(deleted)</span>`}</td>
                  <td><code>${v.device}</code>${v.root
                    ? html`
                      <sl-badge pill>root</sl-badge>
                    `
                    : nothing}
                    ${v.luks_uuid ? html`<br /><code class="muted">${v.luks_uuid}</code>` : nothing}
                    ${v.clone
                      ? html`<br /><sl-badge variant="danger" pill title="Another node reports the same LUKS UUID">Clone</sl-badge>`
                      : nothing}</td>
                  <td>${v.encrypted
                    ? `LUKS${v.luks_version} ${v.cipher} ${v.key_size_bits} bits`
                    : "Not encrypted"}</td>
                  <td>${protectorsCell(v)}</td>
                  <td>${escrowBadge(v)}</td>
                  <td>${complianceCell(v)}</td>
                  <td>${rotationCell(v)}</td>
                  <td>${this.#actions(v)}</td>
                </tr>
              `
            )}
          </tbody>
        </table>
      </div>
      <svc-pager label="volumes" .page=${page.page} .perPage=${page.per_page} .total=${page.total}
        @page-change=${this.#onPage}></svc-pager>
    `;
  }

  #detail(): TemplateResult | typeof nothing {
    const d = this.detail;
    if (!d) return nothing;
    return html`
      <section class="card node-disk-detail" aria-labelledby="disk-node-heading">
        <header class="page-header">
          <h2 id="disk-node-heading">${d.node.name}</h2>
          <sl-button size="small" @click=${() => this.#filter("node", "")}>Close</sl-button>
        </header>
        <p>
          Last report ${relativeTime(d.reported_at)} · TPM 2.0 ${d.tpm2_available
            ? "available"
            : "not available"}
          ${d.external_manager
            ? html`
              · protectors managed by ${d.external_manager}
            `
            : nothing} · policy
          ${d.policy ? html`<a href=${`/policies/${d.policy.id}/edit`}>${d.policy.name}</a>` : "none"}
        </p>
        ${d.volumes.map((v) =>
          html`
            <h3><code>${v.device}</code> ${v.luks_uuid
              ? html`<code class="muted">${v.luks_uuid}</code>`
              : nothing}
              ${v.missing_since
                ? html`<sl-badge variant="neutral">missing since ${relativeTime(v.missing_since)}</sl-badge>`
                : nothing}</h3>
            <p>${v.encrypted
              ? `LUKS${v.luks_version}, ${v.cipher}, ${v.key_size_bits} bits`
              : "Not encrypted"}
              ${v.mount_point
                ? html`
                  · mounted at <code>${v.mount_point}</code>
                `
                : nothing} · ${escrowBadge(v)} ·
              ${complianceCell(v)} ${this.#actions(v)}</p>
            ${v.keys.length
              ? html`
                <table class="data compact">
                  <caption>Recovery keys of ${v.device}</caption>
                  <thead>
                    <tr>
                      ${columns("Key", "State", "Keyslot", "Confirmed", "Reveals")}
                    </tr>
                  </thead>
                  <tbody>${v.keys.map((k) =>
                    html`
                      <tr>
                        <td><code>${k.id.slice(0, 8)}</code></td>
                        <td>${statusLabel(k.state)}</td>
                        <td>${k.key_slot ?? "—"}</td>
                        <td>${relativeTime(k.confirmed_at)}</td>
                        <td>${k.reveal_count}${k.last_revealed_at
                          ? ` (last ${relativeTime(k.last_revealed_at)})`
                          : ""}</td>
                      </tr>
                    `
                  )}</tbody>
                </table>
              `
              : nothing}
          `
        )}
        ${d.tasks.length
          ? html`
            <h3>Pending tasks</h3>
            <ul>${d.tasks.map((t) =>
              html`<li>${statusLabel(t.kind)}: ${t.reason} (${relativeTime(t.created_at)})</li>`
            )}</ul>
          `
          : nothing}
      </section>
    `;
  }
}

customElements.define("svc-disk-encryption-page", SvcDiskEncryptionPage);
