/**
 * The list pages' query rules (web/src/list_query.ts), without a browser: what a URL asks of a list, what the
 * API is asked, and which URL changes a filter, a sort or a page move makes — applied to a real query string
 * and read back, as a reload of the page would.
 */
import assert from "node:assert/strict";
import {
  cursorRange,
  type ListDefaults,
  ListQuery,
  PAGE_SIZES,
  type QueryChanges,
} from "../../web/src/list_query.ts";

const FILTERS = ["search", "status", "os"];
const DEFAULTS = { sort: { key: "name", dir: "asc" as const }, perPage: 25 };

/** The URL after the changes, as `setQuery` in web/src/router.ts writes it. */
function applied(search: string, changes: QueryChanges): string {
  const params = new URLSearchParams(search);
  for (const [k, v] of Object.entries(changes)) {
    if (v === undefined || v === "") params.delete(k);
    else params.set(k, v);
  }
  return params.toString();
}

function query(search: string, defaults: ListDefaults = DEFAULTS): ListQuery {
  return new ListQuery(new URLSearchParams(search), FILTERS, defaults);
}

Deno.test("a list query reads filters, sort and page from the URL, with defaults", () => {
  const q = query("status=offline&os=Debian+GNU%2FLinux&sort=last_seen&order=desc&page=3&per_page=50&node=x");
  assert.equal(q.get("os"), "Debian GNU/Linux");
  assert.deepEqual(q.filters(), { status: "offline", os: "Debian GNU/Linux" });
  assert.equal(q.activeCount(), 2, "only declared filters count (node opens a drawer)");
  assert.deepEqual(q.sort, { key: "last_seen", dir: "desc" });
  assert.equal(q.page, 3);
  assert.equal(q.perPage, 50);
  assert.deepEqual(q.apiQuery(), {
    status: "offline",
    os: "Debian GNU/Linux",
    page: 3,
    per_page: 50,
    sort: "last_seen",
    order: "desc",
  });

  const plain = query("");
  assert.deepEqual(plain.apiQuery(), { page: 1, per_page: 25, sort: "name", order: "asc" });
  assert.equal(plain.activeCount(), 0);
});

Deno.test("a list query ignores URL values the list cannot use", () => {
  for (const page of ["0", "-2", "1.5", "x", ""]) assert.equal(query(`page=${page}`).page, 1, page);
  for (const size of ["7", "1000", "x"]) assert.equal(query(`per_page=${size}`).perPage, 25, size);
  for (const size of PAGE_SIZES) assert.equal(query(`per_page=${size}`).perPage, size);
  assert.deepEqual(query("sort=os&order=sideways").sort, { key: "os", dir: "asc" }, "default direction");
  const unsorted = new ListQuery(new URLSearchParams("sort=os&order=desc"), FILTERS, { perPage: 50 });
  assert.equal(unsorted.sort, undefined, "a list without a default sort sends none");
  assert.deepEqual(unsorted.apiQuery(), { page: 1, per_page: 50 });
});

Deno.test("changing a filter or the sort goes back to page 1 and keeps everything else", () => {
  let url = "status=online&page=4&per_page=50&tab=x";
  let q = query(url);
  url = applied(url, q.setFilters({ os: "Debian GNU/Linux" }));
  assert.deepEqual(q.apiQuery(), {
    status: "online",
    os: "Debian GNU/Linux",
    page: 1,
    per_page: 50,
    sort: "name",
    order: "asc",
  });
  q = query(url);
  assert.equal(q.get("os"), "Debian GNU/Linux", "a value with spaces survives the URL");
  assert.equal(new URLSearchParams(url).get("tab"), "x", "other keys of the URL stay");
  assert.equal(q.page, 1);

  url = applied(url, q.setPage(2, 50));
  url = applied(url, query(url).setSort({ key: "os", dir: "desc" }));
  q = query(url);
  assert.deepEqual(q.sort, { key: "os", dir: "desc" });
  assert.equal(q.page, 1, "a new sort starts at the first page");

  url = applied(url, q.setFilters({ status: "" }));
  assert.equal(new URLSearchParams(url).has("status"), false, "an empty filter leaves the URL");
  url = applied(url, query(url).clearFilters());
  assert.deepEqual(query(url).filters(), {});
  assert.deepEqual(Object.fromEntries(new URLSearchParams(url)), {
    per_page: "50",
    tab: "x",
    sort: "os",
    order: "desc",
  });
});

