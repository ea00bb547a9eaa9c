/**
 * `<svc-settings-role-bindings>`: roles given to one user or user group, globally or scoped to a node group.
 * Scoped bindings are stored but grant nothing in the community edition, and the list says so.
 */
import { html, nothing, type TemplateResult } from "lit";
import { api, ApiError, type ListPage } from "../api.ts";
import { session } from "../session.ts";
import { PageElement } from "./page.ts";
import { errorAlert, fieldError, notify, notifyError } from "./ui.ts";
import type { NodeGroup, Role, RoleBinding, User, UserGroup } from "../types.ts";

type Binding = RoleBinding & { effective?: boolean };

class SvcSettingsRoleBindings extends PageElement {
  static override properties = {
    ...PageElement.properties,
    users: { state: true },
    userGroups: { state: true },
    roles: { state: true },
    nodeGroups: { state: true },
    subject: { state: true },
    bindings: { state: true },
    scope: { state: true },
    addError: { state: true },
  };
  declare users: User[];
  declare userGroups: UserGroup[];
  declare roles: Role[];
  declare nodeGroups: NodeGroup[];
  /** `user:<id>` or `group:<id>`. */
  declare subject: string;
  declare bindings: Binding[] | undefined;
  declare scope: "global" | "node_group";
  declare addError: unknown;

  constructor() {
    super();
    this.users = [];
    this.userGroups = [];
    this.roles = [];
    this.nodeGroups = [];
    this.subject = "";
    this.scope = "global";
  }

  protected override async load(): Promise<void> {
    const list = <T>(path: string, allowed: boolean) =>
      allowed
        ? api.get<ListPage<T>>(path, { per_page: 200 }).then((p) => p.items)
        : Promise.resolve([] as T[]);
    [this.users, this.userGroups, this.roles, this.nodeGroups] = await Promise.all([
      list<User>("/users", session.can("user:view")),
      list<UserGroup>("/user-groups", session.can("user_group:view")),
      list<Role>("/roles", session.can("role:view")),
      list<NodeGroup>("/node-groups", session.can("node_group:view")),
    ]);
  }

  #base(): string {
    const [kind, id] = this.subject.split(":");
    return kind === "user" ? `/users/${id}/role-bindings` : `/user-groups/${id}/role-bindings`;
  }

  async #loadBindings(): Promise<void> {
    this.bindings = undefined;
    if (!this.subject) return;
    try {
      this.bindings = (await api.get<ListPage<Binding>>(this.#base(), { per_page: 200 })).items;
    } catch (err) {
      notifyError(err);
    }
  }

  async #add(): Promise<void> {
    const value = (sel: string) => String((this.querySelector(sel) as HTMLInputElement | null)?.value ?? "");
    const roleId = value(".rb-form sl-select[name=role_id]");
    const scopeId = value(".rb-form sl-select[name=scope_id]");
    try {
      await api.post(this.#base(), {
        role_id: roleId,
        scope_type: this.scope,
        scope_id: this.scope === "node_group" ? scopeId || null : undefined,
      });
      this.addError = undefined;
      notify("Role bound", "success");
      await this.#loadBindings();
    } catch (err) {
      this.addError = err;
    }
  }

  async #remove(b: Binding): Promise<void> {
    try {
      await api.delete(`${this.#base()}/${b.id}`);
      await this.#loadBindings();
    } catch (err) {
      notifyError(err);
    }
  }

  override render() {
    const kind = this.subject.split(":")[0];
    const canEdit = kind === "user" ? session.can("user:edit") : session.can("user_group:edit");
    return html`
      ${this.renderLoadError()}
      <div class="toolbar">
        <sl-select label="User or user group" hoist value=${this.subject} style="min-width: 20rem"
          @sl-change=${(e: Event) => {
            this.subject = String((e.target as HTMLSelectElement).value);
            void this.#loadBindings();
          }}>
          ${this.users.map((u) => html`<sl-option value=${`user:${u.id}`}>User: ${u.username}</sl-option>`)}
          ${this.userGroups.map((g) =>
            html`<sl-option value=${`group:${g.id}`}>Group: ${g.name}</sl-option>`
          )}
        </sl-select>
      </div>
      ${!this.subject
        ? html`<p class="muted">Choose a user or user group to see and change its roles.</p>`
        : nothing}
      ${this.subject && !this.bindings ? html`<sl-spinner></sl-spinner>` : nothing}
      ${this.bindings ? this.#renderBindings(canEdit) : nothing}
    `;
  }

  #renderBindings(canEdit: boolean): TemplateResult {
    const err = this.addError;
    return html`
      ${this.bindings!.length === 0 ? html`<p class="muted">No roles bound directly.</p>` : html`
        <div class="table-wrap">
          <table class="data">
            <caption class="visually-hidden">Role bindings</caption>
            <thead>
              <tr>
                <th scope="col">Role</th>
                <th scope="col">Scope</th>
                <th scope="col">Effective</th>
                <th scope="col"><span class="visually-hidden">Actions</span></th>
              </tr>
            </thead>
            <tbody>${this.bindings!.map((b) =>
              html`
                <tr>
                  <td>${b.role_name}</td>
                  <td>${b.scope_type === "global"
                    ? "Global"
                    : `Node group ${b.scope_name ?? b.scope_id}`}</td>
                  <td>${b.effective === false
                    ? html`<sl-badge variant="neutral">no</sl-badge> <span class="muted">node-group scopes grant nothing in
                    this edition</span>`
                    : "yes"}</td>
                  <td>${canEdit
                    ? html`
                      <sl-icon-button name="trash" label=${`Remove ${b.role_name}`} @click=${() =>
                        this.#remove(b)}></sl-icon-button>
                    `
                    : nothing}</td>
                </tr>
              `
            )}</tbody>
          </table>
        </div>
      `}
      ${canEdit
        ? html`
          <h3>Bind a role</h3>
          <div class="rb-form toolbar">
                      ${err && !(err instanceof ApiError && err.fields.length) ? errorAlert(err) : nothing}
                      <sl-select name="role_id" label="Role" hoist class=${fieldError(err, "role_id")
                        ? "has-error"
                        : ""}
                        help-text=${fieldError(err, "role_id")}>
                        ${this.roles.map((r) => html`<sl-option value=${r.id}>${r.name}</sl-option>`)}
                      </sl-select>
                      <sl-select label="Scope" value=${this.scope} @sl-change=${(e: Event) =>
                        this.scope = String((e.target as HTMLSelectElement).value) as
                          | "global"
                          | "node_group"}>
                        <sl-option value="global">Global</sl-option>
                        <sl-option value="node_group">${session.me?.features.has("scoped_role_bindings")
                          ? "One node group"
                          : "One node group (no effect in this edition)"}</sl-option>
                      </sl-select>
                      ${this.scope === "node_group"
                        ? html`
                          <sl-select name="scope_id" label="Node group" hoist class=${fieldError(
                              err,
                              "scope_id",
                            )
                            ? "has-error"
                            : ""}
                            help-text=${fieldError(err, "scope_id")}>
                                          ${this.nodeGroups.map((g) =>
                                            html`<sl-option value=${g.id}>${g.name}</sl-option>`
                                          )}
                                        </sl-select>
                        `
                        : nothing}
                      <sl-button variant="primary" @click=${this.#add}>Bind</sl-button>
                    </div>
        `
        : nothing}
    `;
  }
}

customElements.define("svc-settings-role-bindings", SvcSettingsRoleBindings);
