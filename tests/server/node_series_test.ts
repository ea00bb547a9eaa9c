/**
 * The per-node metric families kept between scrapes (server/metrics/node_series.ts) follow every change: a
 * node's new heartbeat or certificate, a node added or deleted (also one of each at once), in name order, with
 * the labels escaped as before.
 */
import assert from "node:assert/strict";
import { collectDatabaseFamilies } from "../../server/metrics/collector.ts";
import { render } from "../../server/metrics/exposition.ts";
import { createLogger } from "../../server/core/log.ts";
import type { Db } from "../../server/db/db.ts";
import { dbTest } from "../helpers/db.ts";

/** The per-node lines of a scrape, as text. */
async function nodeLines(db: Db): Promise<string[]> {
  const families = await collectDatabaseFamilies(db, createLogger("error"));
  return render(families.filter((f) => f.name.startsWith("svc_node_")), "text").split("\n")
    .filter((l) => l.startsWith("svc_node_"));
}

dbTest("per-node series follow changes, additions and deletions between scrapes", async (db, t) => {
  await db.query(
    `INSERT INTO nodes (name, fqdn, cert_not_after, last_seen) VALUES
       ('pc-b', 'b.example.org', now() + interval '10 days', to_timestamp(1000)),
       ('pc-a', 'a"\\quoted', now() + interval '20 days', to_timestamp(2000)),
       ('pc-c', '', NULL, NULL)`,
  );
  const first = await nodeLines(db);
  assert.deepEqual(first.filter((l) => l.startsWith("svc_node_last_seen")), [
    'svc_node_last_seen_seconds{node="pc-a",fqdn="a\\"\\\\quoted"} 2000',
    'svc_node_last_seen_seconds{node="pc-b",fqdn="b.example.org"} 1000',
  ]);
  const expiry = first.filter((l) => l.startsWith("svc_node_certificate_expiry"));
  assert.equal(expiry.length, 2, "a node without a certificate has no expiry series");
  assert.ok(Math.abs(Number(expiry[1].split(" ")[1]) - 10 * 86400) < 120, expiry[1]);

  await t.step("a heartbeat and a renewed certificate", async () => {
    await db.query(
      "UPDATE nodes SET last_seen = to_timestamp(3000), updated_at = now() WHERE name = 'pc-b'",
    );
    await db.query(
      "UPDATE nodes SET cert_not_after = now() + interval '1 day', last_seen = to_timestamp(4000), updated_at = now() WHERE name = 'pc-c'",
    );
    const lines = await nodeLines(db);
    assert.ok(lines.includes('svc_node_last_seen_seconds{node="pc-b",fqdn="b.example.org"} 3000'));
    assert.ok(lines.includes('svc_node_last_seen_seconds{node="pc-c",fqdn=""} 4000'));
    assert.equal(lines.filter((l) => l.startsWith("svc_node_certificate_expiry")).length, 3);
  });

  await t.step("one node deleted and one added at once", async () => {
    await db.query("DELETE FROM nodes WHERE name = 'pc-a'");
    await db.query("INSERT INTO nodes (name, last_seen) VALUES ('pc-0', to_timestamp(5000))");
    const lines = await nodeLines(db);
    assert.deepEqual(
      lines.filter((l) => l.startsWith("svc_node_last_seen")).map((l) => l.split("{")[1].split(",")[0]),
      [
        'node="pc-0"',
        'node="pc-b"',
        'node="pc-c"',
      ],
    );
  });
});
