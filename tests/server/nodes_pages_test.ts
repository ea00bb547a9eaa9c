/**
 * The node list's pages (server/domain/nodes.ts listNodes) hold exactly the rows of the same place in the whole
 * list, in its order, for each sort (ties and nulls included) and filter: an unfiltered or status-only list
 * takes its total from the status totals and reads a page past the middle from the far end, the others count
 * their matches, and the indexes of migration 0025 (status then last seen, operating system then agent
 * version) serve the filters without changing a row; a search counts its matches with its page (one recheck
 * of each match), a page past the end apart.
 */
import assert from "node:assert/strict";
import type { Queryable } from "../../server/db/db.ts";
import type { SortRequest } from "../../server/db/pagination.ts";
import { listNodes, type NodeFilter } from "../../server/domain/nodes.ts";
import { dbTest } from "../helpers/db.ts";

const NODES = 300;
const PER_PAGE = 7;

/** Records each query run through it, and its LIMIT/OFFSET. */
function recording(q: Queryable): { q: Queryable; limits: string[]; queries: string[] } {
  const limits: string[] = [];
  const queries: string[] = [];
  return {
    limits,
    queries,
    q: {
      query(text, params) {
        queries.push(text);
        const m = /LIMIT \d+ OFFSET \d+/.exec(text);
        if (m) limits.push(m[0]);
        return q.query(text, params);
      },
    },
  };
}

dbTest("node list: every page by number equals the reference order, read from the nearer end", async (db) => {
  // Few distinct sort values, so ties are broken by name and id; a quarter of the nodes never seen (null).
  await db.query(
    `INSERT INTO nodes (name, status, os_name, agent_version, last_seen)
     SELECT format('node-%s', lpad(i::text, 3, '0')),
            (ARRAY['online', 'online', 'degraded', 'offline', 'unknown'])[1 + i % 5],
            (ARRAY['Ubuntu', 'Fedora Linux', 'Debian GNU/Linux'])[1 + i % 3],
            (ARRAY['1.0.0', '1.1.0', '1.2.0', '2.0.0'])[1 + (i * 7) % 4],
            CASE WHEN i % 4 = 0 THEN NULL ELSE timestamptz '2026-01-01' + (i % 9) * interval '1 hour' END
       FROM generate_series(1, ${NODES}) i`,
  );
  // A status change after insert, so the status totals hold more than one delta row per status.
  await db.query("UPDATE nodes SET status = 'offline' WHERE name IN ('node-010', 'node-020', 'node-031')");
  const [{ id: group }] = await db.query<{ id: string }>(
    "INSERT INTO node_groups (name) VALUES ('pages') RETURNING id",
  );
  await db.query(
    `INSERT INTO node_group_members (node_id, node_group_id)
     SELECT id, $1 FROM nodes WHERE substr(name, 6)::int % 2 = 0`,
    [group],
  );

  const cases: Array<{ filter: NodeFilter; where: string; fromEnd: boolean }> = [
    { filter: {}, where: "true", fromEnd: true },
    { filter: { status: "online" }, where: "status = 'online'", fromEnd: true },
    { filter: { status: "offline" }, where: "status = 'offline'", fromEnd: true },
    { filter: { os: "Ubuntu" }, where: "os_name = 'Ubuntu'", fromEnd: false },
    {
      filter: { group, os: "Ubuntu" },
      where:
        `os_name = 'Ubuntu' AND id IN (SELECT node_id FROM node_group_members WHERE node_group_id = '${group}')`,
      fromEnd: false,
    },
    {
      filter: { status: "online", os: "Fedora Linux" },
      where: "status = 'online' AND os_name = 'Fedora Linux'",
      fromEnd: false,
    },
  ];
  // A search is counted with its page (one pass over the matches); with other filters beside it.
  cases.push(
    { filter: { search: "node-1" }, where: "name LIKE '%node-1%'", fromEnd: false },
    {
      filter: { search: "DE-2", status: "online", group },
      where:
        `name ILIKE '%de-2%' AND status = 'online' AND id IN (SELECT node_id FROM node_group_members WHERE node_group_id = '${group}')`,
      fromEnd: false,
    },
  );
  const sorts: Array<{ sort: SortRequest; order: string }> = [
    { sort: {}, order: "name ASC, id" },
    { sort: { field: "last_seen", order: "desc" }, order: "last_seen DESC NULLS LAST, name, id" },
    { sort: { field: "last_seen", order: "asc" }, order: "last_seen ASC NULLS FIRST, name, id" },
    { sort: { field: "agent_version" }, order: "agent_version ASC, name, id" },
    { sort: { field: "agent_version", order: "desc" }, order: "agent_version DESC, name, id" },
  ];
  for (const { filter, where, fromEnd } of cases) {
    for (const { sort, order } of sorts) {
      const label = `${JSON.stringify(filter)} by ${JSON.stringify(sort)}`;
      const reference =
        (await db.query<{ name: string }>(`SELECT name FROM nodes WHERE ${where} ORDER BY ${order}`))
          .map((r) => r.name);
      assert.ok(reference.length > 2 * PER_PAGE, label);
      const pages = Math.ceil(reference.length / PER_PAGE);
      const seen: string[] = [];
      for (let page = 1; page <= pages + 1; page++) {
        const rec = recording(db);
        const result = await listNodes(rec.q, filter, { page: { page, perPage: PER_PAGE }, sort });
        assert.equal(result.total, reference.length, `${label}: total`);
        const names = result.items.map((n) => n.name);
        assert.deepEqual(
          names,
          reference.slice((page - 1) * PER_PAGE, page * PER_PAGE),
          `${label}: page ${page}`,
        );
        seen.push(...names);
        if (filter.search && page <= pages) {
          assert.equal(rec.queries.length, 1, `${label}: page ${page} and its count in one query`);
        }
        if (page === pages) {
          // The last page counted from the far end skips nothing; counted from the start it skips the rest.
          const offset = Number(/OFFSET (\d+)/.exec(rec.limits[0] ?? "")?.[1]);
          if (fromEnd) assert.equal(offset, 0, `${label}: last page read from the end (${rec.limits})`);
          else assert.equal(offset, (pages - 1) * PER_PAGE, `${label}: last page (${rec.limits})`);
        }
      }
      assert.deepEqual(seen, reference, label);
    }
  }
});
