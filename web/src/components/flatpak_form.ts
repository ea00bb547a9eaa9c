/**
 * `<svc-flatpak-form>`, the Flatpak policy editor's form (see `editors/flatpak.ts`): the form generated from
 * the content message (remotes and apps) with a catalogue search above it. Searching asks the server's
 * Flatpak catalogue (`GET /api/v1/flatpak/apps`) and shows each hit with its icon, name and id; "Add"
 * appends the application (state PRESENT, the catalogue repository's name as remote) to the policy.
 */
import { html, LitElement, nothing } from "lit";
import { FlatpakPolicySchema } from "../../../shared/gen/svc/policy/v1/flatpak_pb.ts";
import type { ValidationIssue } from "../../../shared/policy_types/mod.ts";
import { api } from "../api.ts";
import type { JsonObject } from "../content.ts";
import { errorAlert, valueOf } from "./ui.ts";
import "../editors/schema_form.ts";

/** One catalogue hit (`GET /api/v1/flatpak/apps`). */
export interface CatalogHit {
  app_id: string;
  name: string;
  summary: string;
  icon_url: string;
  versions: string[];
  repo: string;
}

class SvcFlatpakForm extends LitElement {
  static override properties = {
    value: { attribute: false },
    issues: { attribute: false },
    readOnly: { type: Boolean, attribute: "read-only" },
    query: { state: true },
    hits: { state: true },
    searchError: { state: true },
  };
  declare value: JsonObject;
  declare issues: ValidationIssue[];
  declare readOnly: boolean;
  declare query: string;
  declare hits: CatalogHit[] | undefined;
  declare searchError: unknown;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor() {
    super();
    this.value = {};
    this.issues = [];
    this.readOnly = false;
    this.query = "";
    this.hits = undefined;
  }

  protected override createRenderRoot(): HTMLElement {
    return this;
  }

  #search(text: string): void {
    this.query = text;
    clearTimeout(this.#timer);
    if (text.trim().length < 2) {
      this.hits = undefined;
      return;
    }
    this.#timer = setTimeout(async () => {
      try {
        this.hits =
          (await api.call("GET /api/v1/flatpak/apps", { query: { q: text.trim(), limit: 20 } })).items;
        this.searchError = undefined;
      } catch (err) {
        this.searchError = err;
      }
    }, 250);
  }

  #apps(): JsonObject[] {
    return Array.isArray(this.value.apps) ? this.value.apps as JsonObject[] : [];
  }

  #has(appId: string): boolean {
    return this.#apps().some((a) => (a.app_id ?? a.appId) === appId);
  }

  #add(hit: CatalogHit): void {
    this.#emit({
      ...this.value,
      apps: [...this.#apps(), { app_id: hit.app_id, remote: hit.repo, state: "FLATPAK_APP_STATE_PRESENT" }],
    });
  }

  #emit(value: JsonObject): void {
    this.value = value;
    this.dispatchEvent(new CustomEvent("value-change", { detail: value, bubbles: true, composed: true }));
  }

  override render() {
    return html`
      ${this.readOnly ? nothing : html`
        <section class="card flatpak-catalog" aria-label="Flatpak catalogue">
          <sl-input class="flatpak-search" label="Find an application in the catalogue" clearable
            placeholder="Name or id, e.g. firefox" .value=${this.query}
            help-text="Repositories are registered under Settings → Flatpak repositories."
            @sl-input=${(e: Event) => this.#search(valueOf(e))}
            @sl-clear=${() => this.#search("")}></sl-input>
          ${errorAlert(this.searchError)}
          ${this.hits === undefined
            ? nothing
            : this.hits.length === 0
            ? html`<p class="muted flatpak-no-hits">No application matches "${this.query}".</p>`
            : html`
              <ul class="flatpak-hits">
                ${this.hits.map((hit) =>
                  html`
                    <li class="flatpak-hit" data-app-id=${hit.app_id}>
                      ${hit.icon_url
                        ? html`<img src=${hit.icon_url} alt="" width="32" height="32" loading="lazy">`
                        : html`<sl-icon name="box-seam" aria-hidden="true"></sl-icon>`}
                      <span class="flatpak-hit-text">
                        <strong>${hit.name}</strong> <code>${hit.app_id}</code>
                        <span class="muted">${hit.summary}${hit.versions[0]
                          ? ` · ${hit.versions[0]}`
                          : ""} · ${hit.repo}</span>
                      </span>
                      <sl-button size="small" ?disabled=${this.#has(hit.app_id)} @click=${() =>
                        this.#add(hit)}>
                        ${this.#has(hit.app_id)
                          ? "Added"
                          : html`Add <span class="visually-hidden">${hit.name}</span>`}
                      </sl-button>
                    </li>
                  `
                )}
              </ul>
            `}
        </section>
      `}
      <svc-schema-form .schema=${FlatpakPolicySchema} .value=${this.value} .issues=${this.issues} .hints=${{}}
        ?read-only=${this.readOnly} @value-change=${(e: CustomEvent<JsonObject>) => {
          e.stopPropagation();
          this.#emit(e.detail);
        }}></svc-schema-form>
    `;
  }
}

customElements.define("svc-flatpak-form", SvcFlatpakForm);
