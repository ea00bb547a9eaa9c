/**
 * The query of a list page held in URL parameters: its filters, `sort`/`order`, `page` and `per_page`. Pure
 * (no DOM), so the rules are tested without a browser; `components/list_page.ts` ties it to a page.
 */

/** Sorting state of a table. */
export interface SortState {
  key: string;
  dir: "asc" | "desc";
}

/** The page sizes the pager offers. */
export const PAGE_SIZES: readonly number[] = [10, 25, 50, 100];

/** Changes to the URL query: a value sets the key, `undefined` removes it. */
export type QueryChanges = Record<string, string | undefined>;

/** What a list is sorted and paged by when the URL does not say. */
export interface ListDefaults {
  /** Undefined for lists the server sorts one way only. */
  sort?: SortState;
  perPage?: number;
}

/**
 * The query of one list, read from URL parameters: the declared filters, `sort`/`order`, `page` and
 * `per_page`. Every change returns the URL changes it implies (a new filter or sort goes back to page 1).
 */
export class ListQuery {
  readonly #params: URLSearchParams;
  readonly #filters: readonly string[];
  readonly #defaults: ListDefaults;

  constructor(params: URLSearchParams, filters: readonly string[], defaults: ListDefaults = {}) {
    this.#params = new URLSearchParams(params);
    this.#filters = filters;
    this.#defaults = defaults;
  }

  /** A filter's value, or "". */
  get(name: string): string {
    return this.#params.get(name) ?? "";
  }

  /** The page asked for (1 when absent or not a positive whole number). */
  get page(): number {
    const n = Number(this.#params.get("page"));
    return Number.isInteger(n) && n >= 1 ? n : 1;
  }

  /** The page size asked for, one the pager offers; otherwise the list's default. */
  get perPage(): number {
    const n = Number(this.#params.get("per_page"));
    return PAGE_SIZES.includes(n) ? n : this.#defaults.perPage ?? 25;
  }

  /** The sort asked for, else the list's default; undefined for lists without sorting. */
  get sort(): SortState | undefined {
    const fallback = this.#defaults.sort;
    if (!fallback) return undefined;
    const key = this.#params.get("sort");
    if (!key) return fallback;
    const order = this.#params.get("order");
    return { key, dir: order === "asc" || order === "desc" ? order : fallback.dir };
  }

  /** The filters that are set, by name. */
  filters(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const name of this.#filters) {
      const v = this.get(name);
      if (v) out[name] = v;
    }
    return out;
  }

  /** How many filters are set (the count on the folded "Filters" button). */
  activeCount(): number {
    return Object.keys(this.filters()).length;
  }

  /** The API query: the set filters, the page, its size and the sort. */
  apiQuery(): Record<string, string | number> {
    const sort = this.sort;
    return {
      ...this.filters(),
      page: this.page,
      per_page: this.perPage,
      ...(sort ? { sort: sort.key, order: sort.dir } : {}),
    };
  }

  /** Sets filters ("" clears one) and goes back to the first page. */
  setFilters(values: Record<string, string>): QueryChanges {
    const changes: QueryChanges = { page: undefined };
    for (const [name, value] of Object.entries(values)) changes[name] = value || undefined;
    return this.#apply(changes);
  }

  /** Clears every filter. */
  clearFilters(): QueryChanges {
    return this.setFilters(Object.fromEntries(this.#filters.map((f) => [f, ""])));
  }

  /** Sorts by another column and goes back to the first page. */
  setSort(sort: SortState): QueryChanges {
    return this.#apply({ sort: sort.key, order: sort.dir, page: undefined });
  }

  /** Moves to a page (page 1 and the default size leave the URL clean). */
  setPage(page: number, perPage: number): QueryChanges {
    return this.#apply({
      page: page > 1 ? String(page) : undefined,
      per_page: perPage === (this.#defaults.perPage ?? 25) ? undefined : String(perPage),
    });
  }

  #apply(changes: QueryChanges): QueryChanges {
    for (const [k, v] of Object.entries(changes)) {
      if (v === undefined) this.#params.delete(k);
      else this.#params.set(k, v);
    }
    return changes;
  }
}
