/**
 * The catalogue search a policy form shows above its generated form (Flatpak applications, polkit
 * actions): a search box, the search's error, "no match" or the hits, each hit with an "Add" button that
 * turns into "Added" once the policy holds it. The form asks the server and keeps the query and the hits;
 * this draws them the same way for every catalogue, under class names that start with the form's `name`.
 */
import { html, nothing, type TemplateResult } from "lit";
import { errorAlert, valueOf } from "./ui.ts";

/** What a catalogue search shows; `name` prefixes its classes (`flatpak` gives `flatpak-search`, …). */
export interface CatalogueSearchView<Hit> {
  name: string;
  /** The section's accessible name. */
  region: string;
  label: string;
  placeholder: string;
  helpText: string;
  query: string;
  /** Undefined until a query is long enough to ask. */
  hits: readonly Hit[] | undefined;
  error: unknown;
  /** What the hits are, for "No … matches". */
  noun: string;
  onSearch: (text: string) => void;
  hit: (hit: Hit) => TemplateResult;
  /** Shown between the search box and the results (e.g. which rule "Add" fills). */
  controls?: TemplateResult | typeof nothing;
  /** Shown under the hits when there are some. */
  more?: TemplateResult | typeof nothing;
}

/** The search section of a catalogue. */
export function catalogueSearch<Hit>(view: CatalogueSearchView<Hit>): TemplateResult {
  const { name, hits } = view;
  return html`
    <section class="card ${name}-catalog" aria-label=${view.region}>
      <sl-input class="${name}-search" label=${view.label} clearable placeholder=${view.placeholder}
        .value=${view.query} help-text=${view.helpText} @sl-input=${(e: Event) => view.onSearch(valueOf(e))}
        @sl-clear=${() => view.onSearch("")}></sl-input>
      ${view.controls ?? nothing} ${errorAlert(view.error)}
      ${hits === undefined
        ? nothing
        : hits.length === 0
        ? html`<p class="muted ${name}-no-hits">No ${view.noun} matches "${view.query}".</p>`
        : html`<ul class="${name}-hits">${hits.map(view.hit)}</ul>${view.more ?? nothing}`}
    </section>
  `;
}

/** A hit's "Add" button, "Added" (and disabled) once the policy holds it; `what` names it to a screen reader. */
export function addButton(added: boolean, what: string, add: () => void): TemplateResult {
  return html`
    <sl-button size="small" ?disabled=${added} @click=${add}>
      ${added ? "Added" : html`Add <span class="visually-hidden">${what}</span>`}
    </sl-button>
  `;
}
