/**
 * Binding changes at fleet size: how long the admin's transaction takes, how long the reach model takes to
 * catch up afterwards, and what enrollments, reports and other admin changes wait meanwhile (numbers, not
 * pass/fail).
 *
 *   deno run -A bench/binding_change.ts [--nodes 100000] [--rounds 5] [--batch 1000] [--workers 1]
 *                                        [--other-policies 5] [--database-url URL] [--no-inline-compare]
 *
 * Creates a PostgreSQL database, migrates it and seeds in SQL: N nodes in one group that `--other-policies`
 * released policies already reach (N × that many pairs), a released policy bound to the group (disabled),
 * and a compliance result of that policy on every other node. Then, per round, through the same domain call the
 * REST route makes (`updateBinding` in one transaction): enable the binding, wait until the read-model
 * workers (`--workers` of server/hub/read_model_worker.ts in this process, `--batch` nodes per transaction)
 * have caught up, change its priority, disable it, wait again. Printed: commit time p50/p99/max per kind of
 * change, catch-up time per enable and disable, PostgreSQL's CPU per catch-up, and, measured continuously
 * during every catch-up, the latency of an enrollment (a node and its membership in the bound group), a
 * compliance report (the report's upsert on a node of the group) and another admin change (a priority change
 * of another binding), next to the same loop run for 15 s before the rounds with nothing catching up (the
 * machine's load alone). Unless `--no-inline-compare`, it first times the same enable and disable done the old
 * way, inside the admin's transaction (`svc.reach_inline_nodes` above N), as the "before" figure.
 */
import postgres from "postgres";
import { type Db, migrate, openPostgres } from "../server/db/mod.ts";
import { updateBinding } from "../server/domain/bindings.ts";
import { startReadModelWorker } from "../server/hub/read_model_worker.ts";
import { DEFAULT_BATCH_NODES } from "../server/domain/reach.ts";
import { readModelBacklog } from "../server/metrics/collector.ts";
import { createLogger } from "../server/core/log.ts";
import { machineCpu, programCpu } from "./proc_stats.ts";

import { DEFAULT_DATABASE_URL, parseFlags } from "./bench_args.ts";
const USAGE =
  "usage: deno run -A bench/binding_change.ts [--nodes N] [--rounds R] [--batch B] [--workers W] " +
  "[--other-policies K] [--database-url URL] [--no-inline-compare]";

interface Options {
  nodes: number;
  rounds: number;
  batch: number;
  workers: number;
  otherPolicies: number;
  databaseUrl: string;
  inlineCompare: boolean;
}

