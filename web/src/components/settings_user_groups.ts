/** `<svc-settings-user-groups>`: user groups and their members (roles are bound in the Role bindings tab). */
import { html, nothing, type TemplateResult } from "lit";
import { api } from "../api.ts";
import { session } from "../session.ts";
import { PageElement } from "./page.ts";
import { ListController, loadPage } from "./list_page.ts";
import {
  columns,
  confirmThenRun,
  formError,
  nameDescriptionFields,
  notify,
  notifyError,
  whenHidden,
} from "./ui.ts";
import type { ListRow, User, UserGroup } from "../api_types.ts";

class SvcSettingsUserGroups extends PageElement {
  static override properties = PageElement.withState("editing", "editError", "membersOf", "members", "users");
  declare editing: Partial<UserGroup> | undefined;
  declare editError: unknown;
  declare membersOf: UserGroup | undefined;
  declare members: ListRow<"GET /api/v1/user-groups/{id}/members">[] | undefined;
  declare users: User[];

  constructor() {
    super();
    this.users = [];
  }

  /** A tab of Settings: paged like every list, the query kept in the element (the tabs share the URL). */
  readonly list = new ListController(this, {
    operation: "GET /api/v1/user-groups",
    noun: "user groups",
    syncUrl: false,
    filters: [],
  });

  protected override async load(): Promise<void> {
    await this.list.load();
  }

  async #save(): Promise<void> {
    const g = this.editing!;
    const value = (name: string) =>
      String((this.querySelector(`.ug-form [name=${name}]`) as HTMLInputElement | null)?.value ?? "");
    const payload = { name: value("name").trim(), description: value("description") };
    try {
      if (g.id) await api.call("PUT /api/v1/user-groups/{id}", { path: { id: g.id }, body: payload });
      else await api.call("POST /api/v1/user-groups", { body: payload });
      notify(`User group ${payload.name} saved`, "success");
      this.editing = undefined;
      await this.reload();
    } catch (err) {
      this.editError = err;
    }
  }

  async #delete(g: UserGroup): Promise<void> {
    await confirmThenRun(
      {
        title: `Delete user group ${g.name}`,
        message: "Members lose the roles they received through this group.",
        confirmLabel: "Delete",
        danger: true,
      },
      {
        run: () => api.call("DELETE /api/v1/user-groups/{id}", { path: { id: g.id } }),
        then: () => this.reload(),
      },
    );
  }

  async #openMembers(g: UserGroup): Promise<void> {
    this.membersOf = g;
    this.members = undefined;
    try {
      const [members, users] = await Promise.all([
        loadPage("GET /api/v1/user-groups/{id}/members", { path: { id: g.id }, query: { per_page: 200 } }),
        session.can("user:view") ? loadPage("GET /api/v1/users", { query: { per_page: 200 } }) : undefined,
      ]);
      this.members = members.items;
      this.users = users?.items ?? [];
    } catch (err) {
      notifyError(err);
    }
  }

  async #addMember(userId: string): Promise<void> {
    if (!userId) return;
    try {
      await api.call("POST /api/v1/user-groups/{id}/members", {
        path: { id: this.membersOf!.id },
        body: { user_id: userId },
      });
      await this.#openMembers(this.membersOf!);
      await this.reload();
    } catch (err) {
      notifyError(err);
    }
  }

  async #removeMember(u: { id: string }): Promise<void> {
    try {
      await api.call("DELETE /api/v1/user-groups/{id}/members/{userId}", {
        path: { id: this.membersOf!.id, userId: u.id },
      });
      await this.#openMembers(this.membersOf!);
      await this.reload();
    } catch (err) {
      notifyError(err);
    }
  }

  override render() {
    return html`
      ${this.renderLoadError()}
      <div class="toolbar">
        ${session.can("user_group:create")
          ? html`
            <sl-button variant="primary"
              @click=${() => {
                this.editing = {};
                this.editError = undefined;
              }}><sl-icon slot="prefix" name="plus-lg"></sl-icon>New user group</sl-button>
          `
          : nothing}
      </div>
      ${this.list.renderTable({
        caption: "User groups",
        empty: "No user groups yet.",
        head: html`
          ${columns("Group", "Description", "Members")}
          <th scope="col"><span class="visually-hidden">Actions</span></th>
        `,
        row: (g) =>
          html`
            <tr>
              <td><strong>${g.name}</strong></td>
              <td>${g.description}</td>
              <td class="num">${g.member_count ?? "—"}</td>
              <td class="row-actions">
                              <sl-button size="small" @click=${() => this.#openMembers(g)}>Members</sl-button>
                              ${session.can("user_group:edit")
                                ? html`<sl-icon-button name="pencil" label=${`Edit ${g.name}`} @click=${() => {
                                  this.editing = g;
                                  this.editError = undefined;
                                }}></sl-icon-button>`
                                : nothing}
                              ${session.can("user_group:delete")
                                ? html`
                                  <sl-icon-button name="trash" label=${`Delete ${g.name}`} @click=${() =>
                                    this.#delete(g)}></sl-icon-button>
                                `
                                : nothing}
                            </td>
            </tr>
          `,
      })}
      ${this.#renderEdit()} ${this.#renderMembers()}
    `;
  }

  #renderEdit(): TemplateResult | typeof nothing {
    const g = this.editing;
    if (!g) return nothing;
    const err = this.editError;
    return html`
      <sl-dialog open label=${g.id ? `Edit ${g.name}` : "New user group"} @sl-after-hide=${whenHidden(() =>
        this.editing = undefined
      )}>
        <div class="ug-form form-grid">
          ${formError(err)}
          ${nameDescriptionFields(g, { err })}
        </div>
        <sl-button slot="footer" @click=${() => this.editing = undefined}>Cancel</sl-button>
        <sl-button slot="footer" variant="primary" @click=${this.#save}>Save</sl-button>
      </sl-dialog>
    `;
  }

  #renderMembers(): TemplateResult | typeof nothing {
    const g = this.membersOf;
    if (!g) return nothing;
    const canEdit = session.can("user_group:edit");
    const memberIds = new Set(this.members?.map((m) => m.id));
    return html`
      <sl-dialog open label=${`Members of ${g.name}`} @sl-after-hide=${whenHidden(() =>
        this.membersOf = undefined
      )}>
        ${!this.members ? html`<sl-spinner></sl-spinner>` : html`
          ${this.members.length === 0 ? html`<p class="muted">No members.</p>` : nothing}
          <ul>${this.members.map((m) =>
            html`<li>${m.username} ${
              canEdit
                ? html`
                  <sl-icon-button name="x-lg" label=${`Remove ${m.username}`} @click=${() =>
                    this.#removeMember(m)}></sl-icon-button>
                `
                : nothing
            }</li>`
          )}</ul>
          ${canEdit && this.users.length
            ? html`<sl-select label="Add a user" hoist @sl-change=${(e: Event) =>
              this.#addMember(String((e.target as HTMLSelectElement).value))}>
              ${
              this.users.filter((u) => !memberIds.has(u.id)).map((u) =>
                html`<sl-option value=${u.id}>${u.username}</sl-option>`
              )
            }
            </sl-select>`
            : nothing}
        `}
      </sl-dialog>
    `;
  }
}

customElements.define("svc-settings-user-groups", SvcSettingsUserGroups);
