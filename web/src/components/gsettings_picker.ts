/**
 * `<svc-gsettings-picker>`: finds a GSettings key in the server's merged catalogue (what agents reported over
 * the built-in GNOME schemas). Type to search schema ids, key names and summaries; each hit lists its matching
 * keys, and choosing one fires `gsettings-pick` with `{ schemaId, key }`. Also exports the schema cache the
 * Dconf form uses to describe a chosen key.
 */
import { LightElement, stateProperties } from "./light_element.ts";
import { html, nothing, type TemplateResult } from "lit";
import { type Answer, api } from "../api.ts";

/** One schema with its keys, as `GET /api/v1/catalogues/gsettings/{schema_id}` returns it. */
export type CatalogueSchema = Answer<"GET /api/v1/catalogues/gsettings/{schema_id}">;

/** One key of a schema. */
export type CatalogueKey = CatalogueSchema["keys"][number];

type SearchHit = Answer<"GET /api/v1/catalogues/gsettings">["items"][number];

const schemas = new Map<string, Promise<CatalogueSchema | undefined>>();

/** A schema of the catalogue (cached per page load); undefined when the catalogue does not know it. */
export function catalogueSchema(schemaId: string): Promise<CatalogueSchema | undefined> {
  let found = schemas.get(schemaId);
  if (!found) {
    found = api.call("GET /api/v1/catalogues/gsettings/{schema_id}", { path: { schema_id: schemaId } })
      .catch(() => undefined);
    schemas.set(schemaId, found);
  }
  return found;
}

class SvcGSettingsPicker extends LightElement {
  static override properties = {
    ...stateProperties("query", "hits", "total", "nodes", "error"),
  };
  declare query: string;
  declare hits: SearchHit[];
  declare total: number;
  declare nodes: number;
  declare error: string;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #seq = 0;

  constructor() {
    super();
    this.query = "";
    this.hits = [];
    this.total = 0;
    this.nodes = 0;
    this.error = "";
  }

  override connectedCallback(): void {
    super.connectedCallback();
    void this.#search();
  }

  #onInput(e: Event): void {
    this.query = String((e.target as HTMLInputElement).value);
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#search(), 200);
  }

  async #search(): Promise<void> {
    const seq = ++this.#seq;
    try {
      const result = await api.call("GET /api/v1/catalogues/gsettings", {
        query: { q: this.query, limit: 25 },
      });
      if (seq !== this.#seq) return;
      this.hits = result.items;
      this.total = result.total;
      this.nodes = result.nodes_reporting;
      this.error = "";
    } catch (err) {
      if (seq === this.#seq) this.error = (err as Error).message;
    }
  }

  #pick(schemaId: string, key: string): void {
    this.dispatchEvent(
      new CustomEvent("gsettings-pick", { detail: { schemaId, key }, bubbles: true, composed: true }),
    );
  }

  override render(): TemplateResult {
    return html`
      <div class="gsettings-picker" role="search">
        <sl-input class="gsettings-search" label="Find a GSettings key" clearable
          placeholder="Schema id, key or summary (e.g. screensaver, lock-delay)"
          .value=${this.query} @sl-input=${this.#onInput} @sl-clear=${this.#onInput}></sl-input>
        <p class="muted" role="status">
          ${this.error ||
            `${this.total} schema${this.total === 1 ? "" : "s"}; ${this.nodes} node${
              this.nodes === 1 ? "" : "s"
            } reported a catalogue`}
        </p>
        <ul class="gsettings-hits">
          ${this.hits.map((hit) =>
            html`
              <li>
                <strong>${hit.schema_id}</strong>
                <span class="muted">${hit.node_count} node${hit.node_count === 1 ? "" : "s"}${hit.builtin
                  ? ", built-in"
                  : ""}${hit.relocatable ? ", relocatable" : ""}</span>
                ${hit.matching_keys.length
                  ? html`<ul>${
                    hit.matching_keys.map((k) =>
                      html`<li><button type="button" class="gsettings-key" data-schema=${hit.schema_id}
                      data-key=${k.name} @click=${() => this.#pick(hit.schema_id, k.name)}>
                      <code>${k.name}</code> <span class="muted">(${k.type})</span> ${k.summary}
                    </button></li>`
                    )
                  }</ul>`
                  : nothing}
              </li>
            `
          )}
        </ul>
      </div>
    `;
  }
}

customElements.define("svc-gsettings-picker", SvcGSettingsPicker);
