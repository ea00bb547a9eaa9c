/**
 * REST, dashboard and metrics at fleet size (numbers, not pass/fail).
 *
 *   deno run -A bench/rest.ts [--nodes 10000] [--database-url postgres://postgres@127.0.0.1:5432/postgres]
 *                             [--samples 40] [--keep | --reuse NAME]
 *
 * Creates a PostgreSQL database, applies the migrations and seeds it in SQL (generate_series): N nodes (default
 * 10,000) in 50 groups, 200 released policies, 500 enabled bindings (10 policies per group), 10 × N compliance
 * results (every node × the policies that reach it) and 100 × N audit rows over ~80 days. Then it calls
 * the real REST app in process (every route, middleware and permission check; no TLS) as a super admin and
 * prints p50/p99 of each list route's first page and a deep page with filters and sorting, node detail, the
 * node's and a policy's compliance, the dashboard and compliance summaries, and a metrics scrape (every
 * database gauge query plus rendering). Targets (issue 22): p99 < 50 ms for lists and detail, < 200 ms for the
 * dashboard summary and a scrape. `--keep` leaves the database for `--reuse NAME` (which only migrates).
 * The last column is the longest the event loop was held during 10 more calls, in the loop thread's own
 * processor time (tests/helpers/stall.ts): what every other request and agent stream waited meanwhile.
 */
import postgres from "postgres";
import { type Db, migrate, openPostgres } from "../server/db/mod.ts";
import { buildRoutes } from "../server/http/routes/mod.ts";
import { complianceCursor } from "../server/domain/compliance.ts";
import { createLogger } from "../server/core/log.ts";
import { collectDatabaseFamilies } from "../server/metrics/collector.ts";
import { renderStream } from "../server/metrics/exposition.ts";
import { createTestServer } from "../tests/helpers/app.ts";
import { stallDuring } from "../tests/helpers/stall.ts";

const USAGE =
  "usage: deno run -A bench/rest.ts [--nodes N] [--database-url URL] [--samples N] [--keep | --reuse NAME]";

interface Options {
  nodes: number;
  databaseUrl: string;
  samples: number;
  keep: boolean;
  reuse?: string;
}

