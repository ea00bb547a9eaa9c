/**
 * Worst event-loop stall while the server handles a large request, through the real REST routes of an
 * in-process server on embedded PGlite: the largest accepted import (one ~1 MiB policy), 200 policies, the
 * 289 KB / 30,000-key bundle of issue 21, hostile bundles (parsed in full before being refused, or refused by
 * the pre-parse limits), and a plain `POST /api/v1/policies/all` of the largest policy the body limit
 * accepts. A timer chain records the longest gap between two turns of the loop; that gap is how long every
 * other request (REST and the agents' gRPC) waited.
 *
 *   deno run -A bench/import_stall.ts [--runs 3] [--postgres]
 *
 * `--postgres` runs on a fresh PostgreSQL database from `SVC_TEST_DATABASE_URL` (created and dropped)
 * instead of embedded PGlite, whose statements run on the server's own thread (a 1 MiB row costs the loop its
 * encoding, the WASM database's work and the garbage collection of the copies).
 *
 * Numbers, not pass/fail. Parsing and content checks run in a worker (server/domain/bundle_job.ts) before
 * the request's unit of work opens; what remains on the loop is reading the body, the database statements
 * and copying the worker's answer back.
 */
import { parseArgs } from "node:util";
import { migrate, openPglite } from "../server/db/mod.ts";
import { closeBundleWorkers } from "../server/domain/bundle_job.ts";
import { MAX_BUNDLE_BYTES, MAX_BUNDLE_NODES } from "../server/domain/export_import.ts";
import { MAX_JSON_BODY } from "../server/http/route.ts";
import { domainRoutes } from "../server/http/routes/mod.ts";
import { systemRoutes } from "../server/http/system_routes.ts";
import { createTestServer, type TestClient, type TestResponse } from "../tests/helpers/app.ts";
import { freshDb, TEST_DATABASE_URL } from "../tests/helpers/db.ts";

const { values: args } = parseArgs({
  args: Deno.args,
  options: { runs: { type: "string", default: "3" }, postgres: { type: "boolean", default: false } },
});
const RUNS = Number(args.runs);
const bytes = (text: string) => new TextEncoder().encode(text).length;

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
  while (bytes(text) > MAX_BUNDLE_BYTES) {
    keys -= 2_000;
    text = policy("largest", keys, { flow: true });
  }
  return text;
}

/** The largest Firefox content whose POST body fits in MAX_JSON_BODY. */
function largestPostContent(): string {
  const content = (keys: number) =>
    JSON.stringify({
      additional: Object.fromEntries(Array.from({ length: keys }, (_, i) => [`k${i}`, i % 10])),
    });
  let keys = 100_000;
  while (
    JSON.stringify({ name: "x".repeat(40), type: "Firefox", content: content(keys) }).length > MAX_JSON_BODY
  ) {
    keys -= 1_000;
  }
  return content(keys);
}

type Request = (client: TestClient, run: number) => Promise<TestResponse>;

const importing = (text: string): Request => (client) =>
  client.raw("POST", "/api/v1/policies/import?dry_run=true", { body: text, contentType: "application/yaml" });

const postContent = largestPostContent();

const INPUTS: [string, number, Request][] = [[
  "baseline: idle for 1 s (machine noise)",
  0,
  async () => {
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    return { status: 0 } as TestResponse;
  },
]];
const addImport = (label: string, text: string) => INPUTS.push([label, bytes(text), importing(text)]);
addImport("import: largest accepted (one policy)", largestAccepted());
addImport(
  "import: largest accepted (200 policies)",
  Array.from({ length: 200 }, (_, i) => policy(`p${i}`, 450, { flow: true })).join("---\n"),
);
addImport("import: 289 KB / 30,000 keys (issue 21)", policy("big", 30_000, { flow: true }));
addImport(
  "import: 30,000 keys + duplicate (hostile)",
  policy("big", 30_000, { flow: true, tail: "kind: Policy\n" }),
);
addImport(
  "import: ~1 MB + alias at the end (hostile)",
  policy("big", 48_000, { width: 9, tail: "x: *anchor\n" }),
);
addImport("import: over the node limit (hostile)", "- 1\n".repeat(MAX_BUNDLE_NODES + 10));
INPUTS.push([
  "POST /policies/all: largest policy",
  bytes(postContent),
  (client, run) =>
    client.request("POST", "/api/v1/policies/all", {
      name: `largest-${run}-${crypto.randomUUID().slice(0, 8)}`,
      type: "Firefox",
      content: postContent,
    }),
]);

/** Runs `work` while a timer chain measures the longest gap between turns of the event loop. */
async function worstStall(
  work: () => Promise<TestResponse>,
): Promise<{ stallMs: number; totalMs: number; status: number }> {
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
  const res = await work();
  const totalMs = performance.now() - started;
  running = false;
  await new Promise((resolve) => setTimeout(resolve, 5));
  return { stallMs: worst, totalMs, status: res.status };
}

if (args.postgres && !TEST_DATABASE_URL) throw new Error("--postgres needs SVC_TEST_DATABASE_URL");
const testDb = args.postgres ? await freshDb("postgres") : undefined;
const db = testDb?.db ?? await openPglite();
if (!testDb) await migrate(db);
const server = await createTestServer({
  db,
  routes: (ctx) => [...systemRoutes(ctx), ...domainRoutes(ctx)],
  logLevel: "error",
});
const admin = await server.loginAs({ superAdmin: true });
console.log(
  `${RUNS} run(s) each on ${
    testDb ? "PostgreSQL" : "PGlite"
  }; worst stall is the longest the event loop was held (ms)`,
);
for (const [label, size, request] of INPUTS) {
  let stall = 0;
  let total = 0;
  let status = 0;
  for (let run = 0; run < RUNS; run++) {
    const r = await worstStall(() => request(admin, run));
    stall = Math.max(stall, r.stallMs);
    total += r.totalMs;
    status = r.status;
  }
  console.log(
    `${label.padEnd(44)} ${(size / 1024).toFixed(0).padStart(5)} KiB  worst stall ${
      stall.toFixed(1).padStart(7)
    } ms  request ${(total / RUNS).toFixed(0).padStart(6)} ms  HTTP ${status}`,
  );
}
await server.close();
if (testDb) await testDb.dispose();
else await db.close();
closeBundleWorkers();
