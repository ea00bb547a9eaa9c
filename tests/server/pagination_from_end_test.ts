/**
 * A deep page by number of the compliance lists (the fleet's, and a policy's) is read from the nearer end when
 * the total is known (server/db/pagination.ts, `reverseOrderBy`): every page holds exactly the rows of the
 * same place in the whole list, in its order, for each sort (ties on the sort column and nulls included), with
 * filters, and with the unreported pairs listed; the pages in the second half are read with a small offset.
 */
import assert from "node:assert/strict";
import type { Queryable } from "../../server/db/db.ts";
import {
  type ComplianceFilter,
  type ComplianceRow,
  listCompliance,
  policyCompliance,
} from "../../server/domain/compliance.ts";
import type { Page, SortRequest } from "../../server/db/pagination.ts";
import { dbTest } from "../helpers/db.ts";
import {
  bind,
  createGroup,
  createPolicy,
  domainServer,
  report,
  seedNode,
  setState,
} from "./domain_helpers.ts";

const PER_PAGE = 4;

/** Records the LIMIT/OFFSET of each query run through it. */
function recording(q: Queryable): { q: Queryable; limits: string[] } {
  const limits: string[] = [];
  return {
    limits,
    q: {
      query(text, params) {
        const m = /LIMIT \d+ OFFSET \d+/.exec(text);
        if (m) limits.push(m[0]);
        return q.query(text, params);
      },
    },
  };
}

const key = (r: ComplianceRow) => `${r.node_id}/${r.policy_id}/${r.status}`;

/** Every page of a list equals its place in the whole list; the deep ones are read from the end. */
async function assertPages(
  label: string,
  read: (q: Queryable, page: number, perPage: number) => Promise<Page<ComplianceRow>>,
  q: Queryable,
  perPage = PER_PAGE,
): Promise<void> {
  const all = await read(q, 1, 200);
  assert.equal(all.items.length, all.total, label);
  assert.ok(all.total > perPage, `${label}: enough rows to page (${all.total})`);
  const pages = Math.ceil(all.total / perPage);
  for (let page = 1; page <= pages + 1; page++) {
    const rec = recording(q);
    const got = await read(rec.q, page, perPage);
    const offset = (page - 1) * perPage;
    assert.deepEqual(
      got.items.map(key),
      all.items.slice(offset, offset + perPage).map(key),
      `${label}, page ${page} of ${pages}`,
    );
    assert.equal(got.total, all.total);
    if (offset < all.total && offset > all.total / 2) {
      const take = Math.min(perPage, all.total - offset);
      assert.ok(
        rec.limits.includes(`LIMIT ${take} OFFSET ${all.total - offset - take}`),
        `${label}, page ${page}: read from the end (${rec.limits.join("; ")})`,
      );
    }
  }
}

dbTest("compliance pages by number are the same rows when a deep one is read from the end", async (db) => {
  const { server, admin } = await domainServer(db);
  try {
    const groups = [await createGroup(admin, "fleet"), await createGroup(admin, "lab")];
    const policies: string[] = [];
    for (const [i, name] of ["browser", "screen", "shell"].entries()) {
      const p = await createPolicy(admin, { name });
      await setState(admin, p.id, "released");
      await bind(admin, p.id, groups[i % 2], { enabled: true });
      if (i === 2) await bind(admin, p.id, groups[1], { enabled: true });
      policies.push(p.id);
    }
    const statuses = ["compliant", "non_compliant", "error", "unknown", "inapplicable"];
    for (let i = 0; i < 14; i++) {
      const node = await seedNode(db, {
        name: `pc-${String(i).padStart(2, "0")}`,
        groups: [groups[i % 3 === 0 ? 1 : 0]],
      });
      for (const [k, p] of policies.entries()) {
        // Some pairs never reported: they are listed (as unknown, no time) only with include_unreported.
        if ((i + k) % 5 === 4) continue;
        await report(db, node, p, statuses[(i * 3 + k) % statuses.length]);
      }
    }
    // Four distinct times for all results: many ties on the sort column, broken by the pair.
    await db.query(
      `UPDATE compliance_results SET reported_at = timestamptz '2026-01-01 00:00:00+00'
         + (abs(hashtext(node_id::text || policy_id::text)) % 4) * interval '1 second'`,
    );

    const lists: Array<[string, ComplianceFilter, SortRequest | undefined]> = [
      ["default", {}, undefined],
      ["time asc", {}, { field: "reported_at", order: "asc" }],
      ["status", {}, { field: "status" }],
      ["severity desc", {}, { field: "severity", order: "desc" }],
      ["node desc", {}, { field: "node", order: "desc" }],
      ["compliant", { status: "compliant" }, undefined],
      ["unreported by time", { includeUnreported: true }, { field: "reported_at", order: "desc" }],
      ["unreported by time asc", { includeUnreported: true }, { field: "reported_at", order: "asc" }],
      ["unreported by policy", { includeUnreported: true }, { field: "policy" }],
      ["search", { search: "pc-1" }, { field: "reported_at", order: "asc" }],
    ];
    for (const [label, filter, sort] of lists) {
      await assertPages(
        label,
        (q, page, perPage) => listCompliance(q, filter, { page: { page, perPage }, sort }),
        db,
      );
    }
    for (const status of [undefined, "compliant"] as const) {
      await assertPages(
        `policy ${status ?? "all"}`,
        (q, page, perPage) => policyCompliance(q, policies[2], { page: { page, perPage }, status }),
        db,
        status ? 1 : PER_PAGE,
      );
    }
  } finally {
    await server.close();
  }
});
