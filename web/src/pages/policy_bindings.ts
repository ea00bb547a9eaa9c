/**
 * `/policy-bindings`: link policies to node groups. A binding is created disabled; enabling asks for
 * confirmation naming how many nodes will receive the policy; priority decides merges (higher wins).
 */
import { html, nothing, type TemplateResult } from "lit";
import { api, ApiError, type ListPage } from "../api.ts";
import { session } from "../session.ts";
import { setQuery } from "../router.ts";
import { PageElement } from "../components/page.ts";
import {
  confirmAction,
  errorAlert,
  fieldError,
  formatDate,
  notify,
  notifyError,
  sortHeader,
  type SortState,
  statusBadge,
  valueOf,
} from "../components/ui.ts";
import type { PageChange } from "../components/pager.ts";
import type { Binding, NodeGroup, Policy } from "../types.ts";
import { askLockoutReason } from "../components/session_lockout_dialog.ts";

class SvcPolicyBindingsPage extends PageElement {
  static override properties = {
    ...PageElement.properties,
    page: { state: true },
    sort: { state: true },
    creating: { state: true },
    createError: { state: true },
    policies: { state: true },
    groups: { state: true },
  };
  declare page: ListPage<Binding> | undefined;
  declare sort: SortState;
  declare creating: boolean;
  declare createError: unknown;
  declare policies: Policy[];
  declare groups: NodeGroup[];

  override pageTitle = "Policy bindings";

  constructor() {
    super();
    this.sort = { key: "priority", dir: "desc" };
    this.creating = false;
    this.policies = [];
    this.groups = [];
  }

