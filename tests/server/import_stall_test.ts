/**
 * A large or hostile import never freezes the server: while a bundle is parsed, the same in-process server
 * keeps answering other requests. Checked by order, not by time: a loop of `GET /api/v1/version` requests
 * runs while the import is in flight, and a number of them must complete before the import answers (when the
 * parse blocked the event loop, none could). Inputs: the 289 KB / 30,000-key bundle of the report (accepted),
 * the same with a duplicate key at the end and a ~1 MB bundle with an alias at the end (both parse fully
 * before being refused), and inputs over the pre-parse limits (refused without parsing). The same holds for
 * a ~1 MiB policy created by a plain POST and by a real (not dry-run) import: its content is checked in a
 * worker and stored without being checked again on the loop.
 *
 * Parsing happens before the request's unit of work opens: while the worker parses (a test hook holds the
 * answer until the checks are done), no unit of work is open in the request's context, and on PostgreSQL
 * `pg_stat_activity` shows no connection of the server's database idle in a transaction.
 *
 * Large content through the agents' side too, bounded by time this once: a snapshot of the ~1 MiB policy
 * delivered to an enrolled agent, a revision of it saved and released. Each step's worst stall, counted in the
 * loop thread's own processor time (tests/helpers/stall.ts: a loaded machine's wait for a processor is left
 * out), must stay under half of what the work it used to do on the loop (parse, check or validate the
 * content) costs this same thread, measured just before; a step gets three attempts, since work that holds
 * the loop does so on every one while a garbage collection rarely lands on all. The real numbers are printed
 * by `bench/import_stall.ts`.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, type TestClient, type TestResponse } from "../helpers/app.ts";
import { domainRoutes } from "../../server/http/routes/mod.ts";
import { systemRoutes } from "../../server/http/routes/system.ts";
import { MAX_BUNDLE_BYTES, MAX_BUNDLE_NODES } from "../../server/domain/export_import.ts";
import {
  closeWorkers,
  keepWorkerWarm,
  offLoopHooks,
  type OffLoopJob,
  runOffLoop,
  workerPool,
} from "../../server/core/offloop.ts";
import { afterCommit } from "../../server/db/db.ts";
import { MAX_JSON_BODY } from "../../server/http/route.ts";
import { typedContentFor, validatePolicyContent } from "../../shared/policy_types/mod.ts";
import { checkContent } from "../../server/domain/bundle_codec.ts";
import { createGroup, enrollAgent, startAgentServer, subscribe } from "../helpers/agents.ts";
import { typedContentCacheStats } from "../../server/hub/typed_content_cache.ts";
import { countingStream, cpuTime, idleStall, leastStall } from "../helpers/stall.ts";

/** Requests that must complete while the import is still in flight. */
const CONCURRENT_ANSWERS = 5;

/** A Firefox policy with `keys` extra settings, one per line (block) or all on one line (flow). */
function bigPolicy(
  keys: number,
  options: { width?: number; tail?: string; flow?: boolean } = {},
): string {
  const lines = [
    "apiVersion: svc.dev/v1",
    "kind: Policy",
    "metadata:",
    "  name: big",
    "spec:",
    "  type: Firefox",
    "  content:",
    "    additional:",
  ];
  const width = options.width ?? 1;
  const key = (i: number) => `k${String(i).padStart(width, "0")}: ${i % 10}`;
  if (options.flow) lines.push(`      {${Array.from({ length: keys }, (_, i) => key(i)).join(", ")}}`);
  else for (let i = 0; i < keys; i++) lines.push(`      ${key(i)}`);
  return lines.join("\n") + "\n" + (options.tail ?? "");
}

/**
 * Sends the import, then `GET /api/v1/version` one after another until the import answers; returns the
 * import's response and how many GETs completed before it.
 */
function importWhileAsking(
  client: TestClient,
  anonymous: TestClient,
  text: string,
  dryRun = true,
): Promise<{ res: TestResponse; answered: number }> {
  return whileAsking(
    anonymous,
    client.raw("POST", `/api/v1/policies/import?dry_run=${dryRun}`, {
      body: text,
      contentType: "application/yaml",
    }),
  );
}

