/**
 * `<svc-saved-views list="nodes" .query=…>`: named views of a list — its filters and sort — kept per person on
 * the server (`/api/v1/saved-views`), so they follow the admin from browser to browser. A "Views" menu applies
 * one (fires `view-apply` with its query), saves the current filters and sort under a name, and opens the
 * list of views to rename or delete them.
 */
import { LightElement, stateProperties } from "./light_element.ts";
import { html, nothing } from "lit";
import { api } from "../api.ts";
import type { Operations } from "../../../shared/api/svc_api.gen.ts";
import { confirmAction, errorAlert, fieldError, notify, notifyError, openDialog, whenHidden } from "./ui.ts";

/** A saved view as the API returns it. */
type SavedView = Operations["GET /api/v1/saved-views"]["response"]["items"][number];

class SvcSavedViews extends LightElement {
  static override properties = {
    list: {},
    query: { attribute: false },
    ...stateProperties("views", "dialog", "error", "renaming"),
  };
  /** The list page's key (`nodes`). */
  declare list: string;
  /** The list's current filters and sort, as a URL query. */
  declare query: string;
  declare views: SavedView[] | undefined;
  /** Which dialog is open. */
  declare dialog: "" | "save" | "manage";
  declare error: unknown;
  /** The view being renamed in the manage dialog. */
  declare renaming: string;
  #draftName = "";

  constructor() {
    super();
    this.list = "";
    this.query = "";
    this.dialog = "";
    this.renaming = "";
  }

  override connectedCallback(): void {
    super.connectedCallback();
    void this.#load();
  }

  async #load(): Promise<void> {
    try {
      this.views = (await api.call("GET /api/v1/saved-views", { query: { list: this.list } })).items;
    } catch (err) {
      this.views = [];
      notifyError(err);
    }
  }

  async #open(dialog: "save" | "manage"): Promise<void> {
    this.error = undefined;
    this.renaming = "";
    this.#draftName = "";
    this.dialog = dialog;
    await this.updateComplete;
    await openDialog(this.querySelector("sl-dialog.saved-views-dialog"));
  }

  #close(): void {
    (this.querySelector("sl-dialog.saved-views-dialog") as (HTMLElement & { hide(): void }) | null)?.hide();
  }

  async #save(e: Event): Promise<void> {
    e.preventDefault();
    try {
      const view = await api.call("POST /api/v1/saved-views", {
        body: { list: this.list, name: this.#draftName.trim(), query: this.query },
      });
      notify(`View "${view.name}" saved`, "success");
      this.#close();
      await this.#load();
    } catch (err) {
      this.error = err;
    }
  }

  async #rename(view: SavedView, name: string): Promise<void> {
    try {
      await api.call("PUT /api/v1/saved-views/{id}", { path: { id: view.id }, body: { name: name.trim() } });
      this.renaming = "";
      this.error = undefined;
      await this.#load();
    } catch (err) {
      this.error = err;
    }
  }

  async #delete(view: SavedView): Promise<void> {
    const ok = await confirmAction({
      title: `Delete the view "${view.name}"`,
      message: "The view is removed for you in every browser; the list itself is not changed.",
      confirmLabel: "Delete view",
      danger: true,
    });
    if (!ok) return;
    try {
      await api.call("DELETE /api/v1/saved-views/{id}", { path: { id: view.id } });
      await this.#load();
    } catch (err) {
      notifyError(err);
    }
  }

  /** The new name typed beside the button that was pressed. */
  #renamed(e: Event): string {
    const input = (e.target as HTMLElement).closest("li")?.querySelector("sl-input.rename-view");
    return String((input as unknown as { value?: string } | null)?.value ?? "");
  }

  #apply(view: SavedView): void {
    this.dispatchEvent(new CustomEvent("view-apply", { detail: view.query, bubbles: true }));
  }

  override render() {
    const views = this.views ?? [];
    return html`
      <sl-dropdown class="saved-views" hoist>
        <sl-button slot="trigger" caret><sl-icon slot="prefix" name="bookmark"></sl-icon>Views</sl-button>
        <sl-menu @sl-select=${(e: CustomEvent<{ item: { value: string } }>) => {
          const v = e.detail.item.value;
          if (v === "save") void this.#open("save");
          else if (v === "manage") void this.#open("manage");
          else {
            const view = views.find((x) => x.id === v);
            if (view) this.#apply(view);
          }
        }}>
          ${views.length === 0 ? html`<sl-menu-item disabled>No saved view yet</sl-menu-item>` : nothing}
          ${views.map((v) => html`<sl-menu-item value=${v.id} class="saved-view">${v.name}</sl-menu-item>`)}
          <sl-divider></sl-divider>
          <sl-menu-item value="save" class="save-view">Save current filters and sort…</sl-menu-item>
          <sl-menu-item value="manage" class="manage-views" ?disabled=${views.length ===
            0}>Rename or delete views…</sl-menu-item>
        </sl-menu>
      </sl-dropdown>
      ${this.dialog ? this.#renderDialog(views) : nothing}
    `;
  }

  #renderDialog(views: SavedView[]) {
    const err = this.error;
    return html`
      <sl-dialog class="saved-views-dialog" label=${this.dialog === "save"
        ? "Save this view"
        : "Your saved views"}
        @sl-after-hide=${whenHidden(() => this.dialog = "")}>
        ${this.dialog === "save"
          ? html`
            <form class="form-grid save-view-form" @submit=${this.#save}>
              <p>The current filters and sort of this list are saved under a name, for you, in every browser you use.</p>
              ${err && !fieldError(err, "name") ? errorAlert(err) : nothing}
              <sl-input name="view-name" label="Name" required autocomplete="off" maxlength="100"
                class=${fieldError(err, "name") ? "has-error" : ""} help-text=${fieldError(err, "name") ||
                  "e.g. Offline lab machines"}
                @sl-input=${(e: Event) =>
                  this.#draftName = String((e.target as HTMLInputElement).value)}></sl-input>
            </form>
            <sl-button slot="footer" @click=${() => this.#close()}>Cancel</sl-button>
            <sl-button slot="footer" variant="primary" class="confirm-save-view"
              @click=${(e: Event) => this.#save(e)}>Save view</sl-button>
          `
          : html`
            ${err ? errorAlert(err) : nothing}
            <ul class="saved-view-list">
              ${views.map((v) =>
                html`<li data-view=${v.name}>
                  ${
                  this.renaming === v.id
                    ? html`
                      <sl-input size="small" class="rename-view" label=${`New name for ${v.name}`} .value=${v
                        .name}
                        @keydown=${(e: KeyboardEvent) => {
                          if (e.key === "Enter") {
                            void this.#rename(v, String((e.target as HTMLInputElement).value));
                          }
                        }}></sl-input>
                      <sl-button size="small" variant="primary" class="confirm-rename" @click=${(e: Event) =>
                        this.#rename(v, this.#renamed(e))}>Save name</sl-button>
                    `
                    : html`
                      <span class="saved-view-name">${v.name}</span>
                      <sl-button size="small" class="start-rename" @click=${() =>
                        this.renaming = v.id}>Rename<span
                                              class="visually-hidden"> ${v.name}</span></sl-button>
                    `
                }
                  <sl-button size="small" variant="danger" outline class="delete-view" @click=${() =>
                  this.#delete(v)}
                  >Delete<span class="visually-hidden"> ${v.name}</span></sl-button>
                </li>`
              )}
            </ul>
            <sl-button slot="footer" @click=${() => this.#close()}>Close</sl-button>
          `}
      </sl-dialog>
    `;
  }
}

customElements.define("svc-saved-views", SvcSavedViews);
