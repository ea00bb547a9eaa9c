/**
 * Worst event-loop stall while a bundle is imported (dry run, embedded PGlite): the largest accepted bundle,
 * the 289 KB / 30,000-key bundle of issue 21, and hostile ones (parsed in full before being refused, or
 * refused by the pre-parse limits). A timer chain records the longest gap between two turns of the loop;
 * that gap is how long every other request (REST and the agents' gRPC) waited.
 *
 *   deno run -A bench/import_stall.ts [--runs 3]
 *
 * Numbers, not pass/fail. The parse runs in a worker; what remains on the loop is the database part of the
 * import (including the policy domain's own validation of each content it stores).
 */
import { parseArgs } from "node:util";
import { migrate, openPglite } from "../server/db/mod.ts";
import { importBundle, MAX_BUNDLE_BYTES, MAX_BUNDLE_NODES } from "../server/domain/export_import.ts";

const { values: args } = parseArgs({ args: Deno.args, options: { runs: { type: "string", default: "3" } } });
const RUNS = Number(args.runs);

function policy(name: string, keys: number, options: { width?: number; tail?: string; flow?: boolean } = {}) {
  const key = (i: number) => `k${String(i).padStart(options.width ?? 1, "0")}: ${i % 10}`;
  const body = options.flow
    ? [`      {${Array.from({ length: keys }, (_, i) => key(i)).join(", ")}}`]
    : Array.from({ length: keys }, (_, i) => `      ${key(i)}`);
  return [
    "apiVersion: svc.dev/v1",
    "kind: Policy",
    "metadata:",
    `  name: ${name}`,
    "spec:",
    "  type: Firefox",
    "  content:",
    "    additional:",
    ...body,
  ].join("\n") + "\n" + (options.tail ?? "");
}

/** The largest bundle the limits accept: as many keys as fit in MAX_BUNDLE_BYTES and MAX_BUNDLE_NODES. */
function largestAccepted(): string {
  let keys = MAX_BUNDLE_NODES - 20;
  let text = policy("largest", keys, { flow: true });
  while (new TextEncoder().encode(text).length > MAX_BUNDLE_BYTES) {
    keys -= 2_000;
    text = policy("largest", keys, { flow: true });
  }
  return text;
}

const INPUTS: [string, string][] = [
  ["largest accepted (one policy)", largestAccepted()],
  [
    "largest accepted (200 policies)",
    Array.from({ length: 200 }, (_, i) => policy(`p${i}`, 450, { flow: true })).join("---\n"),
  ],
  ["289 KB / 30,000 keys (issue 21)", policy("big", 30_000, { flow: true })],
  ["30,000 keys + duplicate key (hostile)", policy("big", 30_000, { flow: true, tail: "kind: Policy\n" })],
  ["~1 MB + alias at the end (hostile)", policy("big", 48_000, { width: 9, tail: "x: *anchor\n" })],
  ["over the node limit (hostile)", "- 1\n".repeat(MAX_BUNDLE_NODES + 10)],
];

/** Runs `work` while a timer chain measures the longest gap between turns of the event loop. */
async function worstStall(
  work: () => Promise<unknown>,
): Promise<{ stallMs: number; totalMs: number; outcome: string }> {
  let worst = 0;
  let last = performance.now();
  let running = true;
  const tick = () => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
    if (running) setTimeout(tick, 0);
  };
  setTimeout(tick, 0);
  const started = performance.now();
  let outcome: string;
  try {
    const report = await work() as { ok: boolean; created: number };
    outcome = report.ok ? `accepted (${report.created} created)` : "refused (report)";
  } catch (err) {
    outcome = `refused: ${(err as Error).message.slice(0, 70)}`;
  }
  const totalMs = performance.now() - started;
  running = false;
  await new Promise((resolve) => setTimeout(resolve, 5));
  return { stallMs: worst, totalMs, outcome };
}

const db = await openPglite();
await migrate(db);
console.log(`${RUNS} run(s) each; worst stall is the longest the event loop was held (ms)`);
for (const [label, text] of INPUTS) {
  let stall = 0;
  let total = 0;
  let outcome = "";
  for (let run = 0; run < RUNS; run++) {
    const r = await worstStall(() =>
      importBundle(db, text, { dryRun: true, createdBy: "bench", mayCreateBindings: true })
    );
    stall = Math.max(stall, r.stallMs);
    total += r.totalMs;
    outcome = r.outcome;
  }
  const kb = (new TextEncoder().encode(text).length / 1024).toFixed(0);
  console.log(
    `${label.padEnd(40)} ${kb.padStart(5)} KiB  worst stall ${stall.toFixed(1).padStart(8)} ms  ` +
      `import ${(total / RUNS).toFixed(0).padStart(6)} ms  ${outcome}`,
  );
}
await db.close();
