/**
 * The per-node families are written out from their kept text (node_series.ts keeps each node's lines and the
 * joined blocks between scrapes): the scrape's text is exactly what formatting their samples one by one gives,
 * in both formats, across blocks, after a heartbeat in one block (only that block is written again), a
 * renamed-free change of a certificate and a node added.
 */
import assert from "node:assert/strict";
import { collectDatabaseFamilies } from "../../server/metrics/collector.ts";
import { type MetricFamily, render, SAMPLES_PER_CHUNK } from "../../server/metrics/exposition.ts";
import { createLogger } from "../../server/core/log.ts";
import type { Db } from "../../server/db/db.ts";
import { dbTest } from "../helpers/db.ts";

/** The scrape's per-node families, as served and as plain families rendered sample by sample. */
async function both(db: Db): Promise<{ served: MetricFamily[]; plain: MetricFamily[] }> {
  const served = (await collectDatabaseFamilies(db, createLogger("error"))).filter((f) =>
    f.name.startsWith("svc_node_")
  );
  const plain = served.map((f) => ({ name: f.name, help: f.help, type: f.type, samples: f.samples }));
  return { served, plain };
}

async function assertSame(db: Db, expectLastSeen: number): Promise<string> {
  const { served, plain } = await both(db);
  assert.equal(served.length, 2);
  for (const f of served) {
    assert.equal(typeof (f as { renderLines?: unknown }).renderLines, "function", f.name);
  }
  for (const format of ["text", "openmetrics"] as const) {
    assert.equal(render(served, format), render(plain, format), format);
  }
  const text = render(served, "text");
  assert.equal(
    text.split("\n").filter((l) => l.startsWith("svc_node_last_seen_seconds{")).length,
    expectLastSeen,
  );
  return text;
}

dbTest(
  "per-node families: kept text equals sample-by-sample rendering across blocks and changes",
  async (db) => {
    const nodes = SAMPLES_PER_CHUNK * 2 + 37;
    // Every third node without a heartbeat, every fifth without a certificate; labels that need escaping.
    await db.query(
      `INSERT INTO nodes (name, fqdn, cert_not_after, last_seen)
     SELECT format('pc-%s', lpad(i::text, 5, '0')), format('pc-%s."quoted"\\back', i),
            CASE WHEN i % 5 = 0 THEN NULL ELSE now() + i * interval '1 hour' END,
            CASE WHEN i % 3 = 0 THEN NULL ELSE to_timestamp(1000000 + i) END
       FROM generate_series(1, $1::int) i`,
      [nodes],
    );
    const withSeen = (n: number) => n - Math.floor(n / 3);
    const first = await assertSame(db, withSeen(nodes));
    assert.ok(
      first.includes(
        'svc_node_last_seen_seconds{node="pc-00001",fqdn="pc-1.\\"quoted\\"\\\\back"} 1000001\n',
      ),
    );

    // A heartbeat in the second block, and a node of the first given a heartbeat it did not have.
    await db.query(
      "UPDATE nodes SET last_seen = to_timestamp(42), updated_at = now() WHERE name IN ('pc-00700', 'pc-00003')",
    );
    const second = await assertSame(db, withSeen(nodes) + 1);
    assert.ok(
      second.includes('svc_node_last_seen_seconds{node="pc-00700",fqdn="pc-700.\\"quoted\\"\\\\back"} 42\n'),
    );
    assert.ok(
      second.includes('svc_node_last_seen_seconds{node="pc-00003",fqdn="pc-3.\\"quoted\\"\\\\back"} 42\n'),
    );

    // A certificate renewed (the expiry line moves), then a node added between others (a full read).
    await db.query(
      "UPDATE nodes SET cert_not_after = now() + interval '400 days', updated_at = now() WHERE name = 'pc-00010'",
    );
    const third = await assertSame(db, withSeen(nodes) + 1);
    const line = third.split("\n").find((l) =>
      l.startsWith('svc_node_certificate_expiry_seconds{node="pc-00010"')
    );
    assert.ok(line && Math.abs(Number(line.split(" ")[1]) - 400 * 86400) < 120, String(line));
    await db.query("INSERT INTO nodes (name, last_seen) VALUES ('pc-00500a', to_timestamp(7))");
    const fourth = await assertSame(db, withSeen(nodes) + 2);
    assert.ok(fourth.includes('svc_node_last_seen_seconds{node="pc-00500a",fqdn=""} 7\n'));
  },
);
