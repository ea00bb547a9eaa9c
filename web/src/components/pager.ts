/**
 * `<svc-pager>`: previous/next and page size for server-side paginated lists; fires `page-change`. A list paged
 * by cursor sets `byCursor` and `count` (rows shown): the range then comes from `cursorRange` (Next needs
 * `nextCursor`, null on the last page), there is no "of M pages", and an estimated total reads "about".
 */
import { html } from "lit";
import { cursorRange, PAGE_SIZES } from "../list_query.ts";
import { LightElement } from "./light_element.ts";

/** Detail of the `page-change` event. */
export interface PageChange {
  page: number;
  perPage: number;
}

class SvcPager extends LightElement {
  static override properties = {
    page: { type: Number },
    perPage: { type: Number, attribute: "per-page" },
    total: { type: Number },
    label: {},
    byCursor: { type: Boolean },
    nextCursor: {},
    estimated: { type: Boolean },
    count: { type: Number },
  };
  declare page: number;
  declare perPage: number;
  declare total: number;
  declare label: string;
  declare byCursor: boolean;
  declare nextCursor: string | null | undefined;
  declare estimated: boolean;
  declare count: number;

  constructor() {
    super();
    this.page = 1;
    this.perPage = 25;
    this.total = 0;
    this.label = "items";
    this.byCursor = false;
    this.nextCursor = null;
    this.estimated = false;
    this.count = 0;
  }

  #emit(page: number, perPage = this.perPage): void {
    this.dispatchEvent(
      new CustomEvent<PageChange>("page-change", { detail: { page, perPage }, bubbles: true }),
    );
  }

  override render() {
    const pages = Math.max(1, Math.ceil(this.total / this.perPage));
    const { first, last, total, hasNext } = this.byCursor
      ? cursorRange({
        page: this.page,
        perPage: this.perPage,
        count: this.count,
        total: this.total,
        estimated: this.estimated,
        nextCursor: this.nextCursor,
      })
      : {
        first: this.total === 0 ? 0 : (this.page - 1) * this.perPage + 1,
        last: Math.min(this.total, this.page * this.perPage),
        total: this.total,
        hasNext: this.page < pages,
      };
    const of = `${this.estimated ? "about " : ""}${total.toLocaleString()}`;
    return html`
      <nav class="pager" aria-label=${`Pages of ${this.label}`}>
        <span class="pager-range" aria-live="polite">${first}–${last} of ${of} ${this.label}</span>
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
        <span>Page ${this.page}${this.byCursor ? "" : ` of ${pages}`}</span>
        <sl-button size="small" ?disabled=${!hasNext} @click=${() => this.#emit(this.page + 1)}>
          Next
        </sl-button>
      </nav>
    `;
  }
}

customElements.define("svc-pager", SvcPager);