  #q(name: string): string {
    return this.route?.query.get(name) ?? "";
  }

  protected override async load(): Promise<void> {
    const [page, groups] = await Promise.all([
      api.get<ListPage<Binding>>("/policy-bindings", {
        page: this.#q("page") || 1,
        per_page: this.#q("per_page") || 25,
        state: this.#q("state"),
        node_group_id: this.#q("node_group_id"),
        policy_id: this.#q("policy_id"),
        sort: this.sort.key,
        order: this.sort.dir,
      }),
      session.can("node_group:view")
        ? api.get<ListPage<NodeGroup>>("/node-groups", { per_page: 200 })
        : Promise.resolve({ items: [] as NodeGroup[] }),
    ]);
    this.page = page;
    this.groups = groups.items;
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

  async #openCreate(): Promise<void> {
    this.creating = true;
    this.createError = undefined;
    try {
      const policies = await api.get<ListPage<Policy>>("/policies/all", {
        per_page: 200,
        sort: "name",
        order: "asc",
      });
      this.policies = policies.items.filter((p) => p.state !== "archived");
    } catch (err) {
      this.createError = err;
    }
  }

  async #create(): Promise<void> {
    const form = this.querySelector(".binding-form")!;
    const get = (sel: string) => String((form.querySelector(sel) as HTMLInputElement | null)?.value ?? "");
    const priority = Number(get("sl-input[name=priority]") || "0");
    try {
      await api.post("/policy-bindings", {
        policy_id: get("sl-select[name=policy_id]"),
        node_group_id: get("sl-select[name=node_group_id]"),
        priority,
      });
      notify("Binding created (disabled). Enable it to deliver the policy.", "success");
      this.creating = false;
      await this.reload();
    } catch (err) {
      this.createError = err;
    }
  }

  async #setState(b: Binding, state: "enabled" | "disabled"): Promise<void> {
    if (state === "enabled") {
      if (b.policy_state !== "released") {
        notify(`Release "${b.policy_name}" first: only released policies can be delivered.`, "warning");
        return;
      }
      const ok = await confirmAction({
        title: `Enable ${b.policy_name} for ${b.node_group_name}`,
        message: html`<strong class="affected-nodes">${b.node_count} node${
          b.node_count === 1 ? "" : "s"
        }</strong>
          in ${b.node_group_name} will receive “${b.policy_name}” (priority ${b.priority}) right away.`,
        confirmLabel: "Enable",
      });
      if (!ok) return;
    } else {
      const ok = await confirmAction({
        title: `Disable ${b.policy_name} for ${b.node_group_name}`,
        message: `${b.node_count} node(s) stop receiving the policy; their agents undo its effects.`,
        confirmLabel: "Disable",
        danger: true,
      });
      if (!ok) return;
    }
    let body: { state: string; lockout_reason?: string } = { state };
    for (;;) {
      try {
        await api.put(`/policy-bindings/${b.id}`, body);
        notify(`Binding ${state}`, "success");
        await this.reload();
        return;
      } catch (err) {
        // The SessionAccess lockout guard lets an enablement through with a reason (audited).
        const reason = body.lockout_reason ? undefined : await askLockoutReason(err);
        if (!reason) return notifyError(err);
        body = { ...body, lockout_reason: reason };
      }
    }
  }

  async #setPriority(b: Binding, value: string): Promise<void> {
    const priority = Number(value);
    if (!Number.isInteger(priority) || priority === b.priority) return;
    try {
      await api.put(`/policy-bindings/${b.id}`, { priority });
      notify(`Priority of ${b.policy_name} → ${b.node_group_name} is now ${priority}`, "success");
      await this.reload();
    } catch (err) {
      notifyError(err);
      await this.reload();
    }
  }

  async #delete(b: Binding): Promise<void> {
    const ok = await confirmAction({
      title: `Delete binding ${b.policy_name} → ${b.node_group_name}`,
      message: b.state === "enabled"
        ? `The binding is enabled: ${b.node_count} node(s) stop receiving the policy.`
        : "The binding is disabled; no node is affected.",
      confirmLabel: "Delete",
      danger: true,
    });
    if (!ok) return;
    try {
      await api.delete(`/policy-bindings/${b.id}`);
      notify("Binding deleted", "success");
      await this.reload();
    } catch (err) {
      notifyError(err);
    }
  }

  override render() {
    const actions = session.can("binding:create")
      ? html`<sl-button variant="primary" @click=${this.#openCreate}>
        <sl-icon slot="prefix" name="plus-lg"></sl-icon>New binding</sl-button>`
      : nothing;
    return html`
      ${this.renderHeader(
        actions,
        "A released policy reaches the nodes of a group through an enabled binding. " +
          "When policies of one type merge, the higher priority wins.",
      )}
      ${this.renderLoadError()}
      <div class="toolbar" role="search">
        <sl-select label="State" clearable value=${this.#q("state")} @sl-change=${(e: Event) =>
          this.#filter("state", valueOf(e))}>
          <sl-option value="enabled">Enabled</sl-option>
          <sl-option value="disabled">Disabled</sl-option>
        </sl-select>
        <sl-select label="Node group" clearable hoist value=${this.#q("node_group_id")}
          @sl-change=${(e: Event) => this.#filter("node_group_id", valueOf(e))}>
          ${this.groups.map((g) => html`<sl-option value=${g.id}>${g.name}</sl-option>`)}
        </sl-select>
      </div>
      ${this.#renderTable()} ${this.#renderCreateDialog()}
    `;
  }

  #renderTable(): TemplateResult {
    const page = this.page;
    if (!page) return this.renderSpinner();
    if (page.items.length === 0) {
      return html`
        <div class="empty-state">
          <p>No bindings. Create one to deliver a released policy to a node group.</p>
        </div>
      `;
    }
    const canEdit = session.can("binding:edit");
    const s = (label: string, key: string) => sortHeader(label, key, this.sort, this.#onSort);
    return html`
      <div class="table-wrap">
        <table class="data">
          <caption class="visually-hidden">Policy bindings</caption>
          <thead>
            <tr>
              ${s("Policy", "policy_name")} <th scope="col">Policy state</th> ${s(
                "Node group",
                "node_group_name",
              )}
              ${s("Binding", "state")} ${s("Priority", "priority")} <th scope="col">Nodes</th>
              ${s("Updated", "updated_at")} <th scope="col"><span class="visually-hidden">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            ${page.items.map((b) =>
              html`
                <tr data-binding-id=${b.id}>
                  <td><a href=${`/policies/${b.policy_id}/edit`}>${b.policy_name}</a>
                                  <div class="muted">${b.policy_type}</div></td>
                  <td>${statusBadge(b.policy_state)}</td>
                  <td>${b.node_group_name}</td>
                  <td>
                    <sl-switch class="binding-state" ?checked=${b.state === "enabled"} ?disabled=${!canEdit}
                      @sl-change=${(e: Event) => {
                        const on = (e.target as HTMLInputElement).checked;
                        (e.target as HTMLInputElement).checked = b.state === "enabled";
                        void this.#setState(b, on ? "enabled" : "disabled");
                      }}>${b.state === "enabled" ? "Enabled" : "Disabled"}</sl-switch>
                  </td>
                  <td>
                    <sl-input type="number" size="small" class="priority label-hidden" value=${String(
                      b.priority,
                    )} ?disabled=${!canEdit}
                      label=${`Priority of ${b.policy_name} for ${b.node_group_name}`} style="width: 8rem"
                      @sl-change=${(e: Event) => this.#setPriority(b, valueOf(e))}></sl-input>
                  </td>
                  <td class="num">${b.node_count}</td>
                  <td>${formatDate(b.updated_at)}</td>
                  <td>${session.can("binding:delete")
                    ? html`
                      <sl-icon-button name="trash" label=${`Delete binding ${b.policy_name} → ${b.node_group_name}`}
                        @click=${() => this.#delete(b)}></sl-icon-button>
                    `
                    : nothing}</td>
                </tr>
              `
            )}
          </tbody>
        </table>
      </div>
      <svc-pager label="bindings" .page=${page.page} .perPage=${page.per_page} .total=${page.total}
        @page-change=${this.#onPage}></svc-pager>
    `;
  }

  #renderCreateDialog(): TemplateResult | typeof nothing {
    if (!this.creating) return nothing;
    const err = this.createError;
    const field = (name: string) => ({
      cls: fieldError(err, name) ? "has-error" : "",
      msg: fieldError(err, name),
    });
    return html`
      <sl-dialog open label="New binding" @sl-after-hide=${(e: Event) => {
        if (e.target === e.currentTarget) this.creating = false;
      }}>
        <div class="binding-form form-grid">
          ${err && !(err instanceof ApiError && err.fields.length) ? errorAlert(err) : nothing}
          <sl-select name="policy_id" label="Policy" hoist required class=${field("policy_id").cls}
            help-text=${field("policy_id").msg || "Drafts can be bound now and enabled once released."}>
            ${this.policies.map((p) =>
              html`<sl-option value=${p.id}>${p.name} (${p.type}, ${p.state})</sl-option>`
            )}
          </sl-select>
          <sl-select name="node_group_id" label="Node group" hoist required class=${field("node_group_id")
            .cls}
            help-text=${field("node_group_id").msg}>
            ${this.groups.map((g) =>
              html`<sl-option value=${g.id}>${g.name} (${g.node_count} nodes)</sl-option>`
            )}
          </sl-select>
          <sl-input name="priority" label="Priority" type="number" value="0" class=${field("priority").cls}
            help-text=${field("priority").msg ||
              "Higher wins when policies of the same type set the same key."}></sl-input>
          <p class="muted">New bindings start disabled.</p>
        </div>
        <sl-button slot="footer" @click=${() => this.creating = false}>Cancel</sl-button>
        <sl-button slot="footer" variant="primary" @click=${this.#create}>Create</sl-button>
      </sl-dialog>
    `;
  }
}

customElements.define("svc-policy-bindings-page", SvcPolicyBindingsPage);
