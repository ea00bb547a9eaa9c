/**
 * `<svc-flatpak-form>`, the Flatpak policy editor's form (see `editors/flatpak.ts`): the form generated from
 * the content message (remotes and apps) with a catalogue search above it. Searching asks the server's
 * Flatpak catalogue (`GET /api/v1/flatpak/apps`) and shows each hit with its icon, name and id; "Add"
 * appends the application (state PRESENT, the catalogue repository's name as remote) to the policy.
 */
import { html, nothing } from "lit";
import { FlatpakPolicySchema } from "../../../shared/gen/svc/policy/v1/flatpak_pb.ts";
import { api } from "../api.ts";
import "../editors/schema_form.ts";
import { PolicyFormElement } from "./policy_form_element.ts";
import { addButton, catalogueSearch } from "./catalogue_picker.ts";
import { stateProperties } from "./light_element.ts";

/** One catalogue hit (`GET /api/v1/flatpak/apps`). */
export interface CatalogHit {
  app_id: string;
  name: string;
  summary: string;
  icon_url: string;
  versions: string[];
  repo: string;
}

class SvcFlatpakForm extends PolicyFormElement {
  static override properties = {
    ...stateProperties("query", "hits", "searchError"),
  };
  declare query: string;
  declare hits: CatalogHit[] | undefined;
  declare searchError: unknown;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor() {
    super();
    this.query = "";
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

  #has(appId: string): boolean {
    return this.listOf("apps").some((a) => (a.app_id ?? a.appId) === appId);
  }

  #add(hit: CatalogHit): void {
    this.emitValue({
      ...this.value,
      apps: [...this.listOf("apps"), {
        app_id: hit.app_id,
        remote: hit.repo,
        state: "FLATPAK_APP_STATE_PRESENT",
      }],
    });
  }

  override render() {
    return html`
      ${this.readOnly ? nothing : catalogueSearch({
        name: "flatpak",
        region: "Flatpak catalogue",
        label: "Find an application in the catalogue",
        placeholder: "Name or id, e.g. firefox",
        helpText: "Repositories are registered under Settings → Flatpak repositories.",
        query: this.query,
        hits: this.hits,
        error: this.searchError,
        noun: "application",
        onSearch: (text) => this.#search(text),
        hit: (hit: CatalogHit) =>
          html`
            <li class="flatpak-hit" data-app-id=${hit.app_id}>
              ${hit.icon_url
                ? html`<img src=${hit.icon_url} alt="" width="32" height="32" loading="lazy">`
                : html`<sl-icon name="box-seam" aria-hidden="true"></sl-icon>`}
              <span class="flatpak-hit-text">
                <strong>${hit.name}</strong> <code>${hit.app_id}</code>
                <span class="muted">${hit.summary}${hit.versions[0] ? ` · ${hit.versions[0]}` : ""} · ${hit
                  .repo}</span>
              </span>
              ${addButton(this.#has(hit.app_id), hit.name, () => this.#add(hit))}
            </li>
          `,
      })}
      ${this.schemaForm(FlatpakPolicySchema)}
    `;
  }
}

customElements.define("svc-flatpak-form", SvcFlatpakForm);
