/**
 * `/policy-bindings`: link policies to node groups. A binding is created disabled; enabling asks for
 * confirmation naming how many nodes will receive the policy; priority decides merges (higher wins).
 */
import { html, nothing, type TemplateResult } from "lit";
import { api } from "../api.ts";
import { session } from "../session.ts";
import { PageElement } from "../components/page.ts";
import { ListController } from "../components/list_page.ts";
import {
  confirmAction,
  confirmThenRun,
  formatDate,
  notify,
  notifyError,
  statusBadge,
  valueOf,
} from "../components/ui.ts";
import type { Binding, NodeGroup } from "../api_types.ts";
import { lockoutField, withLockoutReason } from "../components/session_lockout_dialog.ts";
import "../components/binding_dialog.ts";

class SvcPolicyBindingsPage extends PageElement {
  static override properties = PageElement.withState("creating", "groups");
  declare creating: boolean;
  declare groups: NodeGroup[];

  override pageTitle = "Policy bindings";

  readonly list = new ListController(this, {
    operation: "GET /api/v1/policy-bindings",
    noun: "bindings",
    sort: { key: "priority", dir: "desc" },
    filters: [
      {
        name: "state",
        label: "State",
        kind: "select",
        options: () => [["enabled", "Enabled"], ["disabled", "Disabled"]],
      },
      {
        name: "node_group_id",
        label: "Node group",
        kind: "select",
        options: () => this.groups.map((g) => [g.id, g.name] as const),
      },
      // Set by links from a policy; no control of its own, but shown as an active filter that can be cleared.
      { name: "policy_id", label: "Policy", kind: "hidden" },
    ],
  });

  constructor() {
    super();
    this.creating = false;
    this.groups = [];
  }

  protected override async load(): Promise<void> {
    const [, groups] = await Promise.all([
      this.list.load(),
      session.can("node_group:view")
        ? api.call("GET /api/v1/node-groups", { query: { per_page: 200 } })
        : Promise.resolve({ items: [] as NodeGroup[] }),
    ]);
    this.groups = groups.items;
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
    try {
      await withLockoutReason((reason) =>
        api.call("PUT /api/v1/policy-bindings/{id}", {
          path: { id: b.id },
          body: { state, ...lockoutField(reason) },
        })
      );
      notify(`Binding ${state}`, "success");
      await this.reload();
    } catch (err) {
      notifyError(err);
    }
  }

  async #setPriority(b: Binding, value: string): Promise<void> {
    const priority = Number(value);
    if (!Number.isInteger(priority) || priority === b.priority) return;
    try {
      await api.call("PUT /api/v1/policy-bindings/{id}", { path: { id: b.id }, body: { priority } });
      notify(`Priority of ${b.policy_name} → ${b.node_group_name} is now ${priority}`, "success");
      await this.reload();
    } catch (err) {
      notifyError(err);
      await this.reload();
    }
  }

  async #delete(b: Binding): Promise<void> {
    await confirmThenRun(
      {
        title: `Delete binding ${b.policy_name} → ${b.node_group_name}`,
        message: b.state === "enabled"
          ? `The binding is enabled: ${b.node_count} node(s) stop receiving the policy.`
          : "The binding is disabled; no node is affected.",
        confirmLabel: "Delete",
        danger: true,
      },
      {
        run: () => api.call("DELETE /api/v1/policy-bindings/{id}", { path: { id: b.id } }),
        done: "Binding deleted",
        then: () => this.reload(),
      },
    );
  }

  override render() {
    const actions = session.can("binding:create")
      ? html`<sl-button variant="primary" @click=${() => this.creating = true}>
        <sl-icon slot="prefix" name="plus-lg"></sl-icon>New binding</sl-button>`
      : nothing;
    return html`
      ${this.renderHeader(
        actions,
        "A released policy reaches the nodes of a group through an enabled binding. " +
          "When policies of one type merge, the higher priority wins.",
      )}
      ${this.renderLoadError()}
      ${this.list.renderFilters()}
      ${this.#renderTable()} ${this.#renderCreateDialog()}
    `;
  }

  #renderTable(): TemplateResult | typeof nothing {
    const canEdit = session.can("binding:edit");
    return this.list.renderTable({
      caption: "Policy bindings",
      empty: "No bindings yet. Create one to deliver a released policy to a node group.",
      head: (s) =>
        html`
          ${s("Policy", "policy_name")} <th scope="col">Policy state</th> ${s(
            "Node group",
            "node_group_name",
          )}
          ${s("Binding", "state")} ${s("Priority", "priority")} <th scope="col">Nodes</th>
          ${s("Updated", "updated_at")} <th scope="col"><span class="visually-hidden">Actions</span></th>
        `,
      row: (b) =>
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
        `,
    });
  }

  #renderCreateDialog(): TemplateResult | typeof nothing {
    if (!this.creating) return nothing;
    return html`
      <svc-binding-dialog @binding-dialog-partial=${() => this.reload()}
        @binding-dialog-done=${(e: CustomEvent<number>) => {
          this.creating = false;
          if (e.detail) void this.reload();
        }}></svc-binding-dialog>
    `;
  }
}

customElements.define("svc-policy-bindings-page", SvcPolicyBindingsPage);