function parseArgs(args: string[]): Options {
  return parseFlags<Options>(args, USAGE, {
    nodes: 100_000,
    rounds: 5,
    batch: DEFAULT_BATCH_NODES,
    workers: 1,
    otherPolicies: 5,
    databaseUrl: DEFAULT_DATABASE_URL,
    inlineCompare: true,
  }, {
    ints: ["nodes", "rounds", "batch", "workers", "otherPolicies"],
    min: { otherPolicies: 0 },
    strings: ["databaseUrl"],
    switches: { "--no-inline-compare": (o) => o.inlineCompare = false },
  });
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

function line(label: string, samples: number[], unit = "ms"): string {
  if (samples.length === 0) return `${label.padEnd(30)}(no samples)`;
  const s = [...samples].sort((a, b) => a - b);
  const f = (x: number) => (unit === "s" ? (x / 1000).toFixed(2) : x.toFixed(1)).padStart(8);
  return `${label.padEnd(30)}p50 ${f(percentile(s, 50))} ${unit}  p99 ${f(percentile(s, 99))} ${unit}  max ${
    f(s.at(-1)!)
  } ${unit}  (${s.length})`;
}

/** Seeds the fleet; returns the ids the rounds need. */
async function seed(db: Db, o: Options): Promise<{ binding: string; other: string; group: string }> {
  const [group] = await db.query<{ id: string }>(
    "INSERT INTO node_groups (name) VALUES ('fleet') RETURNING id",
  );
  const [spare] = await db.query<{ id: string }>(
    "INSERT INTO node_groups (name) VALUES ('spare') RETURNING id",
  );
  const policies = await db.query<{ id: string; name: string }>(
    `INSERT INTO policies (name, type, content, state, created_by)
     SELECT 'bench-' || i, 'Firefox', format('{"i": %s}', i), 'released', 'bench'
       FROM generate_series(0, $1::int) i RETURNING id, name`,
    [o.otherPolicies + 1],
  );
  const bench = policies.find((p) => p.name === "bench-0")!;
  const spareOne = policies.find((p) => p.name === "bench-1")!;
  // The other policies reach every node from the start: bindings first, then the members in one statement.
  for (const p of policies) {
    if (p === bench || p === spareOne) continue;
    await db.query(
      "INSERT INTO policy_bindings (policy_id, node_group_id, state) VALUES ($1, $2, 'enabled')",
      [
        p.id,
        group.id,
      ],
    );
  }
  const [binding] = await db.query<{ id: string }>(
    "INSERT INTO policy_bindings (policy_id, node_group_id) VALUES ($1, $2) RETURNING id",
    [bench.id, group.id],
  );
  const [other] = await db.query<{ id: string }>(
    "INSERT INTO policy_bindings (policy_id, node_group_id, state) VALUES ($1, $2, 'enabled') RETURNING id",
    [spareOne.id, spare.id],
  );
  await db.query(
    `INSERT INTO nodes (name, status, os_name) SELECT format('node-%s', lpad(i::text, 6, '0')), 'online', 'Debian'
       FROM generate_series(1, $1::int) i`,
    [o.nodes],
  );
  await db.query("INSERT INTO node_group_members (node_id, node_group_id) SELECT id, $1 FROM nodes", [
    group.id,
  ]);
  await db.query(
    `INSERT INTO compliance_results (node_id, policy_id, policy_version, status)
     SELECT id, $1, 1, (ARRAY['compliant', 'non_compliant', 'error'])[1 + abs(hashtext(id::text)) % 3]
       FROM nodes WHERE abs(hashtext(name)) % 2 = 0`,
    [bench.id],
  );
  await db.query("VACUUM ANALYZE");
  return { binding: binding.id, other: other.id, group: group.id };
}

/** The report's upsert, as server/grpc/policy_service.ts runs it. */
const REPORT_SQL =
  `INSERT INTO compliance_results (node_id, policy_id, policy_version, status, message, items, reported_at)
  VALUES ($1, $2, 1, $3, '', '[]', now())
  ON CONFLICT (node_id, policy_id) DO UPDATE SET status = excluded.status, reported_at = now()`;

/**
 * Runs enrollments, reports and admin changes one after another until `stop`, each timed; the load the
 * catch-up must not hold up.
 */
function probe(db: Db, ids: { group: string; other: string; policy: string; nodes: string[] }) {
  const times = { enroll: [] as number[], report: [] as number[], admin: [] as number[] };
  let running = true;
  let serial = 0;
  const timed = async (into: number[], op: () => Promise<unknown>) => {
    const t0 = performance.now();
    await op();
    into.push(performance.now() - t0);
  };
  const loop = (async () => {
    while (running) {
      const name = `probe-${Date.now().toString(36)}-${serial++}`;
      await timed(times.enroll, () =>
        db.transaction((tx) =>
          tx.query(
            `WITH n AS (INSERT INTO nodes (name) VALUES ($1) RETURNING id)
             INSERT INTO node_group_members (node_id, node_group_id) SELECT id, $2 FROM n`,
            [name, ids.group],
          )
        ));
      const node = ids.nodes[Math.floor(Math.random() * ids.nodes.length)];
      await timed(
        times.report,
        () => db.query(REPORT_SQL, [node, ids.policy, serial % 2 ? "compliant" : "error"]),
      );
      await timed(
        times.admin,
        () => db.transaction((tx) => updateBinding(tx, ids.other, { priority: serial % 1000 })),
      );
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    times,
    async stop() {
      running = false;
      await loop;
    },
  };
}

/**
 * Samples, every 20 ms until stopped, which backends of database `name` wait for a lock and on whom, and
 * returns the longest run of samples one backend spent waiting (the catch-up's own batches waiting on a
 * report's counter row are left out: the catch-up is meant to wait, not to be waited for).
 */
function lockWaits(db: Db, name: string) {
  let running = true;
  let longest = { ms: 0, what: "none seen" };
  const since = new Map<number, { at: number; query: string }>();
  const loop = (async () => {
    while (running) {
      const rows = await db.query<{ pid: number; query: string }>(
        `SELECT pid, left(query, 60) AS query FROM pg_stat_activity
          WHERE datname = $1 AND wait_event_type = 'Lock' AND query NOT LIKE '%reach_refresh(%'`,
        [name],
      );
      const now = performance.now();
      const seen = new Set(rows.map((r) => r.pid));
      for (const r of rows) if (!since.has(r.pid)) since.set(r.pid, { at: now, query: r.query });
      for (const [pid, w] of since) {
        if (seen.has(pid)) continue;
        since.delete(pid);
        if (now - w.at > longest.ms) {
          longest = { ms: Math.round(now - w.at), what: w.query.replace(/\s+/g, " ") };
        }
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return longest;
    },
  };
}

async function main(): Promise<void> {
  const o = parseArgs(Deno.args);
  const name = `svc_bench_binding_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const admin = postgres(o.databaseUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  const url = new URL(o.databaseUrl);
  url.pathname = `/${name}`;
  const db = await openPostgres(url.toString(), { max: 12 });
  const log = createLogger("warn");
  const workers: Awaited<ReturnType<typeof startReadModelWorker>>[] = [];
  try {
    await migrate(db);
    const seeded = performance.now();
    const ids = await seed(db, o);
    const [{ pairs }] = await db.query<{ pairs: number }>("SELECT count(*)::int AS pairs FROM policy_reach");
    console.log(
      `seeded ${o.nodes} nodes in one group, ${o.otherPolicies} policies reaching all of them (${pairs} pairs), ` +
        `${Math.ceil(o.nodes / 2)} results of the bench policy, in ${
          ((performance.now() - seeded) / 1000).toFixed(1)
        } s`,
    );
    const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
    console.log(`machine: ${navigator.hardwareConcurrency} CPUs, load average ${load} at start`);
    const [{ policy_id: policy }] = await db.query<{ policy_id: string }>(
      "SELECT policy_id FROM policy_bindings WHERE id = $1",
      [ids.binding],
    );
    const change = async (input: Parameters<typeof updateBinding>[2], inline = false) => {
      const t0 = performance.now();
      await db.transaction(async (tx) => {
        if (inline) await tx.query(`SET LOCAL svc.reach_inline_nodes = ${o.nodes + 1}`);
        await updateBinding(tx, ids.binding, input);
      });
      return performance.now() - t0;
    };

    if (o.inlineCompare) {
      // Before: the refresh inside the admin's transaction, as every change did until migration 0022.
      const enable = await change({ state: "enabled" }, true);
      const disable = await change({ state: "disabled" }, true);
      console.log(
        `before (refresh inside the admin's transaction): enable ${enable.toFixed(0)} ms, disable ${
          disable.toFixed(0)
        } ms to commit`,
      );
    }

    for (let i = 0; i < o.workers; i++) {
      workers.push(await startReadModelWorker({ db, log }, { batchNodes: o.batch }));
    }
    const nodes = (await db.query<{ id: string }>(
      "SELECT id FROM nodes WHERE name LIKE 'node-%' ORDER BY random() LIMIT 5000",
    ))
      .map((r) => r.id);
    // The same loop with nothing catching up, for comparison: what the machine's load alone costs it.
    const quiet = probe(db, { group: ids.group, other: ids.other, policy, nodes });
    await new Promise((r) => setTimeout(r, 15_000));
    await quiet.stop();
    const commits = { enable: [] as number[], priority: [] as number[], disable: [] as number[] };
    const catchUp = { enable: [] as number[], disable: [] as number[] };
    const pgCpu: number[] = [];
    const during = probe(db, { group: ids.group, other: ids.other, policy, nodes });
    const waits = lockWaits(db, name);
    const waitCaughtUp = async (into: number[], committedAt: number) => {
      const cpu0 = await programCpu("postgres");
      let sawBacklog = false;
      while (true) {
        const backlog = await readModelBacklog(db);
        if (backlog.pending > 0) sawBacklog = true;
        else break;
        await new Promise((r) => setTimeout(r, 50));
      }
      into.push(performance.now() - committedAt);
      pgCpu.push((await programCpu("postgres")) - cpu0);
      if (!sawBacklog) console.log("  (the queue was empty already at the first look)");
    };
    const machine0 = await machineCpu();
    for (let round = 1; round <= o.rounds; round++) {
      const t0 = performance.now();
      commits.enable.push(await change({ state: "enabled" }));
      await waitCaughtUp(catchUp.enable, t0 + commits.enable.at(-1)!);
      for (let k = 0; k < 4; k++) commits.priority.push(await change({ priority: round * 10 + k }));
      const t1 = performance.now();
      commits.disable.push(await change({ state: "disabled" }));
      await waitCaughtUp(catchUp.disable, t1 + commits.disable.at(-1)!);
      console.log(
        `round ${round}: enable ${commits.enable.at(-1)!.toFixed(1)} ms (caught up ${
          (catchUp.enable.at(-1)! / 1000).toFixed(1)
        } s), disable ${commits.disable.at(-1)!.toFixed(1)} ms (caught up ${
          (catchUp.disable.at(-1)! / 1000).toFixed(1)
        } s)`,
      );
    }
    await during.stop();
    const longestWait = await waits.stop();
    const machine1 = await machineCpu();
    console.log(`\ncommit of the admin's transaction (${o.nodes} nodes reached):`);
    console.log(line("  enable", commits.enable));
    console.log(line("  re-prioritise", commits.priority));
    console.log(line("  disable", commits.disable));
    console.log(`catch-up of the reach model (${o.workers} worker(s), ${o.batch} nodes per batch):`);
    console.log(line("  after enable", catchUp.enable, "s"));
    console.log(line("  after disable", catchUp.disable, "s"));
    console.log(
      `  PostgreSQL CPU per catch-up: ${(pgCpu.reduce((a, b) => a + b, 0) / pgCpu.length).toFixed(2)} s ` +
        `(${((pgCpu.reduce((a, b) => a + b, 0) / pgCpu.length) / o.nodes * 1e6).toFixed(1)} µs per node)`,
    );
    console.log(
      "meanwhile, one after another during every catch-up (and for 15 s before, nothing catching up):",
    );
    for (
      const [label, key] of [["enrollment into the group", "enroll"], ["compliance report", "report"], [
        "other admin change",
        "admin",
      ]] as const
    ) {
      console.log(line(`  ${label}`, during.times[key]));
      console.log(line("    before, quiet", quiet.times[key]));
    }
    console.log(
      `  longest lock wait of anything but the catch-up itself: ${longestWait.ms} ms (${longestWait.what}; ` +
        "sampled every 20 ms: a wait shorter than that may go unseen)",
    );
    console.log(
      `machine busy ${
        (((machine1.busy - machine0.busy) / (machine1.total - machine0.total)) * 100).toFixed(0)
      }% ` +
        `of ${navigator.hardwareConcurrency} CPUs over the rounds`,
    );
  } finally {
    for (const w of workers) await w.stop();
    await db.close();
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

if (import.meta.main) {
  try {
    await main();
  } catch (err) {
    console.error(`binding_change: ${(err as Error).stack ?? err}`);
    Deno.exit(1);
  }
}