Deno.test("moving pages writes only what differs from the defaults", () => {
  const q = query("");
  assert.deepEqual(q.setPage(3, 25), { page: "3", per_page: undefined });
  assert.equal(q.page, 3);
  assert.deepEqual(q.setPage(1, 100), { page: undefined, per_page: "100" });
  assert.equal(q.perPage, 100);
  assert.equal(q.page, 1);
});

Deno.test("a list paged by cursor walks forward and back through the URL, and any other change restarts", () => {
  const defaults = { perPage: 50, paging: "cursor" as const };
  let url = "status=online";
  const at = () => query(url, defaults);
  assert.equal(at().page, 1);
  assert.deepEqual(at().apiQuery(), { status: "online", per_page: 50 }, "the first page has no cursor");

  // Next: the current page's next_cursor; the cursors before are kept for Previous (and a reload).
  url = applied(url, at().setPage(2, 50, "900"));
  assert.equal(url, "status=online&cursor=900");
  assert.deepEqual(at().apiQuery(), { status: "online", cursor: "900", per_page: 50 });
  assert.equal(at().page, 2);
  url = applied(url, at().setPage(3, 50, "850"));
  url = applied(url, at().setPage(4, 50, "800"));
  assert.equal(new URLSearchParams(url).get("prev"), "900,850");
  assert.equal(at().page, 4);
  assert.equal(at().apiQuery().cursor, "800");
  assert.equal(at().apiQuery().page, undefined, "never an offset");

  // Previous, back to the first page.
  url = applied(url, at().setPage(3, 50));
  assert.deepEqual([at().page, at().cursor], [3, "850"]);
  url = applied(url, at().setPage(2, 50));
  assert.deepEqual([at().page, at().cursor, new URLSearchParams(url).get("prev")], [2, "900", null]);
  url = applied(url, at().setPage(1, 50));
  assert.equal(url, "status=online");

  // Without a next cursor (the last page), "next" stays put on the first page rather than guessing.
  url = applied(url, at().setPage(2, 50, null));
  assert.equal(at().page, 1);

  // A filter, a sort or another page size starts again from the first page.
  for (
    const change of [
      (q: ListQuery) => q.setFilters({ status: "offline" }),
      (q: ListQuery) => q.clearFilters(),
      (q: ListQuery) => q.setSort({ key: "created_at", dir: "asc" }),
      (q: ListQuery) => q.setPage(2, 100),
    ]
  ) {
    url = applied(applied("status=online", at().setPage(2, 50, "900")), {});
    url = applied(url, at().setPage(3, 50, "850"));
    url = applied(url, change(at()));
    assert.equal(at().cursor, undefined);
    assert.equal(new URLSearchParams(url).get("prev"), null);
    assert.equal(at().page, 1);
  }
});

Deno.test("a list paged by number ignores cursor parameters", () => {
  const q = query("cursor=900&prev=950&page=2", DEFAULTS);
  assert.equal(q.page, 2);
  assert.equal(q.cursor, undefined);
  assert.equal(q.apiQuery().cursor, undefined);
});

Deno.test("a page read by cursor shows its rows' place, never past the total, and no Next into nothing", () => {
  const at = (
    page: number,
    count: number,
    total: number,
    more: { estimated?: boolean; next?: string } = {},
  ) =>
    cursorRange({
      page,
      perPage: 10,
      count,
      total,
      estimated: more.estimated ?? false,
      nextCursor: more.next ?? null,
    });
  assert.deepEqual(at(1, 10, 35, { next: "26" }), { first: 1, last: 10, total: 35, hasNext: true });
  assert.deepEqual(at(4, 5, 35), { first: 31, last: 35, total: 35, hasNext: false }, "the last, short page");
  // The API gives a next cursor whenever a page is full, also when no row is left after it: an exact total
  // tells that end apart, so Next does not lead to an empty page.
  assert.deepEqual(at(2, 10, 20, { next: "1" }), { first: 11, last: 20, total: 20, hasNext: false });
  // Rows written since the first page raise the total; the pages already read do not move (keyset).
  assert.equal(at(2, 10, 23, { next: "1" }).hasNext, true);
  // An estimate may fall short of the rows already paged through: the total shown is at least the last row,
  // and only the cursor says whether more follow.
  assert.deepEqual(at(501, 10, 5_000, { estimated: true, next: "7" }), {
    first: 5_001,
    last: 5_010,
    total: 5_010,
    hasNext: true,
  });
  assert.deepEqual(at(3, 0, 20), { first: 0, last: 0, total: 20, hasNext: false }, "a page past the end");
});
