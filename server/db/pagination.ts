/**
 * Pages and sorting, SQL side, shared by every list (policies, nodes, users, roles, audit log, …). A list
 * declares its columns, tables and conditions; {@link selectPage} counts the matches and reads one page.
 * Sorting is only ever by an allow-listed column: the caller passes a map from the public sort name to a
 * fixed SQL expression, so no request text reaches SQL. The HTTP side (query schema, reading `page` and
 * `per_page`) is server/http/pagination.ts.
 */
import type { Queryable } from "./db.ts";

/** Page size when the request names none. */
export const DEFAULT_PER_PAGE = 50;
/** Largest accepted `per_page`. */
export const MAX_PER_PAGE = 200;

/** A page request after validation. */
export interface PageRequest {
  /** 1-based page number. */
  page: number;
  perPage: number;
}

/** One page of a list, as returned by the REST API. */
export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  per_page: number;
}

/** Sort direction. */
export type SortOrder = "asc" | "desc";

/** A requested sort: a public column name and a direction. */
export interface SortRequest {
  field?: string;
  order?: SortOrder;
}

/** What a sortable list is asked for: one page, optionally sorted. */
export interface ListOptions {
  page: PageRequest;
  sort?: SortRequest;
}

/** One list query, counted and cut to a page by {@link selectPage}. */
export interface PageQuery {
  /** The select list. */
  columns: string;
  /** Tables and joins. */
  from: string;
  /** Conditions, joined with AND (none: every row). */
  where?: readonly string[];
  /** Values of the `$n` placeholders in `from` and `where` (the count does not read `columns`). */
  params?: readonly unknown[];
  /** `ORDER BY …` (e.g. from {@link orderBy}); it must be total, or rows repeat or vanish across pages. */
  orderBy: string;
  page: PageRequest;
  /** The number of matches when the caller already knows it (e.g. from counters); no count query then. */
  total?: number;
  /**
   * A key of the rows (e.g. `n.id`, or `pr.node_id, pr.policy_id`): the page is then chosen reading only
   * the key and the sort columns, and `columns` (subqueries included) are computed for that page's rows
   * alone, not for every row an offset skips.
   */
  pageKey?: string;
  /**
   * With `pageKey`: the tables and joins the page is chosen from, when fewer than `from` suffice (no condition
   * or sort reads the others, and the joins left out never remove a row, e.g. a foreign key's target).
   */
  keyFrom?: string;
  /**
   * With `keyFrom`: the conditions the page is chosen with, when `keyFrom` already applies some of `where`
   * (e.g. behind a fence): each is then tested once per row, not again on `keyFrom`'s output.
   */
  keyWhere?: readonly string[];
  /**
   * With `pageKey` and `total`: `orderBy` exactly reversed (e.g. {@link orderBy} with `reverse`). A page in
   * the second half is then read from the end (an offset counts the rows it skips, and from the end those are
   * fewer), and its rows put back in `orderBy`'s order: the last page of 125,000 reads 50 rows, not 125,000.
   */
  reverseOrderBy?: string;
  /**
   * With `pageKey` and no `total`: the matches are counted by the page's own query (a window count over them
   * before the limit), not by a second query. For a filter each match of which costs a recheck (a trigram
   * search rechecks every candidate row's text) that finds them once instead of twice; a page past the end,
   * which has no row to carry the count, counts them apart.
   */
  countWithPage?: boolean;
}

/** Counts the rows a list query matches and reads the requested page of them. */
export async function selectPage<T>(q: Queryable, query: PageQuery): Promise<Page<T>> {
  const where = query.where?.length ? `WHERE ${query.where.join(" AND ")}` : "";
  const { page, perPage } = query.page;
  const offset = (page - 1) * perPage;
  // Numbers only (validated integers), so safe to inline.
  const keyWhere = query.keyWhere === undefined
    ? where
    : query.keyWhere.length
    ? `WHERE ${query.keyWhere.join(" AND ")}`
    : "";
  let limit = `LIMIT ${perPage} OFFSET ${offset}`;
  let pageOrder = query.orderBy;
  // The count and the page are read at the same time: on PostgreSQL on two connections (a filter no index
  // serves, such as a substring search, makes each a full scan), inside a transaction pipelined on its one.
  // A page past a total known in advance (kept counters) is empty: no need to sort every match to find that.
  const pastTheEnd = query.total !== undefined && offset >= query.total;
  if (
    query.reverseOrderBy !== undefined && query.pageKey !== undefined && query.total !== undefined &&
    !pastTheEnd && offset > query.total / 2
  ) {
    // The same rows counted from the other end: the page's last row is `total - offset` from the end.
    const take = Math.min(perPage, query.total - offset);
    limit = `LIMIT ${take} OFFSET ${query.total - offset - take}`;
    pageOrder = query.reverseOrderBy;
  }
  if (query.countWithPage && query.pageKey !== undefined && query.total === undefined) {
    return await selectPageCounted<T>(q, { ...query, pageKey: query.pageKey }, keyWhere, pageOrder, limit);
  }
  const [counted, rows] = await Promise.allSettled([
    query.total ?? q.query<{ total: number }>(
      `SELECT count(*)::int AS total FROM ${query.from} ${where}`,
      query.params,
    ).then((rows) => rows[0].total),
    pastTheEnd ? Promise.resolve([] as T[]) : q.query<T>(
      query.pageKey
        ? `SELECT ${query.columns} FROM ${query.from}
          WHERE (${query.pageKey}) IN (SELECT ${query.pageKey} FROM ${
          query.keyFrom ?? query.from
        } ${keyWhere} ${pageOrder} ${limit})
          ${query.orderBy}`
        : `SELECT ${query.columns} FROM ${query.from} ${where} ${query.orderBy} ${limit}`,
      query.params,
    ),
  ]);
  // Both have answered before a failure is thrown (a unit of work must not end with a statement in flight).
  if (counted.status === "rejected") throw counted.reason;
  if (rows.status === "rejected") throw rows.reason;
  return { items: rows.value, total: counted.value, page, per_page: perPage };
}

