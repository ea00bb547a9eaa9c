/**
 * The one building block of every list page: the query (filters, sort, page) kept in the URL, a filter bar
 * drawn from a declarative filter list (folded behind one "Filters" button on a phone), sortable column
 * headers, the table with its empty state, and the pager. A page declares its filters and columns and draws
 * its rows; how a list behaves is decided here, once.
 *
 * `ListQuery` (`web/src/list_query.ts`) is the pure part (URL parameters in, API query and URL changes out),
 * tested without a browser; {@link ListController} ties it to a page element.
 */
import {
  html,
  nothing,
  type ReactiveController,
  type ReactiveControllerHost,
  type TemplateResult,
} from "lit";
import { api, type CallArgs } from "../api.ts";
import type { Answer, ListOperation, ListRow, Operations } from "../api_types.ts";
import { setQuery } from "../router.ts";
import { type ListDefaults, ListQuery, type QueryChanges } from "../list_query.ts";
import { fromOptionValue, sortHeader, toOptionValue, valueOf } from "./ui.ts";
import type { PageChange } from "./pager.ts";
import "./saved_views.ts";

/** Calls a list operation and resolves with its page. */
export function loadPage<K extends ListOperation>(
  operation: K,
  args: { path?: Operations[K]["path"]; query?: CallArgs<K>["query"] },
): Promise<Answer<K>> {
  // Generic over the operation, TypeScript cannot relate `args` to `call`'s per-operation arguments.
  const call = api.call as (operation: K, args: object) => Promise<Answer<K>>;
  return call.call(api, operation, args);
}

/** Something a template can hold in a slot of the filter bar. */
type Part = TemplateResult | typeof nothing;

/** One filter of a list, declared. */
export interface FilterSpec {
  /** The URL and API query key. */
  name: string;
  label: string;
  /**
   * `search` and `text`: a text field; `select`: a drop-down; `radio`: buttons; `date`: a day; `hidden`: set
   * only by links (no control), yet counted as active and cleared by "Clear filters".
   */
  kind: "search" | "text" | "select" | "radio" | "date" | "hidden";
  placeholder?: string;
  /** `[value, text]` choices, read at every render so loaded options and counts stay current. */
  options?: () => ReadonlyArray<readonly [string, string]>;
  /** `radio`: the text of the "any" choice. */
  anyLabel?: () => string;
}

/** Options of a {@link ListController}. */
export interface ListOptions<K extends ListOperation> extends ListDefaults {
  /** The operation that answers the list's pages, e.g. "GET /api/v1/nodes". */
  operation: K;
  filters: readonly FilterSpec[];
  /** Plural noun for the pager and the empty state ("nodes"). */
  noun: string;
  /** Keep the query in the page's URL (false for lists inside a tab that shares the URL). */
  syncUrl?: boolean;
  /**
   * Saved views of this list (`<svc-saved-views>`, stored per user on the server) under this key, e.g.
   * `nodes`: the filter bar offers to save the current filters and sort under a name and to apply them.
   */
  views?: string;
}

/** Rows picked for a bulk action: id → name, and whether they are every row the filters match. */
export interface Selection {
  ids: Map<string, string>;
  /** Chosen through "Select all matching" (cleared by any change of the filters). */
  allMatching: boolean;
}

/** The page element a list lives in (a `PageElement`: it reloads and keeps the load error). */
export type ListHost = ReactiveControllerHost & HTMLElement & { reload(): Promise<void>; loadError: unknown };

/**
 * What the controller reads of a page besides its rows, as the audit log (paged by cursor, its total an
 * estimate) answers it; other lists leave the cursor fields out.
 */
type PageFields = Partial<
  Pick<Answer<"GET /api/v1/audit-logs">, "page" | "per_page" | "next_cursor" | "total_estimated">
>;

/** What {@link ListController.renderTable} draws. */
export interface TableSpec<T> {
  /** Read by screen readers (the caption is visually hidden). */
  caption: string;
  /**
   * The header cells; given a function, it gets the maker of sortable column headers
   * ({@link ListController.sortHeader}).
   */
  head: TemplateResult | ((sort: (label: string, key: string) => TemplateResult) => TemplateResult);
  /** One item's row(s). */
  row: (item: T) => TemplateResult;
  /** Said when the unfiltered list is empty: what fills it. */
  empty: string;
  tableClass?: string;
}

let nextId = 0;

