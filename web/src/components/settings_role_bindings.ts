/**
 * `<svc-settings-role-bindings>`: every role binding (`GET /api/v1/role-bindings`), filtered by holder, role,
 * scope or text, sorted and paginated on the server, with the filters kept in the URL so links (a role, a
 * holder, a node group in the table) lead to the list they name. Choosing one holder also offers binding a
 * role to it. The server lists user bindings only to people with `user:view` and user-group bindings only to
 * people with `user_group:view`. Scoped bindings are stored but grant nothing in the community edition, and
 * the list says so.
 */
import { html, nothing, type TemplateResult } from "lit";
import { api } from "../api.ts";
import { session } from "../session.ts";
import { PageElement } from "./page.ts";
import { ListController, loadPage } from "./list_page.ts";
import { confirmAction, fieldError, formatDate, formError, notify, notifyError, valueOf } from "./ui.ts";
import type { ListedRoleBinding, NodeGroup, Role, User, UserGroup } from "../api_types.ts";

/** URL query keys this tab owns (the API's filter names). */
type Filter = "user_id" | "user_group_id" | "role_id" | "scope_type" | "scope_id" | "search";

/** A link to this tab with the given filters. */
function filterHref(filters: Partial<Record<Filter, string>>): string {
  const params = new URLSearchParams({ tab: "role-bindings", ...filters });
  return `/settings?${params}`;
}

/** The one holder the list is filtered to, and where its bindings are changed. */
interface Holder {
  kind: "user" | "user_group";
  id: string;
  name: string;
}

class SvcSettingsRoleBindings extends PageElement {
  static override properties = PageElement.withState(
    "users",
    "userGroups",
    "roles",
    "nodeGroups",
    "scope",
    "addError",
  );
  declare users: User[];
  declare userGroups: UserGroup[];
  declare roles: Role[];
  declare nodeGroups: NodeGroup[];
  /** Scope of the binding being added. */
  declare scope: "global" | "node_group";
  declare addError: unknown;

  #optionsLoaded = false;

  readonly list = new ListController(this, {
    operation: "GET /api/v1/role-bindings",
    noun: "role bindings",
    sort: { key: "role", dir: "asc" },
    filters: [
      // The holder select (drawn first) sets one of these two.
      { name: "user_id", label: "User", kind: "hidden" },
      { name: "user_group_id", label: "User group", kind: "hidden" },
      {
        name: "role_id",
        label: "Role",
        kind: "select",
        placeholder: "Any role",
        options: () => this.roles.map((r) => [r.id, r.name] as const),
      },
      {
        name: "scope_type",
        label: "Scope",
        kind: "select",
        placeholder: "Any scope",
        options: () => [["global", "Global"], ["node_group", "One node group"]],
      },
      // Set by the node-group links in the table.
      { name: "scope_id", label: "Node group", kind: "hidden" },
      { name: "search", label: "Search", kind: "search", placeholder: "Role or holder name" },
    ],
  });

  constructor() {
    super();
    this.users = [];
    this.userGroups = [];
    this.roles = [];
    this.nodeGroups = [];
    this.scope = "global";
  }

