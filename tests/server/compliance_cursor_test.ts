/**
 * Keyset paging of the compliance list (`cursor` / `next_cursor`): reported results in report-time order, any
 * depth at the cost of the first page, the same rows as page numbers give, ties on the time broken by the pair;
 * a cursor that was not returned, or one on a list it cannot page, is refused naming the parameter.
 */
import assert from "node:assert/strict";
import { expectStatus } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

domain.domainTest(
  "the compliance list pages by cursor through the same rows as by page number",
  async ({ db, admin }) => {
    const group = await domain.createGroup(admin, "fleet");
    const policies = [];
    for (const name of ["browser", "screen"]) {
      const p = await domain.createPolicy(admin, { name });
      await domain.setState(admin, p.id, "released");
      await domain.bind(admin, p.id, group, { enabled: true });
      policies.push(p.id);
    }
    const nodes = [];
    for (let i = 0; i < 6; i++) nodes.push(await domain.seedNode(db, { name: `pc-${i}`, groups: [group] }));
    for (const [i, n] of nodes.entries()) {
      for (const p of policies) await domain.report(db, n, p, i % 3 === 0 ? "non_compliant" : "compliant");
    }
    // Three distinct times, four results on each (ties broken by the pair), microseconds apart.
    await db.query(
      `UPDATE compliance_results SET reported_at = timestamptz '2026-01-01 00:00:00.000001+00'
       + (abs(hashtext(node_id::text)) % 3) * interval '1 microsecond'`,
    );
    // A result of a policy that no longer reaches its node is not listed.
    const gone = await domain.createPolicy(admin, { name: "gone" });
    await domain.report(db, nodes[0], gone.id, "error");

    for (
      const query of ["", "&status=compliant", "&sort=reported_at&order=asc", "&sort=reported_at&order=desc"]
    ) {
      const all = expectStatus(await admin.request("GET", `/api/v1/compliance?per_page=200${query}`), 200);
      const byCursor: string[] = [];
      let cursor: string | null = null;
      for (let pages = 0; pages < 20; pages++) {
        const res = expectStatus(
          await admin.request(
            "GET",
            `/api/v1/compliance?per_page=5${query}${cursor ? `&cursor=${cursor}` : ""}`,
          ),
          200,
        );
        byCursor.push(
          ...res.items.map((r: { node_id: string; policy_id: string }) => `${r.node_id}/${r.policy_id}`),
        );
        assert.equal(res.total, all.total);
        cursor = res.next_cursor;
        if (!cursor) break;
      }
      assert.deepEqual(
        byCursor,
        all.items.map((r: { node_id: string; policy_id: string }) => `${r.node_id}/${r.policy_id}`),
        `cursor pages of "${query}"`,
      );
    }

    const bad = await admin.request("GET", "/api/v1/compliance?cursor=bm90LWEtY3Vyc29y");
    assert.equal(bad.status, 400, bad.text);
    assert.match(bad.json.error.message, /cursor: not a next_cursor of this list/);
    const first = expectStatus(await admin.request("GET", "/api/v1/compliance?per_page=2"), 200);
    for (const other of ["&include_unreported=true", "&sort=node"]) {
      const res = await admin.request(
        "GET",
        `/api/v1/compliance?per_page=2&cursor=${first.next_cursor}${other}`,
      );
      assert.equal(res.status, 400, res.text);
      assert.match(res.json.error.message, /only reported results in report-time order are read by cursor/);
    }
    const unreported = expectStatus(
      await admin.request("GET", "/api/v1/compliance?per_page=2&include_unreported=true"),
      200,
    );
    assert.equal(unreported.next_cursor, null);
  },
);