/** Ties a {@link ListQuery} to a page: loads, draws the filter bar, headers, table and pager. */
export class ListController<K extends ListOperation> implements ReactiveController {
  readonly #host: ListHost;
  readonly #options: ListOptions<K>;
  readonly #barId = `list-filters-${++nextId}`;
  #query: ListQuery;
  #filtersOpen = false;
  /** The last page loaded; undefined until the first load ends. */
  page: Answer<K> | undefined;
  /** Rows picked for bulk actions (lists that draw {@link selectCell}). */
  selection: Selection = { ids: new Map(), allMatching: false };

  constructor(host: ListHost, options: ListOptions<K>) {
    this.#host = host;
    this.#options = options;
    this.#query = this.#read();
    host.addController(this);
  }

  hostConnected(): void {
    // The URL may have changed between construction and connection (the router sets it first).
    this.#query = this.#read();
  }

  #read(): ListQuery {
    const params = this.#options.syncUrl === false
      ? new URLSearchParams()
      : new URLSearchParams(location.search);
    return new ListQuery(params, this.#options.filters.map((f) => f.name), this.#options);
  }

  get query(): ListQuery {
    return this.#query;
  }

  /** Loads the page of the list with the query, plus `extra` API parameters. */
  async load(extra?: CallArgs<K>["query"]): Promise<Answer<K>> {
    // The URL's filters are this list's own query keys, kept as text; the server validates their values.
    const query = { ...this.#query.apiQuery(), ...extra } as CallArgs<K>["query"];
    const page = await loadPage(this.#options.operation, { query });
    this.page = page;
    return page;
  }

  /** The rows of the last page loaded (none before the first load). */
  get rows(): ListRow<K>[] {
    return this.page?.items ?? [];
  }

  #change(changes: QueryChanges): void {
    if (this.#options.syncUrl !== false) setQuery(changes);
    // A selection made under other filters would act on rows no longer shown.
    if (Object.keys(changes).some((k) => this.#options.filters.some((f) => f.name === k))) {
      this.clearSelection();
    }
    void this.#host.reload();
  }

  /** The filters and sort as a URL query (what a saved view stores). */
  viewQuery(): string {
    const sort = this.#query.sort;
    const params = new URLSearchParams(this.#query.filters());
    const fallback = this.#options.sort;
    if (sort && (sort.key !== fallback?.key || sort.dir !== fallback?.dir)) {
      params.set("sort", sort.key);
      params.set("order", sort.dir);
    }
    return params.toString();
  }

  /** Replaces the filters and sort with those of a saved view's query and reloads from the first page. */
  applyView(query: string): void {
    const wanted = new URLSearchParams(query);
    const changes: QueryChanges = {};
    for (const f of this.#options.filters) changes[f.name] = wanted.get(f.name) || undefined;
    changes.sort = wanted.get("sort") || undefined;
    changes.order = wanted.get("order") || undefined;
    const params = new URLSearchParams(this.#options.syncUrl === false ? "" : location.search);
    for (
      const [k, v] of Object.entries({ ...changes, page: undefined, cursor: undefined, prev: undefined })
    ) {
      if (v === undefined) params.delete(k);
      else params.set(k, v);
    }
    this.#query = new ListQuery(params, this.#options.filters.map((f) => f.name), this.#options);
    this.#change({ ...changes, page: undefined, cursor: undefined, prev: undefined });
  }

  // Selection for bulk actions ------------------------------------------------------------------------------

  /** Forgets the picked rows. */
  clearSelection(): void {
    this.selection = { ids: new Map(), allMatching: false };
    this.#host.requestUpdate();
  }

  /** Picks exactly these rows (e.g. every row the filters match, from the server). */
  selectRows(
    rows: ReadonlyArray<{ id: string; name: string }>,
    options: { allMatching?: boolean } = {},
  ): void {
    this.selection = {
      ids: new Map(rows.map((r) => [r.id, r.name])),
      allMatching: options.allMatching ?? false,
    };
    this.#host.requestUpdate();
  }

  #toggle(id: string, name: string, on: boolean): void {
    const ids = new Map(this.selection.ids);
    if (on) ids.set(id, name);
    else ids.delete(id);
    this.selection = { ids, allMatching: false };
    this.#host.requestUpdate();
  }

  /** The header cell that picks or drops every row of the page. */
  selectHeader(rows: (items: ListRow<K>[]) => Array<{ id: string; name: string }>): TemplateResult {
    const shown = rows(this.rows);
    // Checked when every row shown is picked. (No "mixed" state: Shoelace's marks a native checkbox with
    // aria-checked, which axe refuses.)
    const all = shown.length > 0 && shown.every((r) => this.selection.ids.has(r.id));
    return html`
      <th scope="col" class="select-cell">
        <sl-checkbox class="select-page" .checked=${all}
          @sl-change=${(e: Event) => {
            const on = (e.target as HTMLInputElement).checked;
            const ids = new Map(this.selection.ids);
            for (const r of shown) on ? ids.set(r.id, r.name) : ids.delete(r.id);
            this.selection = { ids, allMatching: false };
            this.#host.requestUpdate();
          }}><span class="visually-hidden">Select every ${this.#options.noun.replace(
            /s$/,
            "",
          )} on this page</span></sl-checkbox>
      </th>
    `;
  }

  /** The cell that picks one row. */
  selectCell(row: { id: string; name: string }): TemplateResult {
    return html`
      <td class="select-cell">
        <sl-checkbox class="select-row" .checked=${this.selection.ids.has(row.id)}
          @sl-change=${(e: Event) => this.#toggle(row.id, row.name, (e.target as HTMLInputElement).checked)}
        ><span class="visually-hidden">Select ${row.name}</span></sl-checkbox>
      </td>
    `;
  }

  /**
   * The bar above a list with picked rows: how many, "select all matching" (`matching` loads them from the
   * server), clear, and the page's `actions`. Nothing while no row is picked.
   */
  renderSelectionBar(options: {
    actions: TemplateResult;
    matching?: () => Promise<{ items: Array<{ id: string; name: string }>; total: number }>;
  }): TemplateResult | typeof nothing {
    const n = this.selection.ids.size;
    if (n === 0) return nothing;
    const total = this.page?.total ?? 0;
    const noun = this.#options.noun;
    return html`
      <div class="selection-bar" role="region" aria-label="Selected ${noun}">
        <span class="selection-count" role="status">${n} ${n === 1
          ? noun.replace(/s$/, "")
          : noun} selected${this.selection.allMatching
          ? html`
            <span class="muted">(all that match the filters)</span>
          `
          : nothing}</span>
        ${options.matching && !this.selection.allMatching && total > n
          ? html`
            <sl-button size="small" class="select-all-matching"
              @click=${async () => {
                const found = await options.matching!();
                this.selectRows(found.items, { allMatching: true });
              }}>Select all ${total} matching</sl-button>
          `
          : nothing}
        <sl-button size="small" class="clear-selection" @click=${() =>
          this.clearSelection()}>Clear selection</sl-button>
        <span class="selection-actions">${options.actions}</span>
      </div>
    `;
  }

  /** Sets a filter and reloads from the first page. */
  setFilter(name: string, value: string): void {
    this.#change(this.#query.setFilters({ [name]: value }));
  }

  /** Sets several filters at once and reloads from the first page. */
  setFilters(values: Record<string, string>): void {
    this.#change(this.#query.setFilters(values));
  }

  #onPage = (e: CustomEvent<PageChange>) =>
    this.#change(this.#query.setPage(e.detail.page, e.detail.perPage, this.#fields?.next_cursor));

  get #fields(): PageFields | undefined {
    return this.page as PageFields | undefined;
  }

  /** A header cell that sorts the list by `key`. */
  sortHeader(label: string, key: string): TemplateResult {
    const sort = this.#query.sort ?? { key: "", dir: "asc" };
    return sortHeader(label, key, sort, (next) => this.#change(this.#query.setSort(next)));
  }

  /**
   * The filter bar. On a narrow screen it folds behind one "Filters" button that counts the active filters.
   * `lead` goes before the declared filters (a control that sets several of them), `extra` at the end (e.g.
   * a page's own button).
   */
  renderFilters(parts: { lead?: Part; extra?: Part } = {}): TemplateResult {
    const { lead = nothing, extra = nothing } = parts;
    const active = this.#query.activeCount();
    const open = this.#filtersOpen;
    return html`
      <div class=${`list-filters${open ? " open" : ""}`}>
        <button type="button" class="filters-toggle" aria-controls=${this.#barId} aria-expanded=${String(
          open,
        )}
          @click=${() => {
            this.#filtersOpen = !open;
            this.#host.requestUpdate();
          }}>
          <sl-icon name="funnel" aria-hidden="true"></sl-icon> Filters${active
            ? html`
              <span class="filter-count">${active}<span class="visually-hidden"> active</span></span>
            `
            : nothing}
        </button>
        <div class="toolbar" role="search" id=${this.#barId}>
          ${lead} ${this.#options.filters.map((f) => this.#control(f))} ${this.#options.views
            ? html`
              <svc-saved-views list=${this.#options.views} .query=${this.viewQuery()}
                @view-apply=${(e: CustomEvent<string>) => this.applyView(e.detail)}></svc-saved-views>
            `
            : nothing} ${active
            ? html`<sl-button class="clear-filters" @click=${() =>
              this.#change(this.#query.clearFilters())}>Clear filters</sl-button>`
            : nothing} ${extra}
        </div>
      </div>
    `;
  }

  #control(f: FilterSpec): TemplateResult | typeof nothing {
    const value = this.#query.get(f.name);
    const set = (v: string) => this.setFilter(f.name, v);
    switch (f.kind) {
      case "hidden":
        return nothing;
      case "select":
        return html`
          <sl-select label=${f.label} placeholder=${f.placeholder ?? ""} clearable hoist
            value=${toOptionValue(value)} data-filter=${f.name}
            @sl-change=${(e: Event) => set(fromOptionValue(valueOf(e)))}>
            ${(f.options?.() ?? []).map(([v, text]) =>
              html`<sl-option value=${toOptionValue(v)}>${text}</sl-option>`
            )}
          </sl-select>
        `;
      case "radio":
        return html`
          <sl-radio-group label=${f.label} value=${value || "all"} class="status-filter" data-filter=${f.name}
            @sl-change=${(e: Event) => {
              const v = valueOf(e);
              set(v === "all" ? "" : v);
            }}>
            <sl-radio-button value="all">${f.anyLabel?.() ?? "All"}</sl-radio-button>
            ${(f.options?.() ?? []).map(([v, text]) =>
              html`<sl-radio-button value=${v}>${text}</sl-radio-button>`
            )}
          </sl-radio-group>
        `;
      default:
        return html`
          <sl-input label=${f.label} placeholder=${f.placeholder ?? ""} value=${value} data-filter=${f.name}
            type=${f.kind === "date"
              ? "date"
              : f.kind === "search"
              ? "search"
              : "text"} ?clearable=${f.kind !==
              "date"}
            @sl-change=${(e: Event) => set(valueOf(e))}></sl-input>
        `;
    }
  }

  /**
   * The list: a spinner until the first load (nothing once it failed: the page shows the error), the empty
   * state (saying when filters hide rows, with a way to clear them), or the table in its own scrolling box
   * and the pager.
   */
  renderTable(spec: TableSpec<ListRow<K>>): TemplateResult | typeof nothing {
    const page = this.#fields;
    const items = this.rows;
    // By cursor the answer does not know its page number; the URL does (pages before + 1).
    const byCursor = this.#options.paging === "cursor";
    if (!page) return this.#host.loadError ? nothing : html`<sl-spinner aria-label="Loading"></sl-spinner>`;
    if (items.length === 0 && byCursor && this.#query.page > 1) {
      // A cursor past the last row (a link kept while the rows after it were deleted, or a full last page
      // whose total is only an estimate): the list is not empty, so offer the way back, not "none yet".
      return html`
        <div class="empty-state">
          <p>No more ${this.#options.noun}.</p>
          <sl-button size="small" @click=${() =>
            this.#change(this.#query.setPage(this.#query.page - 1, this.#query.perPage))}>Previous</sl-button>
        </div>
      `;
    }
    if (items.length === 0) {
      const filtered = this.#query.activeCount() > 0;
      return html`
        <div class="empty-state">
          <p>${filtered ? `No ${this.#options.noun} match these filters.` : spec.empty}</p>
          ${filtered
            ? html`<sl-button size="small" @click=${() =>
              this.#change(this.#query.clearFilters())}>Clear filters</sl-button>`
            : nothing}
        </div>
      `;
    }
    return html`
      <div class="table-wrap">
        <table class=${`data${spec.tableClass ? ` ${spec.tableClass}` : ""}`}>
          <caption class="visually-hidden">${spec.caption}</caption>
          <thead>
            <tr>${typeof spec.head === "function"
              ? spec.head((label, key) => this.sortHeader(label, key))
              : spec.head}</tr>
          </thead>
          <tbody>${items.map(spec.row)}</tbody>
        </table>
      </div>
      <svc-pager label=${this.#options.noun} .page=${byCursor ? this.#query.page : page.page} .perPage=${page
        .per_page}
        .total=${this.page?.total ?? 0} .byCursor=${byCursor} .nextCursor=${page.next_cursor ??
          null}
        .estimated=${page.total_estimated === true} .count=${items.length}
        @page-change=${this.#onPage}></svc-pager>
    `;
  }
}