  #q(name: string): string {
    return this.list.query.get(name);
  }

  protected override async load(): Promise<void> {
    const many = { query: { per_page: 200 } };
    const options = this.#optionsLoaded ? undefined : Promise.all([
      session.can("user:view") ? loadPage("GET /api/v1/users", many).then((p) => p.items) : [],
      session.can("user_group:view") ? loadPage("GET /api/v1/user-groups", many).then((p) => p.items) : [],
      session.can("role:view") ? loadPage("GET /api/v1/roles", many).then((p) => p.items) : [],
      session.can("node_group:view") ? loadPage("GET /api/v1/node-groups", many).then((p) => p.items) : [],
    ]);
    const [, loaded] = await Promise.all([this.list.load(), options]);
    if (loaded) {
      [this.users, this.userGroups, this.roles, this.nodeGroups] = loaded;
      this.#optionsLoaded = true;
    }
  }

  /** The holder the list is filtered to, if exactly one. */
  #holder(): Holder | undefined {
    const userId = this.#q("user_id");
    if (userId) {
      const name = this.users.find((u) => u.id === userId)?.username ?? userId;
      return { kind: "user", id: userId, name };
    }
    const groupId = this.#q("user_group_id");
    if (groupId) {
      const name = this.userGroups.find((g) => g.id === groupId)?.name ?? groupId;
      return { kind: "user_group", id: groupId, name };
    }
    return undefined;
  }

  #canEdit(kind: "user" | "user_group"): boolean {
    return session.can(kind === "user" ? "user:edit" : "user_group:edit");
  }

  async #add(holder: Holder): Promise<void> {
    const value = (sel: string) => String((this.querySelector(sel) as HTMLInputElement | null)?.value ?? "");
    const body = {
      role_id: value(".rb-form sl-select[name=role_id]"),
      scope_type: this.scope,
      scope_id: this.scope === "node_group" ? value(".rb-form sl-select[name=scope_id]") || null : undefined,
    };
    const path = { id: holder.id };
    try {
      if (holder.kind === "user") await api.call("POST /api/v1/users/{id}/role-bindings", { path, body });
      else await api.call("POST /api/v1/user-groups/{id}/role-bindings", { path, body });
      this.addError = undefined;
      notify("Role bound", "success");
      await this.reload();
    } catch (err) {
      this.addError = err;
    }
  }

  async #remove(b: ListedRoleBinding): Promise<void> {
    const noun = b.subject.type === "user" ? "user" : "user group";
    const ok = await confirmAction({
      title: `Remove ${b.role_name} from ${b.subject.name}`,
      message: `The ${noun} “${b.subject.name}” loses the permissions of “${b.role_name}”` +
        (b.scope_type === "global" ? "." : ` in node group ${b.scope_name ?? b.scope_id}.`),
      confirmLabel: "Remove",
      danger: true,
    });
    if (!ok) return;
    const path = { id: b.subject.id, bindingId: b.id };
    try {
      if (b.subject.type === "user") {
        await api.call("DELETE /api/v1/users/{id}/role-bindings/{bindingId}", { path });
      } else await api.call("DELETE /api/v1/user-groups/{id}/role-bindings/{bindingId}", { path });
      notify("Role binding removed", "success");
      await this.reload();
    } catch (err) {
      notifyError(err);
    }
  }

  override render() {
    const holder = this.#holder();
    const holderValue = holder ? `${holder.kind}:${holder.id}` : "";
    return html`
      ${this.renderLoadError()} ${this.list.renderFilters({
        lead: html`
          <sl-select label="Holder" placeholder="Any user or group" clearable hoist value=${holderValue}
            style="min-width: 16rem" @sl-change=${(e: Event) => {
              const [kind, id] = valueOf(e).split(":");
              this.addError = undefined;
              this.list.setFilters({
                user_id: kind === "user" ? id : "",
                user_group_id: kind === "user_group" ? id : "",
              });
            }}>
            ${this.users.map((u) => html`<sl-option value=${`user:${u.id}`}>User: ${u.username}</sl-option>`)}
            ${this.userGroups.map((g) =>
              html`<sl-option value=${`user_group:${g.id}`}>Group: ${g.name}</sl-option>`
            )}
          </sl-select>
        `,
      })}
      ${this.list.renderTable({
        caption: "Role bindings",
        tableClass: "role-bindings",
        empty: "No role bindings yet.",
        head: (s) =>
          html`
            ${s("Role", "role")} ${s("Holder", "subject")} ${s("Scope", "scope")}
            <th scope="col">Effective</th> ${s("Created", "created_at")}
            <th scope="col"><span class="visually-hidden">Actions</span></th>
          `,
        row: (b) => this.#renderRow(b),
      })}
      ${holder ? this.#renderAddForm(holder) : nothing}
    `;
  }

  #renderRow(b: ListedRoleBinding): TemplateResult {
    const isUser = b.subject.type === "user";
    const holderFilter = isUser ? { user_id: b.subject.id } : { user_group_id: b.subject.id };
    return html`
      <tr data-role-binding-id=${b.id}>
        <td><a href=${filterHref({ role_id: b.role_id })} title="Every binding of this role">${b
          .role_name}</a></td>
        <td>
          <sl-badge variant=${isUser ? "primary" : "neutral"} pill>${isUser ? "User" : "Group"}</sl-badge>
          <a href=${filterHref(holderFilter)} title="Every role of this holder">${b.subject.name}</a>
        </td>
        <td>${b.scope_type === "global" ? "Global" : html`Node group
          <a href=${filterHref({ scope_type: "node_group", scope_id: b.scope_id ?? "" })}>${
          b.scope_name ??
            b.scope_id
        }</a>`}</td>
        <td>${b.effective ? "Yes" : html`
          <sl-badge variant="neutral">No</sl-badge>
          <span class="muted">node-group scopes grant nothing in this edition</span>
        `}</td>
        <td>${formatDate(b.created_at)}</td>
        <td>${this.#canEdit(b.subject.type)
          ? html`
            <sl-icon-button name="trash" label=${`Remove ${b.role_name} from ${b.subject.name}`}
              @click=${() => this.#remove(b)}></sl-icon-button>
          `
          : nothing}</td>
      </tr>
    `;
  }

  #renderAddForm(holder: Holder): TemplateResult | typeof nothing {
    if (!this.#canEdit(holder.kind)) return nothing;
    const err = this.addError;
    const scoped = session.me?.features.has("scoped_role_bindings")
      ? "One node group"
      : "One node group (no effect in this edition)";
    return html`
      <h2>Bind a role to ${holder.kind === "user" ? "user" : "group"} ${holder.name}</h2>
      <div class="rb-form toolbar">
        ${formError(err)}
        <sl-select name="role_id" label="Role" hoist class=${fieldError(err, "role_id") ? "has-error" : ""}
          help-text=${fieldError(err, "role_id")}>
          ${this.roles.map((r) => html`<sl-option value=${r.id}>${r.name}</sl-option>`)}
        </sl-select>
        <sl-select label="Scope" value=${this.scope}
          @sl-change=${(e: Event) => this.scope = valueOf(e) as "global" | "node_group"}>
          <sl-option value="global">Global</sl-option>
          <sl-option value="node_group">${scoped}</sl-option>
        </sl-select>
        ${this.scope === "node_group"
          ? html`
            <sl-select name="scope_id" label="Node group" hoist
              class=${fieldError(err, "scope_id") ? "has-error" : ""} help-text=${fieldError(
                err,
                "scope_id",
              )}>
                        ${this.nodeGroups.map((g) => html`<sl-option value=${g.id}>${g.name}</sl-option>`)}
                      </sl-select>
          `
          : nothing}
        <sl-button variant="primary" @click=${() => this.#add(holder)}>Bind</sl-button>
      </div>
    `;
  }
}

customElements.define("svc-settings-role-bindings", SvcSettingsRoleBindings);
