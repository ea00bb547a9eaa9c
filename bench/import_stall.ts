/**
 * Worst event-loop stall while the server handles large requests, through the real REST routes and the
 * agents' policy port of an in-process server: the largest accepted import (one ~1 MiB policy), 200
 * policies, the 289 KB / 30,000-key bundle of issue 21, hostile bundles (parsed in full before being
 * refused, or refused by the pre-parse limits); then the life of the largest policy the JSON body limit
 * accepts (~860 KiB): create, edit, release, binding enabled and the snapshot delivered to an enrolled agent
 * (typed content encoded), a priority change (snapshot with the typed content cached), a revision saved and
 * released (snapshot with the new content), and its export; and a login with the right and a wrong password
 * (argon2id, in a worker as well). A timer chain records the longest gap between
 * two turns of the loop; that gap is how long every other request (REST and the agents' gRPC) waited. The
 * idle baseline is what the machine alone costs the timer chain.
 *
 *   deno run -A bench/import_stall.ts [--runs 3] [--postgres]
 *
 * `--postgres` runs on a fresh PostgreSQL database from `SVC_TEST_DATABASE_URL` (created and dropped)
 * instead of embedded PGlite, whose statements run on the server's own thread (a 1 MiB row costs the loop its
 * encoding, the WASM database's work and the garbage collection of the copies).
 *
 * Numbers, not pass/fail. Parsing, content checks and typed-content encoding run in a worker
 * (server/domain/content_offloop.ts) before the request's unit of work opens; what remains on the loop is reading
 * the body, the database statements, copying the worker's answer back, encoding the stream message and the
 * TLS write. The agent's stream only counts messages and runs in its own process (tests/helpers/stall.ts), as
 * a real agent does, so receiving a 1 MiB message is not counted; the in-process REST client sends bodies
 * serialized beforehand and leaves the 1 MiB answers unparsed (a real client does that work on its machine).
 */
import { parseArgs } from "node:util";
import { migrate, openPglite } from "../server/db/mod.ts";
import { createGroup, enrollAgent, startAgentServer } from "../tests/helpers/agents.ts";
import { countingStream, idleStall, stallDuring } from "../tests/helpers/stall.ts";
import { closeWorkers, keepWorkerWarm } from "../server/core/offloop.ts";
import { MAX_BUNDLE_BYTES, MAX_BUNDLE_NODES } from "../server/domain/export_import.ts";
import { MAX_JSON_BODY } from "../server/http/route.ts";
import { domainRoutes } from "../server/http/routes/mod.ts";
import { systemRoutes } from "../server/http/routes/system.ts";
import { TEST_ADMIN_PASSWORD, type TestClient, type TestResponse } from "../tests/helpers/app.ts";
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

const INPUTS: [string, number, Request][] = [];
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
/** Worst stall and total time per phase, over the runs. */
const results = new Map<
  string,
  { size: number; wall: number; busy: number; total: number; count: number; status: number }
>();

/** Runs `work` under the stall monitor, recorded as `label`; an error status stops the run unless `refusable`. */
async function measure(
  label: string,
  size: number,
  work: () => Promise<TestResponse | void>,
  refusable = false,
): Promise<TestResponse> {
  const started = performance.now();
  const { value, stall } = await stallDuring(work);
  const totalMs = performance.now() - started;
  const row = results.get(label) ?? { size, wall: 0, busy: 0, total: 0, count: 0, status: 0 };
  row.wall = Math.max(row.wall, stall.wallMs);
  row.busy = Math.max(row.busy, stall.busyMs);
  row.total += totalMs;
  row.count++;
  row.status = value?.status ?? 0;
  results.set(label, row);
  if (value && value.status >= 300 && !refusable) {
    throw new Error(`${label}: HTTP ${value.status} ${value.text.slice(0, 300)}`);
  }
  return value ?? ({ status: 0 } as TestResponse);
}

if (args.postgres && !TEST_DATABASE_URL) throw new Error("--postgres needs SVC_TEST_DATABASE_URL");
const testDb = args.postgres ? await freshDb("postgres") : undefined;
const db = testDb?.db ?? await openPglite();
if (!testDb) await migrate(db);
const server = await startAgentServer(db, {
  routes: (ctx) => [...systemRoutes(ctx), ...domainRoutes(ctx)],
  logLevel: "error",
});
// As svc-server does at start (server/server.ts): one worker stays started, so no request pays for `new Worker`.
const releaseWarmWorker = keepWorkerWarm();
const admin = await server.test.loginAs({ superAdmin: true });
const groupId = await createGroup(db, "bench");
const agent = await enrollAgent(server, { name: "bench-agent", groupId });
const stream = countingStream(server, agent, { ownProcess: true });
await stream.waitFor(1);
console.log(
  `${RUNS} run(s) each on ${testDb ? "PostgreSQL" : "PGlite"}, load average ${Deno.loadavg().join(" ")}.\n` +
    "Worst stall: the longest the event loop was held, by the clock (wall) and in the loop thread's own\n" +
    "processor time (on CPU: leaves out the wait for a processor on a loaded machine), in ms.",
);

