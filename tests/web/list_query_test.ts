/**
 * The list pages' query rules (web/src/list_query.ts), without a browser: what a URL asks of a list, what the
 * API is asked, and which URL changes a filter, a sort or a page move makes — applied to a real query string
 * and read back, as a reload of the page would.
 */
import assert from "node:assert/strict";
import { ListQuery, PAGE_SIZES, type QueryChanges } from "../../web/src/list_query.ts";

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

function query(search: string, defaults = DEFAULTS): ListQuery {
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
