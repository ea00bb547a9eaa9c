/**
 * The audit list's page query (ids chosen first, a list of actions read as merged per-action branches)
 * returns exactly the rows a plain filter over the whole log would, for every page, cursor and filter.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { type AuditFilter, listAuditLogs } from "../../server/audit/audit_logs.ts";

const ACTIONS = ["a.one", "a.two", "a.three", "a.four"];

dbTest("audit pages by offset and cursor match a plain filter of the whole log", async (db) => {
  await db.query(
    `INSERT INTO audit_logs (action, resource_type, outcome, username)
     SELECT (ARRAY['a.one','a.two','a.three','a.four'])[1 + (i * 7) % 4], 'thing',
            CASE WHEN i % 3 = 0 THEN 'failure' ELSE 'success' END,
            CASE WHEN i % 5 = 0 THEN 'alice' ELSE 'bob' END
       FROM generate_series(1, 900) i`,
  );
  const all = await db.query<{ id: string; action: string; outcome: string; username: string }>(
    "SELECT a.id::text AS id, a.action, a.outcome, a.username FROM audit_logs a ORDER BY a.id DESC",
  );
  const filters: AuditFilter[] = [
    {},
    { actions: ["a.two"] },
    { actions: ["a.one", "a.three"], outcome: "success" },
    { actions: ["a.four", "a.one", "a.four"], user: "alice" },
    { actions: [...ACTIONS, ...Array.from({ length: 14 }, (_, i) => `none.${i}`)], outcome: "failure" },
    { actions: ["a.two", "none.x"], outcome: "failure", user: "bob" },
  ];
  for (const filter of filters) {
    const expected = all.filter((r) =>
      (!filter.actions || filter.actions.includes(r.action)) &&
      (!filter.outcome || r.outcome === filter.outcome) &&
      (!filter.user || r.username === filter.user)
    ).map((r) => r.id);
    const label = JSON.stringify(filter);
    const perPage = 37;
    for (let page = 1; page <= Math.ceil(expected.length / perPage) + 1; page++) {
      const got = await listAuditLogs(db, filter, { page, perPage });
      const want = expected.slice((page - 1) * perPage, page * perPage);
      assert.deepEqual(got.items.map((r) => String(r.id)), want, `${label} page ${page}`);
      const last = page * perPage >= expected.length;
      assert.equal(got.next_cursor, last ? null : want[want.length - 1], `${label} page ${page} cursor`);
    }
    const byCursor: string[] = [];
    let cursor: string | undefined;
    for (let guard = 0; guard < 100; guard++) {
      const got = await listAuditLogs(db, filter, { page: 1, perPage, cursor });
      byCursor.push(...got.items.map((r) => String(r.id)));
      if (got.next_cursor === null) break;
      cursor = got.next_cursor;
    }
    assert.deepEqual(byCursor, expected, `${label} by cursor`);
  }
});
