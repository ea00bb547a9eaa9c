/** `<svc-settings-users>`: console users — create, edit, enable/disable, reset password, delete. */
import { html, nothing, type TemplateResult } from "lit";
import { api } from "../api.ts";
import { session } from "../session.ts";
import { PageElement } from "./page.ts";
import { ListController, loadPage } from "./list_page.ts";
import {
  columns,
  confirmThenRun,
  errorAlert,
  fieldError,
  formError,
  notify,
  notifyError,
  whenHidden,
} from "./ui.ts";
import type { Role, User } from "../api_types.ts";

/**
 * The roles cell: each role the user holds, directly or through a user group, once, saying which groups it
 * comes through and when it is scoped.
 */
function rolesCell(u: User): TemplateResult {
  const roles = u.roles;
  if (roles.length === 0) return html`<span class="muted">No role</span>`;
  const byName = new Map<string, string[]>();
  for (const r of roles) {
    const notes = byName.get(r.name) ?? [];
    if (r.user_group) notes.push(`via ${r.user_group}`);
    if (r.scope_type !== "global") notes.push("one node group");
    byName.set(r.name, notes);
  }
  return html`<ul class="user-roles">${
    [...byName].map(([name, notes]) =>
      html`<li>${name}${
        notes.length
          ? html`
            <span class="muted">(${notes.join(", ")})</span>
          `
          : nothing
      }</li>`
    )
  }</ul>`;
}

class SvcSettingsUsers extends PageElement {
  static override properties = PageElement.withState("editing", "editError", "roles", "resetting");
  /** The user being edited; `{}` for a new one. */
  declare editing: Partial<User> | undefined;
  declare editError: unknown;
  declare roles: Role[];
  declare resetting: User | undefined;

  /** A tab of Settings: the query stays in the element, not in the URL the tabs share. */
  readonly list = new ListController(this, {
    operation: "GET /api/v1/users",
    noun: "users",
    syncUrl: false,
    filters: [{ name: "search", label: "Search users", kind: "search" }],
  });

  constructor() {
    super();
    this.roles = [];
  }

  protected override async load(): Promise<void> {
    await this.list.load();
  }

