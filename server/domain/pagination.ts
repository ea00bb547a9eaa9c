/**
 * Page and sort handling shared by every list. Sorting is only ever by an allow-listed column: the caller
 * passes a map from the public sort name to a fixed SQL expression, so no request text reaches SQL.
 */

/** Default and maximum page sizes of every list. */
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

/** Clamps a page request into range (the REST layer already rejects out-of-range values). */
export function pageRequest(page?: number, perPage?: number): PageRequest {
  const p = Number.isInteger(page) && page! >= 1 ? page! : 1;
  const pp = Number.isInteger(perPage) && perPage! >= 1 ? Math.min(perPage!, MAX_PER_PAGE) : DEFAULT_PER_PAGE;
  return { page: p, perPage: pp };
}

/** `LIMIT … OFFSET …` for a page; numbers only, so safe to inline. */
export function limitOffset(req: PageRequest): string {
  return `LIMIT ${req.perPage} OFFSET ${(req.page - 1) * req.perPage}`;
}

/**
 * `ORDER BY` for an allow-listed sort. `columns` maps public names to SQL expressions; an unknown name
 * falls back to `fallback`. `tiebreak` keeps the order stable across pages.
 */
export function orderBy(
  sort: SortRequest,
  options: { columns: Record<string, string>; fallback: string; tiebreak: string; defaultOrder?: SortOrder },
): string {
  const field = sort.field && Object.hasOwn(options.columns, sort.field) ? sort.field : options.fallback;
  const direction = (sort.order ?? options.defaultOrder ?? "asc") === "desc" ? "DESC" : "ASC";
  const nulls = direction === "DESC" ? "NULLS LAST" : "NULLS FIRST";
  return `ORDER BY ${options.columns[field]} ${direction} ${nulls}, ${options.tiebreak}`;
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