/** {@link selectPage} with {@link PageQuery.countWithPage}: one query gives the page and the count. */
async function selectPageCounted<T>(
  q: Queryable,
  query: PageQuery & { pageKey: string },
  keyWhere: string,
  pageOrder: string,
  limit: string,
): Promise<Page<T>> {
  const { page, perPage } = query.page;
  // The key's columns as the CTE names them (`n.id` → `id`).
  const keyColumns = query.pageKey.split(",").map((column) => column.trim().replace(/^\w+\./, "")).join(", ");
  const rows = await q.query<T & { page_total: number }>(
    `WITH page AS MATERIALIZED (
       SELECT ${query.pageKey}, count(*) OVER ()::int AS page_total FROM ${
      query.keyFrom ?? query.from
    } ${keyWhere}
       ${pageOrder} ${limit})
     SELECT ${query.columns}, (SELECT page_total FROM page LIMIT 1) AS page_total FROM ${query.from}
     WHERE (${query.pageKey}) IN (SELECT ${keyColumns} FROM page)
     ${query.orderBy}`,
    query.params,
  );
  let total = rows[0]?.page_total;
  if (total === undefined) {
    total = page === 1 ? 0 : (await q.query<{ total: number }>(
      `SELECT count(*)::int AS total FROM ${query.keyFrom ?? query.from} ${keyWhere}`,
      query.params,
    ))[0].total;
  }
  const items = rows.map(({ page_total: _, ...item }) => item as unknown as T);
  return { items, total, page, per_page: perPage };
}

/** The requested page of a list that is already in memory (short lists, e.g. a user's role bindings). */
export function slicePage<T>(all: readonly T[], req: PageRequest): Page<T> {
  const offset = (req.page - 1) * req.perPage;
  return {
    items: all.slice(offset, offset + req.perPage),
    total: all.length,
    page: req.page,
    per_page: req.perPage,
  };
}

/**
 * `ORDER BY …` for an allow-listed sort. `columns` maps public names to SQL expressions; an unknown name
 * falls back to `fallback`. `tiebreak` keeps the order stable across pages. Nulls sort first ascending and
 * last descending. `nullable`, when given, names the only columns that can be null: the others are then
 * ordered without a NULLS clause, the order a plain index is read in (`ORDER BY name ASC NULLS FIRST` cannot
 * be read from an index on `name`, and at 100,000 rows sorting them all was most of a page's cost).
 */
export function orderBy(
  sort: SortRequest,
  options: {
    columns: Record<string, string>;
    fallback: string;
    tiebreak: string;
    defaultOrder?: SortOrder;
    nullable?: readonly string[];
    /**
     * The exact reverse of that order (for {@link PageQuery.reverseOrderBy}); `tiebreak` must then be plain
     * columns, each ascending.
     */
    reverse?: boolean;
  },
): string {
  const field = sort.field && Object.hasOwn(options.columns, sort.field) ? sort.field : options.fallback;
  const forward = (sort.order ?? options.defaultOrder ?? "asc") === "desc" ? "DESC" : "ASC";
  const direction = options.reverse ? (forward === "DESC" ? "ASC" : "DESC") : forward;
  const nulls = options.nullable && !options.nullable.includes(field)
    ? ""
    : direction === "DESC"
    ? " NULLS LAST"
    : " NULLS FIRST";
  if (!options.reverse) return `ORDER BY ${options.columns[field]} ${direction}${nulls}, ${options.tiebreak}`;
  const tiebreak = options.tiebreak.split(",").map((column) => {
    if (/\b(ASC|DESC|NULLS)\b/i.test(column)) throw new Error(`orderBy: cannot reverse tiebreak ${column}`);
    return `${column.trim()} DESC`;
  });
  return `ORDER BY ${options.columns[field]} ${direction}${nulls}, ${tiebreak.join(", ")}`;
}

/** Escapes `%`, `_` and `\` so user text is matched literally by `ILIKE … ESCAPE '\'`. */
export function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (ch) => `\\${ch}`)}%`;
}

/** Collects SQL parameters and returns `$n` placeholders for them. */
export class Params {
  readonly values: unknown[] = [];

  /** Adds a value; returns its placeholder. */
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}
