/**
 * `<svc-settings-roles>`: roles and their permissions as a matrix (resources × actions) built from the shared
 * permission catalogue. Built-in roles are read-only; the server refuses granting what the caller lacks.
 */
import { html, nothing, type TemplateResult } from "lit";
import { api } from "../api.ts";
import { session } from "../session.ts";
import { isPermission, PERMISSION_CATALOGUE } from "../../../shared/permissions.ts";
import { PageElement } from "./page.ts";
import { ListController } from "./list_page.ts";
import {
  columns,
  confirmThenRun,
  fieldError,
  formError,
  nameDescriptionFields,
  notify,
  whenHidden,
} from "./ui.ts";
import type { Role } from "../api_types.ts";

const ACTIONS = [...new Set(Object.values(PERMISSION_CATALOGUE).flat())];

class SvcSettingsRoles extends PageElement {
  static override properties = PageElement.withState("editing", "chosen", "editError");
  declare editing: Partial<Role> | undefined;
  declare chosen: Set<string>;
  declare editError: unknown;

  constructor() {
    super();
    this.chosen = new Set();
  }

  /** A tab of Settings: paged like every list, the query kept in the element (the tabs share the URL). */
  readonly list = new ListController(this, {
    operation: "GET /api/v1/roles",
    noun: "roles",
    syncUrl: false,
    filters: [],
  });

  protected override async load(): Promise<void> {
    await this.list.load();
  }

  #open(role: Partial<Role>): void {
    this.editing = role;
    this.chosen = new Set(role.permissions ?? []);
    this.editError = undefined;
  }

  #toggle(permission: string, on: boolean): void {
    const next = new Set(this.chosen);
    if (on) next.add(permission);
    else next.delete(permission);
    this.chosen = next;
  }

  async #save(): Promise<void> {
    const r = this.editing!;
    const value = (name: string) =>
      String((this.querySelector(`.role-form [name=${name}]`) as HTMLInputElement | null)?.value ?? "");
    const payload = {
      name: value("name").trim(),
      description: value("description"),
      // The matrix offers only catalogue permissions; the filter says so to the type of the body.
      permissions: [...this.chosen].filter(isPermission).sort(),
    };
    try {
      if (r.id) await api.call("PUT /api/v1/roles/{id}", { path: { id: r.id }, body: payload });
      else await api.call("POST /api/v1/roles", { body: payload });
      notify(`Role ${payload.name} saved`, "success");
      this.editing = undefined;
      await this.reload();
    } catch (err) {
      this.editError = err;
    }
  }

  async #delete(r: Role): Promise<void> {
    await confirmThenRun(
      {
        title: `Delete role ${r.name}`,
        message: "Users and groups holding only this role lose its permissions at their next request.",
        confirmLabel: "Delete",
        danger: true,
      },
      {
        run: () => api.call("DELETE /api/v1/roles/{id}", { path: { id: r.id } }),
        done: `Role ${r.name} deleted`,
        then: () => this.reload(),
      },
    );
  }

  override render() {
    return html`
      ${this.renderLoadError()}
      <div class="toolbar">
        ${session.can("role:create")
          ? html`<sl-button variant="primary" @click=${() =>
            this.#open({})}><sl-icon slot="prefix" name="plus-lg"></sl-icon>
            New role</sl-button>`
          : nothing}
      </div>
      ${this.list.renderTable({
        caption: "Roles",
        empty: "No roles yet.",
        head: html`
          ${columns("Role", "Description", "Permissions")}
          <th scope="col"><span class="visually-hidden">Actions</span></th>
        `,
        row: (r) =>
          html`
            <tr>
              <td><strong>${r.name}</strong> ${r.builtin
                ? html`<sl-badge variant="neutral" pill>built-in</sl-badge>`
                : nothing}</td>
              <td>${r.description}</td>
              <td class="num">${r.permissions.length}</td>
              <td class="row-actions">
                              <sl-button size="small" @click=${() => this.#open(r)}>
                                ${r.builtin || !session.can("role:edit") ? "View" : "Edit"}</sl-button>
                              ${session.can("role:delete") && !r.builtin
                                ? html`
                                  <sl-icon-button name="trash" label=${`Delete role ${r.name}`} @click=${() =>
                                    this.#delete(r)}></sl-icon-button>
                                `
                                : nothing}
                            </td>
            </tr>
          `,
      })}
      ${this.#renderEditor()}
    `;
  }

  #renderEditor(): TemplateResult | typeof nothing {
    const r = this.editing;
    if (!r) return nothing;
    const readOnly = !!r.builtin || !(r.id ? session.can("role:edit") : session.can("role:create"));
    const err = this.editError;
    return html`
      <sl-dialog open label=${r.id
        ? `Role ${r.name}`
        : "New role"} style="--width: 52rem" @sl-after-hide=${whenHidden(() => this.editing = undefined)}>
        <div class="role-form form-grid">
          ${formError(err)}
          ${r.builtin
            ? html`<p class="muted">Built-in roles cannot be changed; create a new role instead.</p>`
            : nothing}
          ${nameDescriptionFields(r, { err, readOnly })}
          ${this.#matrix(readOnly)}
          ${fieldError(err, "permissions")
            ? html`<p class="field-error">${fieldError(err, "permissions")}</p>`
            : nothing}
        </div>
        <sl-button slot="footer" @click=${() => this.editing = undefined}>${readOnly
          ? "Close"
          : "Cancel"}</sl-button>
        ${readOnly
          ? nothing
          : html`<sl-button slot="footer" variant="primary" @click=${this.#save}>Save</sl-button>`}
      </sl-dialog>
    `;
  }

  #matrix(readOnly: boolean): TemplateResult {
    return html`
      <div class="table-wrap">
        <table class="data matrix">
          <caption>Permissions</caption>
          <thead>
            <tr><th scope="col">Resource</th>${ACTIONS.map((a) => html`<th scope="col">${a}</th>`)}</tr>
          </thead>
          <tbody>
            ${Object.entries(PERMISSION_CATALOGUE).map(([resource, actions]) =>
              html`<tr>
                <th scope="row">${resource.replaceAll("_", " ")}</th>
                ${
                ACTIONS.map((a) => {
                  if (!(actions as readonly string[]).includes(a)) return html`<td></td>`;
                  const id = `${resource}:${a}`;
                  return html`
                    <td>
                      <sl-checkbox ?checked=${this.chosen.has(id)} ?disabled=${readOnly} data-permission=${id}
                        @sl-change=${(e: Event) => this.#toggle(id, (e.target as HTMLInputElement).checked)}>
                                        <span class="visually-hidden">${id}</span></sl-checkbox>
                    </td>
                  `;
                })
              }
              </tr>`
            )}
          </tbody>
        </table>
      </div>
    `;
  }
}

customElements.define("svc-settings-roles", SvcSettingsRoles);