function parseArgs(args: string[]): Options {
  const o: Options = {
    nodes: 10_000,
    databaseUrl: Deno.env.get("SVC_TEST_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/postgres",
    samples: 40,
    keep: false,
  };
  for (let i = 0; i < args.length; i++) {
    const [flag, value] = [args[i], args[i + 1]];
    if (flag === "--keep") {
      o.keep = true;
      continue;
    }
    if (flag === "--database-url") o.databaseUrl = value ?? "";
    else if (flag === "--samples") o.samples = Number(value);
    else if (flag === "--reuse") o.reuse = value;
    else if (flag === "--nodes") o.nodes = Number(value);
    else throw new Error(`unknown argument ${flag}\n${USAGE}`);
    i++;
  }
  if (!Number.isInteger(o.nodes) || o.nodes < 100) throw new Error(`--nodes needs a number ≥ 100\n${USAGE}`);
  if (!Number.isInteger(o.samples) || o.samples < 5) {
    throw new Error(`--samples needs a number ≥ 5\n${USAGE}`);
  }
  return o;
}

/**
 * The fleet of `nodes` nodes, in SQL: one statement per table so each is one pass. The bindings are enabled
 * with the reach refresh inside their statement (`svc.reach_inline_nodes` above the fleet), so the read model
 * is complete when the measuring starts.
 */
function seed(nodes: number): string[] {
  const digits = String(nodes).length;
  // The audit log spans ~80 days whatever its size.
  const auditRows = nodes * 100;
  const auditStep = (7 * 1_000_000 / auditRows).toFixed(4);
  return [
    `INSERT INTO node_groups (name) SELECT format('bench-group-%s', lpad(g::text, 2, '0')) FROM generate_series(1, 50) g`,
    `INSERT INTO policies (name, type, content, state, version, created_by)
     SELECT format('bench-policy-%s', lpad(p::text, 3, '0')), (ARRAY['Firefox', 'Chromium', 'Dconf', 'BenchBlob'])[1 + p % 4],
            format('{"setting": %s}', p), 'released', 1 + p % 3, 'bench'
       FROM generate_series(1, 200) p`,
    `INSERT INTO nodes (name, status, os_name, os_version, agent_version, desktop_environments, last_seen,
                      cert_serial, cert_not_after, fqdn, ip_address, machine_id, created_at)
     SELECT format('node-%s', lpad(i::text, ${digits}, '0')),
            (ARRAY['online', 'online', 'online', 'degraded', 'offline', 'unknown'])[1 + i % 6],
            (ARRAY['Fedora Linux', 'Ubuntu', 'Debian GNU/Linux', 'Red Hat Enterprise Linux'])[1 + i % 4],
            (ARRAY['40', '24.04', '12', '9.4'])[1 + i % 4],
            (ARRAY['1.0.0', '1.1.0', '1.2.0'])[1 + i % 3],
            CASE WHEN i % 3 = 0 THEN ARRAY['KDE'] ELSE ARRAY['GNOME'] END,
            now() - (i % 5000) * interval '1 minute',
            to_hex(1000000 + i), now() + (i % 90) * interval '1 day',
            format('node-%s.example.org', i), format('10.%s.%s.%s', i / 65536 % 256, i / 256 % 256, i % 256),
            md5(i::text), now() - i * interval '1 minute'
       FROM generate_series(1, ${nodes}) i`,
    `INSERT INTO node_group_members (node_id, node_group_id)
     SELECT n.id, g.id
       FROM (SELECT id, row_number() OVER (ORDER BY name) AS i FROM nodes) n
       JOIN (SELECT id, row_number() OVER (ORDER BY name) AS i FROM node_groups) g ON g.i = 1 + n.i % 50`,
    // The results before the bindings: a result's row trigger then finds no reached pair and counts nothing,
    // and the bindings' reach rows count every node's results a statement at a time (migration 0017). In the
    // other order each result updated its node's counters, ten times per node: most of a 30-minute seed.
    // The pairs are the ones the bindings below reach (the same group and policy arithmetic).
    `INSERT INTO compliance_results (node_id, policy_id, policy_version, status, message, reported_at)
     SELECT m.node_id, p.id, 1,
            (ARRAY['compliant', 'compliant', 'compliant', 'compliant', 'non_compliant', 'error', 'unknown', 'inapplicable'])
              [1 + abs(hashtext(m.node_id::text || p.id::text)) % 8],
            '', now() - (abs(hashtext(p.id::text || m.node_id::text)) % 4320) * interval '1 minute'
       FROM node_group_members m
       JOIN (SELECT id, row_number() OVER (ORDER BY name) AS i FROM node_groups) g ON g.id = m.node_group_id
       CROSS JOIN generate_series(0, 9) k
       JOIN (SELECT id, row_number() OVER (ORDER BY name) AS i FROM policies) p ON p.i = 1 + ((g.i - 1) * 4 + k) % 200`,
    `SET svc.reach_inline_nodes = ${nodes + 1}`,
    `INSERT INTO policy_bindings (policy_id, node_group_id, state, priority)
     SELECT p.id, g.id, 'enabled', k
       FROM (SELECT id, row_number() OVER (ORDER BY name) AS i FROM node_groups) g
       CROSS JOIN generate_series(0, 9) k
       JOIN (SELECT id, row_number() OVER (ORDER BY name) AS i FROM policies) p ON p.i = 1 + ((g.i - 1) * 4 + k) % 200`,
    `INSERT INTO audit_logs (created_at, username, action, resource_type, resource_id, resource_name, outcome,
                           source_ip, details)
     SELECT now() - (${auditRows} - i) * interval '${auditStep} seconds',
            (ARRAY['alice', 'bob', 'carol', 'dave', 'system'])[1 + i % 5],
            (ARRAY['policy.create', 'policy.update', 'policy.release', 'binding.update', 'node.enroll',
                   'node.revoke', 'auth.login', 'auth.logout', 'auth.login_failed', 'node_group.update',
                   'user.create', 'role.update', 'policy.export', 'node.metadata_request', 'settings.update',
                   'policy.delete', 'binding.create', 'node_group.create', 'auth.password_change',
                   'disk_encryption.reveal'])[1 + i % 20],
            (ARRAY['policy', 'binding', 'node', 'user', 'node_group'])[1 + i % 5],
            md5((i % 5000)::text), format('thing-%s', i % 5000),
            (ARRAY['success', 'success', 'success', 'failure', 'denied'])[1 + i / 7 % 5],
            format('192.0.2.%s', i % 250), '{}'::jsonb
       FROM generate_series(1, ${auditRows}) i`,
    // The reach of the bulk bindings updated each node's counters in one transaction several times, which
    // leaves row versions where a fleet's reports, one per transaction, leave one (HOT updates, fillfactor 50).
    `VACUUM FULL node_compliance_counts`,
    // As autovacuum would have by then: statistics, and a visibility map for index-only scans.
    `VACUUM ANALYZE`,
  ];
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function main(): Promise<void> {
  const options = parseArgs(Deno.args);
  const name = options.reuse ?? `svc_bench_rest_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const admin = postgres(options.databaseUrl, { max: 1, onnotice: () => {} });
  if (!options.reuse) await admin.unsafe(`CREATE DATABASE ${name}`);
  const url = new URL(options.databaseUrl);
  url.pathname = `/${name}`;
  const db: Db = await openPostgres(url.toString(), { max: 4 });
  let server: Awaited<ReturnType<typeof createTestServer>> | undefined;
  try {
    const migrated = await migrate(db);
    if (!options.reuse) {
      const started = performance.now();
      // One connection for the whole seed: the reach setting above is a session's.
      const seeder = await openPostgres(url.toString(), { max: 1 });
      try {
        for (const statement of seed(options.nodes)) await seeder.query(statement);
      } finally {
        await seeder.close();
      }
      console.log(`seeded ${name} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
      // The counters, kept by triggers, against a count of the reached results: a seed that bypassed them (or
      // a changed trigger) would measure views of a fleet that cannot exist.
      const [check] = await db.query<{ kept: string; counted: string }>(
        `SELECT (SELECT array[sum(compliant), sum(non_compliant), sum(error), sum(unknown), sum(unreported)]::text
                   FROM node_compliance_counts) AS kept,
                (SELECT array[count(*) FILTER (WHERE r.status = 'compliant'),
                              count(*) FILTER (WHERE r.status = 'non_compliant'),
                              count(*) FILTER (WHERE r.status = 'error'), count(*) FILTER (WHERE r.status = 'unknown'),
                              count(*) FILTER (WHERE r.status IS NULL)]::text
                   FROM policy_reach pr
                   LEFT JOIN compliance_results r ON r.node_id = pr.node_id AND r.policy_id = pr.policy_id) AS counted`,
      );
      if (check.kept !== check.counted) {
        throw new Error(
          `seed: the compliance counters ${check.kept} differ from the results ${check.counted}`,
        );
      }
    } else {
      // The secrets of the run that seeded it are sealed with that run's key file, which is gone.
      await db.query("DELETE FROM server_secrets");
    }
    if (options.reuse && migrated.length > 0) {
      await db.query("VACUUM ANALYZE");
      console.log(`migrated ${name}: ${migrated.join(", ")}`);
    }
    const counts = await db.query<Record<string, number>>(
      `SELECT (SELECT count(*) FROM nodes)::int AS nodes, (SELECT count(*) FROM node_groups)::int AS groups,
              (SELECT count(*) FROM policies)::int AS policies, (SELECT count(*) FROM policy_bindings)::int AS bindings,
              (SELECT count(*) FROM compliance_results)::int AS results, (SELECT count(*) FROM audit_logs)::int AS audit`,
    );
    console.log(Object.entries(counts[0]).map(([k, v]) => `${k} ${v}`).join(", "));

    server = await createTestServer({
      db,
      logLevel: "error",
      routes: (ctx, identity) => buildRoutes(ctx, identity),
    });
    const client = await server.loginAs({ superAdmin: true });
    const [node] = await db.query<{ id: string }>(
      "SELECT id FROM nodes ORDER BY name OFFSET (SELECT count(*) / 2 FROM nodes) LIMIT 1",
    );
    const [policy] = await db.query<{ id: string }>(
      "SELECT id FROM policies WHERE name = 'bench-policy-100'",
    );
    const [group] = await db.query<{ id: string }>(
      "SELECT id FROM node_groups WHERE name = 'bench-group-25'",
    );

    const cases: Array<{ label: string; target: number; run: () => Promise<void> }> = [];
    const get = (label: string, path: string, target = 50) =>
      cases.push({
        label,
        target,
        async run() {
          const res = await client.request("GET", path);
          if (res.status !== 200) throw new Error(`GET ${path} → ${res.status}: ${res.text.slice(0, 300)}`);
        },
      });
    get("nodes p1", "/api/v1/nodes?per_page=50");
    get("nodes deep", "/api/v1/nodes?per_page=50&page=150&sort=last_seen&order=desc&status=online");
    get("nodes group+os", `/api/v1/nodes?per_page=50&page=3&group=${group.id}&os=Ubuntu&sort=agent_version`);
    get("nodes search", "/api/v1/nodes?per_page=50&search=node-04");
    get("node groups p1", "/api/v1/node-groups?per_page=50&sort=node_count&order=desc");
    get("policies p1", "/api/v1/policies/all?per_page=50");
    get("policies deep", "/api/v1/policies/all?per_page=50&page=3&state=released&sort=type");
    get("bindings p1", "/api/v1/policy-bindings?per_page=50");
    get(
      "bindings deep",
      "/api/v1/policy-bindings?per_page=50&page=9&state=enabled&sort=policy_name&order=desc",
    );
    get("compliance p1", "/api/v1/compliance?per_page=50");
    // The last page of the non-compliant results: by page number (OFFSET reads every row before it), and by
    // cursor (the list's keyset paging, the same cost at any depth), from the result before that page.
    const [{ n: nonCompliant }] = await db.query<{ n: number }>(
      "SELECT sum(non_compliant)::int AS n FROM node_compliance_counts",
    );
    const lastPage = Math.ceil(nonCompliant / 50);
    get(
      "compliance deep",
      `/api/v1/compliance?per_page=50&page=${lastPage}&status=non_compliant&sort=reported_at&order=desc`,
      50,
    );
    const [before] = await db.query<{ at: string; node_id: string; policy_id: string }>(
      `SELECT r.reported_at::text AS at, r.node_id, r.policy_id
         FROM compliance_results r JOIN policy_reach pr ON pr.node_id = r.node_id AND pr.policy_id = r.policy_id
        WHERE r.status = 'non_compliant'
        ORDER BY r.reported_at DESC, r.node_id, r.policy_id OFFSET ${(lastPage - 1) * 50 - 1} LIMIT 1`,
    );
    get(
      "compliance deep cursor",
      `/api/v1/compliance?per_page=50&status=non_compliant&cursor=${
        complianceCursor(before.at, before.node_id, before.policy_id)
      }`,
    );
    get("audit p1", "/api/v1/audit-logs?per_page=50");
    // Page numbers reach the newest 10,000 entries (deeper: 400, use the cursor): the deepest such page.
    get(
      "audit deep",
      "/api/v1/audit-logs?per_page=50&page=200&action=policy.update,node.enroll&outcome=success",
    );
    // The same depth by keyset (the console's and an API client's way through a large log).
    const [deep] = await db.query<{ id: string }>(
      `SELECT id::text FROM audit_logs WHERE action IN ('policy.update', 'node.enroll') AND outcome = 'success'
        ORDER BY id DESC OFFSET 49950 LIMIT 1`,
    );
    get(
      "audit deep cursor",
      `/api/v1/audit-logs?per_page=50&cursor=${deep.id}&action=policy.update,node.enroll&outcome=success`,
    );
    get("audit user+time", "/api/v1/audit-logs?per_page=50&page=20&user=alice&from=2000-01-01T00:00:00Z");
    get("node detail", `/api/v1/nodes/${node.id}`);
    get("node compliance", `/api/v1/nodes/${node.id}/compliance`);
    get("policy compliance", `/api/v1/policies/all/${policy.id}/compliance?per_page=50&page=5`);
    get("compliance summary", "/api/v1/compliance/summary", 200);
    get("dashboard summary", "/api/v1/dashboard/summary", 200);
    const log = createLogger("error");
    cases.push({
      label: "metrics scrape",
      target: 200,
      async run() {
        const families = await collectDatabaseFamilies(db, log);
        // As the metrics listener sends it: rendered a chunk at a time while the response is read.
        const chunks = await Array.fromAsync(renderStream(families, "text"));
        if (families.length === 0 || chunks.length === 0) throw new Error("empty scrape");
      },
    });

    console.log(`${"".padEnd(20)}${"p50".padStart(9)}${"p99".padStart(9)}  target (p99)  loop stall (CPU)`);
    let misses = 0;
    for (const c of cases) {
      for (let i = 0; i < 3; i++) await c.run();
      const times: number[] = [];
      for (let i = 0; i < options.samples; i++) {
        const t0 = performance.now();
        await c.run();
        times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      const p99 = percentile(times, 99);
      if (p99 >= c.target) misses++;
      // Apart from the timed calls: the monitor's timer chain would lengthen them.
      let stall = 0;
      for (let i = 0; i < 10; i++) stall = Math.max(stall, (await stallDuring(c.run)).stall.busyMs);
      console.log(
        `${c.label.padEnd(20)}${percentile(times, 50).toFixed(1).padStart(7)}ms${
          p99.toFixed(1).padStart(7)
        }ms` +
          `  < ${String(c.target).padStart(3)} ms${p99 >= c.target ? " MISSED" : "       "}${
            stall.toFixed(1).padStart(9)
          } ms`,
      );
    }
    console.log(
      `${cases.length - misses} of ${cases.length} within target (${options.samples} samples each)`,
    );
  } finally {
    await server?.close();
    await db.close();
    if (options.keep || options.reuse) console.log(`database kept: --reuse ${name}`);
    else await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

if (import.meta.main) {
  try {
    await main();
  } catch (err) {
    console.error(`rest: ${(err as Error).stack ?? err}`);
    Deno.exit(1);
  }
}