  async #openNew(): Promise<void> {
    this.editing = {};
    this.editError = undefined;
    if (session.can("role:view") && this.roles.length === 0) {
      try {
        this.roles = (await loadPage("GET /api/v1/roles", { query: { per_page: 200 } })).items;
      } catch (err) {
        notifyError(err);
      }
    }
  }

  #value(selector: string): string {
    return String((this.querySelector(selector) as HTMLInputElement | null)?.value ?? "");
  }

  async #save(): Promise<void> {
    const u = this.editing!;
    const profile = {
      email: this.#value(".user-form sl-input[name=email]").trim(),
      full_name: this.#value(".user-form sl-input[name=full_name]").trim(),
    };
    try {
      if (u.id) {
        await api.call("PUT /api/v1/users/{id}", { path: { id: u.id }, body: profile });
      } else {
        const roleSelect = this.querySelector(".user-form sl-select[name=role_ids]") as
          | (HTMLElement & { value: string[] })
          | null;
        await api.call("POST /api/v1/users", {
          body: {
            username: this.#value(".user-form sl-input[name=username]").trim(),
            password: this.#value(".user-form sl-input[name=password]"),
            ...profile,
            role_ids: roleSelect?.value?.length ? roleSelect.value : undefined,
          },
        });
      }
      notify("User saved", "success");
      this.editing = undefined;
      await this.reload();
    } catch (err) {
      this.editError = err;
    }
  }

  async #setEnabled(u: User, enabled: boolean): Promise<void> {
    try {
      await api.call("PUT /api/v1/users/{id}", { path: { id: u.id }, body: { enabled } });
      notify(`${u.username} ${enabled ? "enabled" : "disabled; their sessions ended"}`, "success");
    } catch (err) {
      notifyError(err);
    }
    await this.reload();
  }

  async #delete(u: User): Promise<void> {
    await confirmThenRun(
      {
        title: `Delete ${u.username}`,
        message: "The account and its role bindings are removed; its sessions end at once.",
        confirmLabel: "Delete",
        danger: true,
        typeToConfirm: u.username,
      },
      {
        run: () => api.call("DELETE /api/v1/users/{id}", { path: { id: u.id } }),
        done: `${u.username} deleted`,
        then: () => this.reload(),
      },
    );
  }

  async #resetPassword(): Promise<void> {
    const u = this.resetting!;
    try {
      await api.call("PUT /api/v1/users/{id}/password", {
        path: { id: u.id },
        body: { new_password: this.#value(".reset-form sl-input") },
      });
      notify(`Password of ${u.username} set; their sessions ended`, "success");
      this.resetting = undefined;
    } catch (err) {
      this.editError = err;
    }
  }

  override render() {
    const create = session.can("user:create")
      ? html`<sl-button variant="primary" @click=${this.#openNew}><sl-icon slot="prefix" name="person-plus"></sl-icon>
        New user</sl-button>`
      : nothing;
    return html`
      ${this.renderLoadError()} ${this.list.renderFilters({ extra: create })} ${this.list.renderTable({
        caption: "Users",
        empty: "No users yet.",
        head: html`
          ${columns("Username", "Name", "E-mail", "Roles", "Source", "Enabled")}
          <th scope="col"><span class="visually-hidden">Actions</span></th>
        `,
        row: (u) => this.#row(u),
      })}
      ${this.#renderEdit()} ${this.#renderReset()}
    `;
  }

  #row(u: User): TemplateResult {
    const self = u.id === session.me?.user.id;
    const canEdit = session.can("user:edit");
    return html`
      <tr>
        <td><strong>${u.username}</strong>${self
          ? html`
            <span class="muted">(you)</span>
          `
          : nothing}</td>
        <td>${u.full_name}</td>
        <td>${u.email}</td>
        <td class="roles-cell">${rolesCell(u)}</td>
        <td>${u.source}</td>
        <td>
          <sl-switch ?checked=${u.enabled} ?disabled=${!canEdit || self}
            @sl-change=${(e: Event) => this.#setEnabled(u, (e.target as HTMLInputElement).checked)}>
              <span class="visually-hidden">${u.username} enabled</span></sl-switch>
        </td>
        <td class="row-actions">
              ${canEdit
                ? html`<sl-icon-button name="pencil" label=${`Edit ${u.username}`} @click=${() => {
                  this.editing = u;
                  this.editError = undefined;
                }}></sl-icon-button>`
                : nothing}
              ${canEdit && u.source === "local"
                ? html`<sl-icon-button name="key" label=${`Reset password of ${u.username}`} @click=${() => {
                  this.resetting = u;
                  this.editError = undefined;
                }}></sl-icon-button>`
                : nothing}
              ${session.can("user:delete") && !self
                ? html`<sl-icon-button name="trash" label=${`Delete ${u.username}`} @click=${() =>
                  this.#delete(u)}></sl-icon-button>`
                : nothing}
            </td>
      </tr>
    `;
  }

  #renderEdit(): TemplateResult | typeof nothing {
    const u = this.editing;
    if (!u) return nothing;
    const err = this.editError;
    const f = (name: string) => ({
      class: fieldError(err, name) ? "has-error" : "",
      help: fieldError(err, name),
    });
    return html`
      <sl-dialog open label=${u.id ? `Edit ${u.username}` : "New user"} @sl-after-hide=${whenHidden(() =>
        this.editing = undefined
      )}>
        <div class="user-form form-grid">
          ${formError(err)}
          ${u.id ? nothing : html`
            <sl-input name="username" label="Username" required autocomplete="off" class=${f("username")
              .class}
              help-text=${f("username").help || "Letters, digits and . _ @ -"}></sl-input>
            <sl-input name="password" label="Initial password" type="password" required autocomplete="new-password"
              password-toggle class=${f("password").class} help-text=${f("password").help}></sl-input>
          `}
          <sl-input name="full_name" label="Full name" value=${u.full_name ?? ""} class=${f("full_name")
            .class}
            help-text=${f("full_name").help}></sl-input>
          <sl-input name="email" label="E-mail" type="email" value=${u.email ?? ""} class=${f("email").class}
            help-text=${f("email").help}></sl-input>
          ${!u.id && this.roles.length
            ? html`
              <sl-select name="role_ids" label="Global roles" multiple clearable hoist
                help-text=${f("role_ids").help || "You can grant only roles whose permissions you hold."}>
                            ${this.roles.map((r) => html`<sl-option value=${r.id}>${r.name}</sl-option>`)}
                          </sl-select>
            `
            : nothing}
        </div>
        <sl-button slot="footer" @click=${() => this.editing = undefined}>Cancel</sl-button>
        <sl-button slot="footer" variant="primary" @click=${this.#save}>${u.id
          ? "Save"
          : "Create"}</sl-button>
      </sl-dialog>
    `;
  }

  #renderReset(): TemplateResult | typeof nothing {
    const u = this.resetting;
    if (!u) return nothing;
    const help = fieldError(this.editError, "new_password");
    return html`
      <sl-dialog open label=${`Reset the password of ${u.username}`} @sl-after-hide=${whenHidden(() =>
        this.resetting = undefined
      )}>
        <div class="reset-form form-grid">
          ${this.editError && !help ? errorAlert(this.editError) : nothing}
          <sl-input label="New password" type="password" autocomplete="new-password" password-toggle
            class=${help ? "has-error" : ""} help-text=${help ||
              "Their sessions end when it is set."}></sl-input>
        </div>
        <sl-button slot="footer" @click=${() => this.resetting = undefined}>Cancel</sl-button>
        <sl-button slot="footer" variant="primary" @click=${this.#resetPassword}>Set password</sl-button>
      </sl-dialog>
    `;
  }
}

customElements.define("svc-settings-users", SvcSettingsUsers);