/** A request, then waits until the agent's stream has received `messages` more messages. */
async function delivering(request: Promise<TestResponse>, messages: number): Promise<TestResponse> {
  const before = stream.count();
  const res = await request;
  if (res.status < 300) await stream.waitFor(before + messages);
  return res;
}

const size = bytes(postContent);
for (let run = 0; run < RUNS; run++) {
  const name = `largest-${run}`;
  await measure("baseline: idle for 1 s (machine noise)", 0, () => idleStall(1_000).then(() => {}));
  // argon2id (about 70 ms of a processor) runs in a worker: a login costs the loop only its own handling.
  const login = (password: string, address: number) => () =>
    server.test.anonymous({ ip: `127.0.0.${address}` }).request("POST", "/api/v1/auth/login", {
      username: "admin",
      password,
    });
  await measure("login (argon2id check)", 0, login(TEST_ADMIN_PASSWORD, 10 + run));
  await measure("login, wrong password (argon2id check)", 0, login("not the password", 100 + run), true);
  for (const [label, bundleSize, request] of INPUTS) {
    await measure(label, bundleSize, () => request(admin, run), true);
  }
  // Bodies are serialized before, and answers left as text during, the measured request: a real client does
  // that work on its own machine, not on the server's thread as this in-process client would.
  const sendJson = (method: string, path: string, body: string) => () =>
    admin.raw(method, path, { body, contentType: "application/json", parseJson: false });
  const createBody = JSON.stringify({ name, type: "Firefox", content: postContent });
  const created = await measure(
    "policy: POST largest content",
    size,
    sendJson("POST", "/api/v1/policies/all", createBody),
  );
  const id = JSON.parse(created.text).id as string;
  const editBody = JSON.stringify({ content: postContent.replace('"k2":2', `"k2":${3 + run}`) });
  await measure(
    "policy: PUT content (draft edit)",
    size,
    sendJson("PUT", `/api/v1/policies/all/${id}`, editBody),
  );
  await measure(
    "policy: release",
    size,
    () => admin.request("PUT", `/api/v1/policies/all/${id}/state`, { state: "released" }),
  );
  const binding = await admin.request("POST", "/api/v1/policy-bindings", {
    policy_id: id,
    node_group_id: groupId,
    priority: 10,
  });
  await measure(
    "snapshot: binding enabled (typed encoded)",
    size,
    () =>
      delivering(admin.request("PUT", `/api/v1/policy-bindings/${binding.json.id}`, { state: "enabled" }), 1),
  );
  await measure(
    "snapshot: priority change (typed cached)",
    size,
    () => delivering(admin.request("PUT", `/api/v1/policy-bindings/${binding.json.id}`, { priority: 20 }), 1),
  );
  const revisionBody = JSON.stringify({ content: postContent.replace('"k3":3', `"k3":${4 + run}`) });
  await measure(
    "revision: save",
    size,
    sendJson("PUT", `/api/v1/policies/all/${id}/revision`, revisionBody),
  );
  await measure(
    "revision: release + snapshot delivered",
    size,
    () => delivering(admin.request("POST", `/api/v1/policies/all/${id}/revision/release`, {}), 1),
  );
  await measure(
    "export: the largest policy (YAML)",
    size,
    () => admin.raw("GET", `/api/v1/policies/export?ids=${id}`),
  );
  // Leave the group empty for the next run (the empty snapshot is one message).
  await delivering(
    admin.request("PUT", `/api/v1/policy-bindings/${binding.json.id}`, { state: "disabled" }),
    1,
  );
}

for (const [label, row] of results) {
  console.log(
    `${label.padEnd(44)} ${(row.size / 1024).toFixed(0).padStart(5)} KiB  worst stall ${
      row.wall.toFixed(1).padStart(6)
    } wall ${row.busy.toFixed(1).padStart(6)} on CPU  request ${
      (row.total / row.count).toFixed(0).padStart(5)
    } ms  HTTP ${row.status}`,
  );
}
stream.close();
agent.close();
await server.stop();
releaseWarmWorker();
if (testDb) await testDb.dispose();
else await db.close();
closeWorkers();
