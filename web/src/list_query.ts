/**
 * The query of a list page held in URL parameters: its filters, `sort`/`order`, `page` and `per_page`. Pure
 * (no DOM), so the rules are tested without a browser; `components/list_page.ts` ties it to a page.
 *
 * Lists that grow without bound (the audit log) page by cursor instead of by number: the API reads the rows
 * after a key at the same cost at any depth, where an offset reads and drops every row before the page. The
 * URL then holds the current page's `cursor` and `prev`, the cursors of the pages before it (comma-separated;
 * the first page has none), so a reload or a shared link shows the same rows and Previous still works.
 * {@link cursorRange} places such a page in its list for the pager, where page numbers cannot.
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
  /** `cursor`: pages by the API's `cursor`/`next_cursor` (keyset) instead of page numbers. */
  paging?: "page" | "cursor";
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

  /** The page asked for (1 when absent or not a positive whole number; by cursor: 1 + the pages before). */
  get page(): number {
    if (this.#byCursor) return this.cursor ? this.#previousCursors.length + 2 : 1;
    const n = Number(this.#params.get("page"));
    return Number.isInteger(n) && n >= 1 ? n : 1;
  }

  get #byCursor(): boolean {
    return this.#defaults.paging === "cursor";
  }

  /** Cursor paging: the cursor of the page shown (undefined on the first page). */
  get cursor(): string | undefined {
    return this.#byCursor ? this.#params.get("cursor") || undefined : undefined;
  }

  /** Cursor paging: the cursors of the pages before the current one, oldest first (none for page 2). */
  get #previousCursors(): string[] {
    return (this.#params.get("prev") ?? "").split(",").filter((c) => c !== "");
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

  /** The API query: the set filters, the page (or cursor), its size and the sort. */
  apiQuery(): Record<string, string | number> {
    const sort = this.sort;
    const cursor = this.cursor;
    return {
      ...this.filters(),
      ...(this.#byCursor ? (cursor ? { cursor } : {}) : { page: this.page }),
      per_page: this.perPage,
      ...(sort ? { sort: sort.key, order: sort.dir } : {}),
    };
  }

  /** The URL changes that go back to the first page. */
  #firstPage(): QueryChanges {
    return { page: undefined, cursor: undefined, prev: undefined };
  }

  /** Sets filters ("" clears one) and goes back to the first page. */
  setFilters(values: Record<string, string>): QueryChanges {
    const changes: QueryChanges = this.#firstPage();
    for (const [name, value] of Object.entries(values)) changes[name] = value || undefined;
    return this.#apply(changes);
  }

  /** Clears every filter. */
  clearFilters(): QueryChanges {
    return this.setFilters(Object.fromEntries(this.#filters.map((f) => [f, ""])));
  }

  /** Sorts by another column and goes back to the first page. */
  setSort(sort: SortState): QueryChanges {
    return this.#apply({ sort: sort.key, order: sort.dir, ...this.#firstPage() });
  }

  /**
   * Moves to a page (page 1 and the default size leave the URL clean). By cursor, only the next page (given
   * the `next_cursor` of the current one), the previous page, or page 1 with another size can be reached.
   */
  setPage(page: number, perPage: number, nextCursor?: string | null): QueryChanges {
    const size = perPage === (this.#defaults.perPage ?? 25) ? undefined : String(perPage);
    if (!this.#byCursor) return this.#apply({ page: page > 1 ? String(page) : undefined, per_page: size });
    const current = this.page;
    const before = this.#previousCursors;
    const cursor = this.cursor;
    if (perPage === this.perPage && page === current + 1 && nextCursor) {
      const prev = cursor ? [...before, cursor] : [];
      return this.#apply({ cursor: nextCursor, prev: prev.length ? prev.join(",") : undefined });
    }
    if (perPage === this.perPage && page === current - 1 && page > 1) {
      return this.#apply({
        cursor: before[before.length - 1],
        prev: before.length > 1 ? before.slice(0, -1).join(",") : undefined,
      });
    }
    return this.#apply({ ...this.#firstPage(), per_page: size });
  }

  #apply(changes: QueryChanges): QueryChanges {
    for (const [k, v] of Object.entries(changes)) {
      if (v === undefined) this.#params.delete(k);
      else this.#params.set(k, v);
    }
    return changes;
  }
}

/** Where a page read by cursor sits in its list, as its pager shows it. */
export interface CursorRange {
  /** Place of the first and last row shown, counted from the newest; 0 and 0 on an empty page. */
  first: number;
  last: number;
  /** The total to show: never below `last`, since an estimated total may fall short of the rows read. */
  total: number;
  /** Whether Next leads to more rows. */
  hasNext: boolean;
}

/**
 * The range of a page read by cursor. The pages before it were full (each had a next cursor), so it starts
 * at row `(page - 1) × perPage + 1`. The API gives a next cursor whenever a page is full, even when no row
 * follows; an exact total tells that end apart (rows written since the first page only raise the total), so
 * Next does not lead to an empty page. With an estimated total only the cursor decides.
 */
export function cursorRange(at: {
  page: number;
  perPage: number;
  /** Rows on the page shown. */
  count: number;
  total: number;
  estimated: boolean;
  nextCursor: string | null | undefined;
}): CursorRange {
  const first = at.count === 0 ? 0 : (at.page - 1) * at.perPage + 1;
  const last = at.count === 0 ? 0 : first + at.count - 1;
  const hasNext = Boolean(at.nextCursor) && at.count > 0 && (at.estimated || last < at.total);
  return { first, last, total: Math.max(at.total, last), hasNext };
}
