/**
 * The node list's search through the trigram index (migration 0023, where PostgreSQL has pg_trgm) finds
 * exactly the nodes a plain substring match finds, special characters (`%`, `_`, `\`) included and matched
 * literally; on PGlite, which has no pg_trgm, the same search scans and finds the same rows.
 */
import assert from "node:assert/strict";
import type { Queryable } from "../../server/db/db.ts";
import { Params } from "../../server/db/pagination.ts";
import { listNodes, nodeFilterWhere } from "../../server/domain/nodes.ts";
import { dbTest } from "../helpers/db.ts";

/** Name (the certificate CN: letters, digits, `.`, `_`, `-`), FQDN, address, machine id. */
const NODES: Array<[string, string, string, string]> = [
  ["ws-0001", "ws-0001.corp.example", "10.0.0.1", "a1b2c3d4e5f60718293a4b5c6d7e8f90"],
  ["ws-0002", "WS-0002.Corp.Example", "10.0.0.2", "00000000000000000000000000000002"],
  ["lab_pc.7", "lab%pc.example", "192.0.2.7", "ffffffffffffffffffffffffffffff07"],
  ["labXpc-8", "lab\\pc.example", "192.0.2.8", "ffffffffffffffffffffffffffffff08"],
  ["Kiosk-100", "", "", ""],
  ["kiosk-1000", "kiosk_1000.example", "2001:db8::1000", "deadbeefdeadbeefdeadbeefdeadbeef"],
  ["build.farm-3", "100%.example", "10.1.0.3", "c0ffee00c0ffee00c0ffee00c0ffee00"],
];

const SEARCHES = [
  "ws-000",
  "CORP.example",
  "%",
  "_",
  "\\",
  "lab%pc",
  "lab_pc",
  "lab\\pc",
  "b_p",
  "100%",
  "0%.",
  "kiosk",
  "10.0.0",
  "dead",
  "ef",
  "2001:db8",
  "no-such-node",
];

function expected(search: string): string[] {
  const needle = search.toLowerCase();
  return NODES.filter((fields) => fields.join("\x1f").toLowerCase().includes(needle)).map(([name]) => name)
    .sort();
}

async function found(q: Queryable, search: string): Promise<string[]> {
  const page = await listNodes(q, { search }, { page: { page: 1, perPage: 200 } });
  assert.equal(page.total, page.items.length, `total of "${search}"`);
  return page.items.map((n) => n.name).sort();
}

dbTest(
  "node search: the trigram path finds exactly the substring matches, %, _ and \\ literal",
  async (db, _t, info) => {
    for (const [name, fqdn, ip, machineId] of NODES) {
      await db.query("INSERT INTO nodes (name, fqdn, ip_address, machine_id) VALUES ($1, $2, $3, $4)", [
        name,
        fqdn,
        ip,
        machineId,
      ]);
    }
    // Filler the index has to skip, so a match is the index's answer and not the whole table's.
    await db.query(
      `INSERT INTO nodes (name, fqdn, ip_address, machine_id)
     SELECT format('filler-%s', i), format('filler-%s.example.net', i), format('172.16.%s.%s', i / 256, i % 256), ''
       FROM generate_series(1, 2000) i`,
    );
    const fillerMatch = (search: string) =>
      Array.from({ length: 2000 }, (_, k) => k + 1).filter((i) =>
        [`filler-${i}`, `filler-${i}.example.net`, `172.16.${Math.floor(i / 256)}.${i % 256}`, ""].join(
          "\x1f",
        )
          .includes(search.toLowerCase())
      ).length;
    if (info.driver === "postgres") {
      const [{ n }] = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_indexes WHERE indexname = 'nodes_search_trgm_idx'",
      );
      assert.equal(n, 1, "migration 0023 created the trigram index (Debian's PostgreSQL ships pg_trgm)");
    }
    await db.query("ANALYZE nodes");
    await db.transaction(async (tx) => {
      if (info.driver === "postgres") {
        // The index wherever it can serve: the rows below are its answers (and the plan shows it is used).
        await tx.query("SET LOCAL enable_seqscan = off");
        const params = new Params();
        const where = nodeFilterWhere({ search: "lab%pc" }, params);
        const plan = await tx.query<{ "QUERY PLAN": string }>(
          `EXPLAIN SELECT count(*) FROM nodes n WHERE ${where.join(" AND ")}`,
          params.values,
        );
        const text = plan.map((r) => r["QUERY PLAN"]).join("\n");
        assert.match(text, /nodes_search_trgm_idx/, text);
      }
      for (const search of SEARCHES) {
        const rows = (await found(tx, search)).filter((name) => !name.startsWith("filler-"));
        assert.deepEqual(rows, expected(search), `search "${search}"`);
        const all = await listNodes(tx, { search }, { page: { page: 1, perPage: 1 } });
        assert.equal(all.total, expected(search).length + fillerMatch(search), `count of "${search}"`);
      }
    });
  },
);
