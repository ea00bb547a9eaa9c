/**
 * `/node-groups`: create, rename and delete groups, manage members, and generate a one-time enrollment
 * token — shown once, with a copy button and the exact commands to run on the new node.
 */
import { html, nothing, type TemplateResult } from "lit";
import { type Answer, api } from "../api.ts";
import { session } from "../session.ts";
import { PageElement } from "../components/page.ts";
import { ListController } from "../components/list_page.ts";
import {
  columns,
  confirmThenRun,
  fieldError,
  formatDate,
  formError,
  notify,
  notifyError,
  statusBadge,
  valueOf,
  whenHidden,
} from "../components/ui.ts";
import type { ListRow, NodeGroup, NodeSummary } from "../api_types.ts";
import { enrollmentCommands } from "../enrollment.ts";

type NodeGroupMember = ListRow<"GET /api/v1/node-groups/{id}/members">;

class SvcNodeGroupsPage extends PageElement {
  static override properties = PageElement.withState(
    "editing",
    "editError",
    "token",
    "tokenGroup",
    "membersOf",
    "members",
    "candidates",
  );
  /** The group being edited; an object without id means "new". */
  declare editing: Partial<NodeGroup> | undefined;
  declare editError: unknown;
  declare token: Answer<"POST /api/v1/node-groups/{id}/tokens"> | undefined;
  declare tokenGroup: NodeGroup | undefined;
  declare membersOf: NodeGroup | undefined;
  declare members: Answer<"GET /api/v1/node-groups/{id}/members"> | undefined;
  declare candidates: NodeSummary[];

  override pageTitle = "Node groups";

  readonly list = new ListController(this, {
    operation: "GET /api/v1/node-groups",
    noun: "node groups",
    sort: { key: "name", dir: "asc" },
    filters: [{ name: "search", label: "Search", kind: "search", placeholder: "Group name" }],
  });

  constructor() {
    super();
    this.candidates = [];
  }

  protected override async load(): Promise<void> {
    await this.list.load();
  }