/** Asks `GET /api/v1/version` one after another until `request` answers; counts the answers before it. */
async function whileAsking(
  anonymous: TestClient,
  request: Promise<TestResponse>,
): Promise<{ res: TestResponse; answered: number }> {
  let done = false;
  const importing = request.finally(() => done = true);
  let answered = 0;
  while (!done) {
    const res = await anonymous.request("GET", "/api/v1/version");
    assert.equal(res.status, 200);
    if (!done) answered++;
    // An in-process request can settle on microtasks alone; give timers and worker messages their turn.
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  return { res: await importing, answered };
}

/**
 * A dbTest against a test server with the system and domain routes, as a Super Admin (`admin`) and without a
 * session (`anonymous`); the server is closed after.
 */
function importTest(
  name: string,
  fn: (clients: { admin: TestClient; anonymous: TestClient }) => Promise<void>,
): void {
  dbTest(name, async (db) => {
    const server = await createTestServer({
      db,
      routes: (ctx) => [...systemRoutes(ctx), ...domainRoutes(ctx)],
    });
    try {
      await fn({ admin: await server.loginAs({ superAdmin: true }), anonymous: server.anonymous() });
    } finally {
      await server.close();
    }
  });
}

importTest(
  "an import never holds up other requests, however large or hostile",
  async ({ admin, anonymous }) => {
    const accepted = bigPolicy(30_000, { flow: true });
    assert.ok(accepted.length > 280_000 && accepted.length < 330_000, `${accepted.length} bytes`);
    const ok = await importWhileAsking(admin, anonymous, accepted);
    assert.equal(ok.res.status, 200, ok.res.text);
    assert.equal(ok.res.json.created, 1);
    assert.ok(ok.answered >= CONCURRENT_ANSWERS, `only ${ok.answered} requests answered during the import`);

    const duplicate = await importWhileAsking(
      admin,
      anonymous,
      bigPolicy(30_000, { flow: true, tail: "kind: Policy\n" }),
    );
    assert.equal(duplicate.res.status, 422, duplicate.res.text);
    assert.match(duplicate.res.json.error.message, /keys must be unique; "kind" appears twice/);
    assert.ok(
      duplicate.answered >= CONCURRENT_ANSWERS,
      `only ${duplicate.answered} requests answered while a 30,000-key bundle was parsed`,
    );

    const megabyte = bigPolicy(48_000, { width: 9, tail: "x: *anchor\n" });
    assert.ok(megabyte.length > 900_000 && megabyte.length <= MAX_BUNDLE_BYTES, `${megabyte.length} bytes`);
    const alias = await importWhileAsking(admin, anonymous, megabyte);
    assert.equal(alias.res.status, 422, alias.res.text);
    assert.match(alias.res.json.error.message, /YAML syntax error|aliases are not allowed/);
    assert.ok(
      alias.answered >= CONCURRENT_ANSWERS,
      `only ${alias.answered} requests answered while a 1 MB bundle was parsed`,
    );
  },
);

importTest(
  "bundles over the pre-parse limits are refused before parsing, naming the limit",
  async ({ admin }) => {
    const flow = `a: [${"1,".repeat(MAX_BUNDLE_NODES + 10)}1]\n`;
    const lines = "- 1\n".repeat(MAX_BUNDLE_NODES + 10);
    for (const text of [flow, lines]) {
      assert.ok(text.length <= MAX_BUNDLE_BYTES, `${text.length} bytes`);
      const res = await admin.raw("POST", "/api/v1/policies/import", {
        body: text,
        contentType: "application/yaml",
      });
      assert.equal(res.status, 422, res.text);
      assert.match(res.json.error.message, new RegExp(`keys and items; the limit is ${MAX_BUNDLE_NODES}`));
    }
    const tooBig = bigPolicy(100, { tail: "#".repeat(MAX_BUNDLE_BYTES) + "\n" });
    const res = await admin.raw("POST", "/api/v1/policies/import", {
      body: tooBig,
      contentType: "application/yaml",
    });
    assert.ok(res.status === 413 || res.status === 422, `${res.status} ${res.text}`);
  },
);

/** The largest Firefox content (as JSON text) whose POST body still fits in the JSON body limit. */
function largestPostContent(): string {
  const content = (keys: number) =>
    JSON.stringify({
      additional: Object.fromEntries(Array.from({ length: keys }, (_, i) => [`k${i}`, i % 10])),
    });
  let keys = 100_000;
  while (
    JSON.stringify({ name: "x".repeat(40), type: "Firefox", content: content(keys) }).length > MAX_JSON_BODY
  ) keys -= 1_000;
  return content(keys);
}

importTest(
  "a ~1 MiB policy created by POST or by import never holds up other requests",
  async ({ admin, anonymous }) => {
    const content = largestPostContent();
    assert.ok(content.length > 800_000, `${content.length} characters`);
    const posted = await whileAsking(
      anonymous,
      admin.request("POST", "/api/v1/policies/all", { name: "posted", type: "Firefox", content }),
    );
    assert.equal(posted.res.status, 201, posted.res.text.slice(0, 300));
    assert.equal(posted.res.json.content.length, content.length, "stored whole (in canonical form)");
    assert.ok(
      posted.answered >= CONCURRENT_ANSWERS,
      `only ${posted.answered} requests answered while a 1 MiB policy was created`,
    );

    // Invalid large content is refused with the field named, after a check in the worker.
    const bad = content.replace('"k1":1', '"k1":"a\\u0007b"');
    const refused = await admin.request("POST", "/api/v1/policies/all", {
      name: "bad",
      type: "Firefox",
      content: bad,
    });
    assert.equal(refused.status, 422, refused.text.slice(0, 300));
    assert.match(refused.json.error.message, /content\.additional\.k1/);

    // PUT of large content to a draft: checked in the worker, stored.
    const edited = content.replace('"k2":2', '"k2":3');
    const put = await whileAsking(
      anonymous,
      admin.request("PUT", `/api/v1/policies/all/${posted.res.json.id}`, { content: edited }),
    );
    assert.equal(put.res.status, 200, put.res.text.slice(0, 300));
    assert.equal(put.res.json.version, 2);
    assert.match(put.res.json.content, /"k2":3/);
    assert.ok(put.answered >= CONCURRENT_ANSWERS, `only ${put.answered} requests answered during the edit`);

    // Releasing it checks the content again: in the worker, before the unit of work opens.
    const released = await whileAsking(
      anonymous,
      admin.request("PUT", `/api/v1/policies/all/${posted.res.json.id}/state`, { state: "released" }),
    );
    assert.equal(released.res.status, 200, released.res.text.slice(0, 300));
    assert.equal(released.res.json.state, "released");
    assert.ok(
      released.answered >= CONCURRENT_ANSWERS,
      `only ${released.answered} requests answered during the release`,
    );

    const largest = bigPolicy(90_000, { flow: true });
    let keys = 90_000;
    let text = largest;
    while (new TextEncoder().encode(text).length > MAX_BUNDLE_BYTES) {
      keys -= 2_000;
      text = bigPolicy(keys, { flow: true });
    }
    const imported = await importWhileAsking(admin, anonymous, text, false);
    assert.equal(imported.res.status, 200, imported.res.text.slice(0, 300));
    assert.equal(imported.res.json.created, 1);
    assert.ok(
      imported.answered >= CONCURRENT_ANSWERS,
      `only ${imported.answered} requests answered while a 1 MiB policy was imported`,
    );
    const stored = await admin.request("GET", "/api/v1/policies/all?name=big");
    assert.equal(stored.json.items.length, 1);
  },
);

dbTest("no transaction is open while the worker parses an import or checks large content", async (
  db,
  _t,
  info,
) => {
  const server = await createTestServer({
    db,
    routes: (ctx) => [...systemRoutes(ctx), ...domainRoutes(ctx)],
  });
  // On PostgreSQL, a connection of our own looks at the server's connections.
  const observer = info.driver === "postgres"
    ? postgres(info.url, { max: 1, onnotice: () => {} })
    : undefined;
  const idleInTransaction = async () => {
    const [row] = await observer!.unsafe(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'`,
    );
    return row.n as number;
  };
  const seen: { op: string; unitOpen: boolean; idleInTransaction?: number }[] = [];
  offLoopHooks.whileInWorker = async (job: OffLoopJob) => {
    if (job.op.startsWith("password-")) return; // the logins of the test's sessions
    // afterCommit runs its callback at once when no unit of work is open in this (the request's) context.
    let ranAtOnce = false;
    afterCommit(() => ranAtOnce = true);
    seen.push({
      op: job.op,
      unitOpen: !ranAtOnce,
      idleInTransaction: observer ? await idleInTransaction() : undefined,
    });
  };
  try {
    const admin = await server.loginAs({ superAdmin: true });
    if (observer) {
      // The observation can see a transaction left open (so the checks below can fail).
      let release = () => {};
      const held = db.transaction(async (tx) => {
        await tx.query("SELECT 1");
        await new Promise<void>((resolve) => release = resolve);
      });
      const deadline = Date.now() + 60_000;
      while ((await idleInTransaction()) === 0) {
        assert.ok(Date.now() < deadline, "an open transaction never showed in pg_stat_activity");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      release();
      await held;
    }

    const imported = await admin.raw("POST", "/api/v1/policies/import", {
      body: bigPolicy(30_000, { flow: true }),
      contentType: "application/yaml",
    });
    assert.equal(imported.status, 200, imported.text.slice(0, 300));
    const content = largestPostContent();
    const posted = await admin.request("POST", "/api/v1/policies/all", {
      name: "posted",
      type: "Firefox",
      content,
    });
    assert.equal(posted.status, 201, posted.text.slice(0, 300));

    // The POST's body is parsed, its content checked and its answer serialized in the worker.
    assert.deepEqual(seen.map((s) => s.op), ["check", "body", "content", "stringify"]);
    for (const s of seen) {
      assert.equal(s.unitOpen, false, `a unit of work was open while the worker ran ${s.op}`);
      if (observer) {
        assert.equal(s.idleInTransaction, 0, `a connection sat idle in a transaction during ${s.op}`);
      }
    }
  } finally {
    offLoopHooks.whileInWorker = undefined;
    await observer?.end();
    await server.close();
  }
});

dbTest(
  "large policy content never holds the loop for long: snapshot delivery, revision save and release",
  async (
    db,
  ) => {
    const server = await startAgentServer(db, {
      routes: (ctx) => [...systemRoutes(ctx), ...domainRoutes(ctx)],
      logLevel: "error",
    });
    const groupId = await createGroup(db, "stall");
    const agent = await enrollAgent(server, { name: "stall-agent", groupId });
    const stream = countingStream(server, agent);
    try {
      const admin = await server.test.loginAs({ superAdmin: true });
      await stream.waitFor(1);
      const content = largestPostContent();
      // The yardstick of each step: half of what the work it used to do on the loop costs this thread (the
      // best of three runs, warm like the server's code): parsing the content for the stream's typed member,
      // checking it (parse, semantic checks, canonical form) before storing it, validating it before a release.
      const cost = (work: () => unknown) => Math.min(...[0, 1, 2].map(() => cpuTime(work)));
      const parseMs = cost(() => typedContentFor("Firefox", content));
      const checkMs = cost(() => checkContent("Firefox", content));
      const validateMs = cost(() => validatePolicyContent("Firefox", content));
      const idle = await idleStall(1_000);
      const context = (what: string, ms: number) =>
        `bound ${(ms / 2).toFixed(0)} ms = half of ${what} on this thread (${ms.toFixed(0)} ms); idle loop: ${
          idle.busyMs.toFixed(0)
        } ms on CPU, ${idle.wallMs.toFixed(0)} ms by the clock`;

      const created = await admin.request("POST", "/api/v1/policies/all", {
        name: "large",
        type: "Firefox",
        content,
      });
      assert.equal(created.status, 201, created.text.slice(0, 300));
      const id = created.json.id as string;
      const released = await admin.request("PUT", `/api/v1/policies/all/${id}/state`, { state: "released" });
      assert.equal(released.status, 200, released.text.slice(0, 300));
      const binding = await admin.request("POST", "/api/v1/policy-bindings", {
        policy_id: id,
        node_group_id: groupId,
        priority: 1,
      });
      assert.equal(binding.status, 201, binding.text.slice(0, 300));
      const enabled = await admin.request("PUT", `/api/v1/policy-bindings/${binding.json.id}`, {
        state: "enabled",
      });
      assert.equal(enabled.status, 200, enabled.text.slice(0, 300));
      await stream.waitFor(2);

      // A snapshot with the large policy (typed content encoded once, off the loop), sent on every change.
      const { encodings, contentReads } = typedContentCacheStats();
      const delivered = await leastStall({
        boundMs: parseMs / 2,
        step: async (attempt) => {
          const before = stream.count();
          const res = await admin.request("PUT", `/api/v1/policy-bindings/${binding.json.id}`, {
            priority: 10 + attempt,
          });
          assert.equal(res.status, 200, res.text.slice(0, 300));
          await stream.waitFor(before + 1);
        },
      });
      const parsing = context("parsing the content", parseMs);
      assert.ok(delivered.passed, `snapshot delivery held the loop: ${delivered.stalls}; ${parsing}`);
      assert.equal(typedContentCacheStats().encodings, encodings, "the unchanged content was encoded again");
      assert.equal(
        typedContentCacheStats().contentReads,
        contentReads,
        "a snapshot of cached content read the content (its digest says it is unchanged)",
      );

      // What the agent receives decodes to the typed member the worker encoded (a reading agent this time).
      const reader = subscribe(agent.policy);
      try {
        const [policy] = (await reader.nextSnapshot(120_000)).policies;
        assert.equal(policy?.typedContent.case, "firefoxPolicy");
        const additional = (policy.typedContent.value as { additional: Record<string, unknown> }).additional;
        assert.equal(Object.keys(additional).length, Object.keys(JSON.parse(content).additional).length);
      } finally {
        reader.cancel();
      }

      const variant = (n: number) => content.replace('"k1":1', `"k1":${n}`);
      const saved = await leastStall({
        boundMs: checkMs / 2,
        step: async (attempt) => {
          const res = await admin.request("PUT", `/api/v1/policies/all/${id}/revision`, {
            content: variant(2 + attempt),
          });
          assert.equal(res.status, 200, res.text.slice(0, 300));
        },
      });
      const checking = context("checking the content", checkMs);
      assert.ok(saved.passed, `saving a revision held the loop: ${saved.stalls}; ${checking}`);

      const releasedRevision = await leastStall({
        boundMs: validateMs / 2,
        before: async (attempt) => {
          if (attempt === 0) return;
          const res = await admin.request("PUT", `/api/v1/policies/all/${id}/revision`, {
            content: variant(5 + attempt),
          });
          assert.equal(res.status, 200, res.text.slice(0, 300));
        },
        step: async () => {
          const before = stream.count();
          const res = await admin.request("POST", `/api/v1/policies/all/${id}/revision/release`, {});
          assert.equal(res.status, 200, res.text.slice(0, 300));
          await stream.waitFor(before + 1);
        },
      });
      const validating = context("validating the content", validateMs);
      assert.ok(
        releasedRevision.passed,
        `releasing a revision (and delivering it) held the loop: ${releasedRevision.stalls}; ${validating}`,
      );
      // A new content of the same large policy reaches the agent (the cache goes by the content's digest).
      const last = await admin.request("PUT", `/api/v1/policies/all/${id}/revision`, {
        content: variant(42),
      });
      assert.equal(last.status, 200, last.text.slice(0, 300));
      const latest = await admin.request("POST", `/api/v1/policies/all/${id}/revision/release`, {});
      assert.equal(latest.status, 200, latest.text.slice(0, 300));
      const newReader = subscribe(agent.policy);
      try {
        const [policy] = (await newReader.nextSnapshot(120_000)).policies;
        assert.ok(policy, "the snapshot holds the policy");
        assert.equal(policy.typedContent.case, "firefoxPolicy");
        const typed =
          (policy.typedContent.value as { additional: Record<string, { kind: { value: unknown } }> })
            .additional;
        assert.equal(typed.k1?.kind.value, 42, "the typed member is the released revision's");
        assert.equal(JSON.parse(policy.content).additional.k1, 42);
      } finally {
        newReader.cancel();
      }
      // The numbers, for whoever reads the test output (bench/import_stall.ts prints them for every phase).
      console.log(
        `worst stalls: snapshot ${delivered.stalls} (${parsing}); revision save ${saved.stalls} (${checking}); ` +
          `revision release ${releasedRevision.stalls} (${validating})`,
      );
    } finally {
      stream.close();
      agent.close();
      await server.stop();
    }
  },
);

// `new Worker` holds the starting thread for 100–160 ms on a loaded machine: a server starts its worker at
// start and keeps it (no idle deadline) across jobs, so no request pays for it; at stop the worker goes.
Deno.test("a server keeps one off-loop worker warm from start to stop", async () => {
  // Workers left idle by this file's earlier tests stay for WORKER_IDLE_MS; they are not this server's.
  closeWorkers();
  assert.deepEqual(workerPool(), { idle: 0, warm: 0 });
  const release = keepWorkerWarm();
  try {
    assert.deepEqual(workerPool(), { idle: 1, warm: 1 }, "the worker starts with the server");
    // An unknown type answers null: the job only has to run in a worker.
    const typed = { op: "members", type: "no-such-type", content: "{}" } as const;
    await runOffLoop(typed);
    await Promise.all([runOffLoop(typed), runOffLoop(typed)]);
    const pool = workerPool();
    assert.equal(
      pool.warm,
      1,
      "after jobs (some on a second worker) one worker still waits without deadline",
    );
    assert.ok(pool.idle >= 1);
  } finally {
    release();
  }
  assert.deepEqual(workerPool(), { idle: 0, warm: 0 }, "a stopped server leaves no worker running");
});
