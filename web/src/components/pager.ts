/** `<svc-pager>`: previous/next and page size for server-side paginated lists; fires `page-change`. */
import { html, LitElement } from "lit";
import { PAGE_SIZES } from "../list_query.ts";

/** Detail of the `page-change` event. */
export interface PageChange {
  page: number;
  perPage: number;
}

class SvcPager extends LitElement {
  static override properties = {
    page: { type: Number },
    perPage: { type: Number, attribute: "per-page" },
    total: { type: Number },
    label: {},
  };
  declare page: number;
  declare perPage: number;
  declare total: number;
  declare label: string;

  constructor() {
    super();
    this.page = 1;
    this.perPage = 25;
    this.total = 0;
    this.label = "items";
  }

  protected override createRenderRoot(): HTMLElement {
    return this;
  }

  #emit(page: number, perPage = this.perPage): void {
    this.dispatchEvent(
      new CustomEvent<PageChange>("page-change", { detail: { page, perPage }, bubbles: true }),
    );
  }

  override render() {
    const pages = Math.max(1, Math.ceil(this.total / this.perPage));
    const first = this.total === 0 ? 0 : (this.page - 1) * this.perPage + 1;
    const last = Math.min(this.total, this.page * this.perPage);
    return html`
      <nav class="pager" aria-label=${`Pages of ${this.label}`}>
        <span class="pager-range" aria-live="polite">${first}–${last} of ${this.total} ${this.label}</span>
        <sl-select
          size="small"
          label="Per page"
          class="pager-size"
          value=${String(this.perPage)}
          @sl-change=${(e: Event) => this.#emit(1, Number((e.target as HTMLSelectElement).value))}
        >
          ${PAGE_SIZES.map((n) => html`<sl-option value=${String(n)}>${n}</sl-option>`)}
        </sl-select>
        <sl-button size="small" ?disabled=${this.page <= 1} @click=${() => this.#emit(this.page - 1)}>
          Previous
        </sl-button>
        <span>Page ${this.page} of ${pages}</span>
        <sl-button size="small" ?disabled=${this.page >= pages} @click=${() => this.#emit(this.page + 1)}>
          Next
        </sl-button>
      </nav>
    `;
  }
}

customElements.define("svc-pager", SvcPager);