  async #save(): Promise<void> {
    const g = this.editing!;
    const dialog = this.querySelector(".group-form")!;
    const name = String((dialog.querySelector("sl-input[name=name]") as HTMLInputElement).value).trim();
    const description = String(
      (dialog.querySelector("sl-textarea[name=description]") as HTMLTextAreaElement).value,
    );
    try {
      const body = { name, description };
      if (g.id) await api.call("PUT /api/v1/node-groups/{id}", { path: { id: g.id }, body });
      else await api.call("POST /api/v1/node-groups", { body });
      notify(g.id ? `${name} saved` : `${name} created`, "success");
      this.editing = undefined;
      await this.reload();
    } catch (err) {
      this.editError = err;
    }
  }

  async #delete(g: NodeGroup): Promise<void> {
    const busy = g.node_count > 0 || g.bindings_count > 0;
    await confirmThenRun(
      {
        title: `Delete ${g.name}`,
        message: busy
          ? html`The group still has <strong>${g.node_count}</strong> node(s) and <strong>${g.bindings_count}</strong>
            binding(s). Deleting it removes the bindings and memberships; nodes stop receiving its policies.`
          : "The group is empty and has no bindings.",
        confirmLabel: "Delete",
        danger: true,
        typeToConfirm: busy ? g.name : undefined,
      },
      {
        run: async () => {
          await api.call("DELETE /api/v1/node-groups/{id}", {
            path: { id: g.id },
            query: { force: busy ? true : undefined },
          });
        },
        done: `${g.name} deleted`,
        then: () => this.reload(),
      },
    );
  }

  async #generateToken(g: NodeGroup): Promise<void> {
    try {
      this.token = await api.call("POST /api/v1/node-groups/{id}/tokens", { path: { id: g.id } });
      this.tokenGroup = g;
    } catch (err) {
      notifyError(err);
    }
  }

  async #openMembers(g: NodeGroup): Promise<void> {
    this.membersOf = g;
    this.members = undefined;
    try {
      this.members = await api.call("GET /api/v1/node-groups/{id}/members", {
        path: { id: g.id },
        query: { per_page: 200 },
      });
    } catch (err) {
      notifyError(err);
    }
  }

  async #searchCandidates(text: string): Promise<void> {
    if (!text.trim()) {
      this.candidates = [];
      return;
    }
    try {
      const page = await api.call("GET /api/v1/nodes", { query: { search: text.trim(), per_page: 20 } });
      const members = new Set(this.members?.items.map((m) => m.node_id));
      this.candidates = page.items.filter((n) => !members.has(n.id));
    } catch (err) {
      notifyError(err);
    }
  }

  async #addMember(node: NodeSummary): Promise<void> {
    try {
      await api.call("POST /api/v1/node-groups/{id}/members", {
        path: { id: this.membersOf!.id },
        body: { node_ids: [node.id] },
      });
      notify(
        `${node.name} added; it receives the group's policies when its stream next reconnects.`,
        "success",
      );
      this.candidates = this.candidates.filter((c) => c.id !== node.id);
      await this.#openMembers(this.membersOf!);
      await this.reload();
    } catch (err) {
      notifyError(err);
    }
  }

  async #removeMember(m: NodeGroupMember): Promise<void> {
    try {
      await api.call("DELETE /api/v1/node-groups/{id}/members/{nodeId}", {
        path: { id: this.membersOf!.id, nodeId: m.node_id },
      });
      await this.#openMembers(this.membersOf!);
      await this.reload();
    } catch (err) {
      notifyError(err);
    }
  }

  override render() {
    const actions = session.can("node_group:create")
      ? html`
        <sl-button variant="primary"
          @click=${() => {
            this.editing = {};
            this.editError = undefined;
          }}><sl-icon slot="prefix" name="plus-lg"></sl-icon>New node group</sl-button>
      `
      : nothing;
    return html`
      ${this.renderHeader(
        actions,
        "Policies are bound to node groups; nodes join a group when they enroll with its token.",
      )}
      ${this.renderLoadError()}
      ${this.list.renderFilters()}
      ${this.#renderTable()} ${this.#renderEditDialog()} ${this.#renderTokenDialog()} ${this
        .#renderMembersDialog()}
    `;
  }

  #renderTable(): TemplateResult | typeof nothing {
    return this.list.renderTable({
      caption: "Node groups",
      empty: "No node groups yet. Create one, then generate an enrollment token for it to enroll nodes.",
      head: (s) =>
        html`
          ${s("Name", "name")} <th scope="col">Description</th> ${s("Nodes", "node_count")}
          <th scope="col">Bindings (enabled / all)</th> ${s("Created", "created_at")}
          <th scope="col"><span class="visually-hidden">Actions</span></th>
        `,
      row: (g) =>
        html`
          <tr data-group-id=${g.id}>
            <td><strong>${g.name}</strong></td>
            <td>${g.description}</td>
            <td class="num">${g.node_count}</td>
            <td>${g.enabled_bindings_count} / ${g.bindings_count}</td>
            <td>${formatDate(g.created_at)}</td>
            <td>
              <div class="row-actions">
                              <sl-button size="small" @click=${() => this.#openMembers(g)}>Members</sl-button>
                              ${session.can("node_group:create")
                                ? html`<sl-button size="small" class="generate-token" @click=${() =>
                                  this.#generateToken(g)}>
                        <sl-icon slot="prefix" name="key"></sl-icon>Enrollment token</sl-button>`
                                : nothing}
                              ${session.can("node_group:edit")
                                ? html`<sl-icon-button name="pencil" label=${`Edit ${g.name}`} @click=${() => {
                                  this.editing = g;
                                  this.editError = undefined;
                                }}></sl-icon-button>`
                                : nothing}
                              ${session.can("node_group:delete")
                                ? html`
                                  <sl-icon-button name="trash" label=${`Delete ${g.name}`} @click=${() =>
                                    this.#delete(g)}></sl-icon-button>
                                `
                                : nothing}
                            </div>
            </td>
          </tr>
        `,
    });
  }

  #renderEditDialog(): TemplateResult | typeof nothing {
    const g = this.editing;
    if (!g) return nothing;
    const err = this.editError;
    return html`
      <sl-dialog open label=${g.id ? `Edit ${g.name}` : "New node group"} @sl-after-hide=${whenHidden(() =>
        this.editing = undefined
      )}>
        <form class="group-form form-grid" @submit=${(e: Event) => {
          e.preventDefault();
          void this.#save();
        }}>
          ${formError(err)}
          <sl-input name="name" label="Name" required value=${g.name ?? ""} autocomplete="off"
            class=${fieldError(err, "name") ? "has-error" : ""} help-text=${fieldError(
              err,
              "name",
            )}></sl-input>
          <sl-textarea name="description" label="Description" rows="2" value=${g.description ?? ""}
            class=${fieldError(err, "description") ? "has-error" : ""} help-text=${fieldError(
              err,
              "description",
            )}>
          </sl-textarea>
          ${g.id
            ? html`<p class="muted">Group ID (for the Kerberos default group): <code>${g.id}</code></p>`
            : nothing}
        </form>
        <sl-button slot="footer" @click=${() => this.editing = undefined}>Cancel</sl-button>
        <sl-button slot="footer" variant="primary" @click=${() => this.#save()}>${g.id
          ? "Save"
          : "Create"}</sl-button>
      </sl-dialog>
    `;
  }

  #renderTokenDialog(): TemplateResult | typeof nothing {
    const t = this.token;
    if (!t) return nothing;
    const commands = enrollmentCommands(t.token, { host: location.hostname, port: location.port });
    return html`
      <sl-dialog open label=${`Enrollment token for ${
        this.tokenGroup?.name ?? "group"
      }`} style="--width: 46rem"
        @sl-after-hide=${whenHidden(() => this.token = undefined)}>
        <sl-alert variant="warning" open>
          <sl-icon slot="icon" name="exclamation-triangle"></sl-icon>
          This token is shown only now. It works once and expires ${formatDate(t.expires_at)} (5 minutes).
        </sl-alert>
        <div class="token-box">
          <code class="enrollment-token">${t.token}</code>
          <sl-copy-button value=${t
            .token} copy-label="Copy token" success-label="Token copied">
            <sl-icon slot="copy-icon" name="copy" label="Copy token"></sl-icon>
          </sl-copy-button>
        </div>
        <h3>Commands for the new node</h3>
        <pre class="block enrollment-commands">${commands}</pre>
        <sl-copy-button value=${commands} copy-label="Copy commands"
          success-label="Commands copied">
          <sl-icon slot="copy-icon" name="copy" label="Copy commands"></sl-icon>
        </sl-copy-button>
        <sl-button slot="footer" variant="primary" @click=${() => this.token = undefined}>Done</sl-button>
      </sl-dialog>
    `;
  }

  #renderMembersDialog(): TemplateResult | typeof nothing {
    const g = this.membersOf;
    if (!g) return nothing;
    const canEdit = session.can("node_group:edit");
    return html`
      <sl-dialog open label=${`Members of ${g.name}`} style="--width: 40rem" @sl-after-hide=${whenHidden(() =>
        this.membersOf = undefined
      )}>
        ${!this.members ? html`<sl-spinner></sl-spinner>` : nothing}
        ${this.members && this.members.items.length === 0
          ? html`<p class="muted">No members yet.</p>`
          : nothing}
        ${this.members && this.members.items.length
          ? html`
            <table class="data">
              <caption class="visually-hidden">Members of ${g.name}</caption>
              <thead>
                <tr>
                  ${columns("Node", "Status", "Added")}
                  <th scope="col"><span class="visually-hidden">Actions</span></th>
                </tr>
              </thead>
              <tbody>${this.members.items.map((m) =>
                html`
                  <tr>
                    <td>${m.name}</td>
                    <td>${statusBadge(m.status)}</td>
                    <td>${formatDate(m.added_at)}</td>
                    <td>${canEdit
                      ? html`
                        <sl-icon-button name="x-lg" label=${`Remove ${m.name}`} @click=${() =>
                          this.#removeMember(m)}></sl-icon-button>
                      `
                      : nothing}</td>
                  </tr>
                `
              )}</tbody>
            </table>
          `
          : nothing}
        ${canEdit
          ? html`
            <h3>Add nodes</h3>
            <sl-input label="Find nodes" placeholder="Name, FQDN or IP" clearable
              @sl-input=${(e: Event) => this.#searchCandidates(valueOf(e))}></sl-input>
            <ul>${this.candidates.map((n) =>
              html`<li>${n.name} <sl-button size="small" @click=${() =>
                this.#addMember(n)}>Add</sl-button></li>`
            )}</ul>
            <p class="muted">Membership changes reach a node when its policy stream next reconnects.</p>
          `
          : nothing}
      </sl-dialog>
    `;
  }
}

customElements.define("svc-node-groups-page", SvcNodeGroupsPage);
