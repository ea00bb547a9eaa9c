/**
 * Fuzzing every REST operation of the OpenAPI document as the Super Admin (with CSRF): hostile bodies, query
 * strings and path values generated with fast-check from the declared schemas, plus fixed examples (lone
 * surrogates and NUL in every string field, prototype keys, 30-deep nesting, huge strings). Every answer must
 * be below 500 with a JSON error body when it is an error; a mutating request that changed any table must
 * have left a success audit row, a refused one must have changed nothing; and the server must keep answering.
 *
 * Bounded by run count, not time: SVC_FUZZ_RUNS random requests per operation (default 1) on top of the fixed
 * examples, seeded by SVC_FUZZ_SEED (default fixed). `SVC_FUZZ_RUNS=200 deno test -A
 * tests/server/fuzz_routes_test.ts` is the long local mode; a failure prints the seed and the request.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, type TestClient } from "../helpers/app.ts";
import { buildRoutes } from "../../server/http/routes/mod.ts";
import type { Db } from "../../server/db/db.ts";
import {
  fixedExamples,
  type FuzzOperation,
  type FuzzRequest,
  operationsOf,
  requestArbitrary,
  urlOf,
} from "../helpers/openapi_fuzz.ts";

const RUNS = Number(Deno.env.get("SVC_FUZZ_RUNS") ?? "1");
const SEED = Number(Deno.env.get("SVC_FUZZ_SEED") ?? "20211121");

/**
 * Tables whose content is request bookkeeping rather than a change someone made: the audit trail and its
 * summaries, sessions, login throttling, the hub's revision log and replica heartbeats.
 */
const BOOKKEEPING =
  /^(audit_.*|schema_migrations|refresh_tokens|hub_state|hub_events|server_replicas|node_streams)$|login|attempt|throttle|rate_limit/;

/** Session-ending calls would only log the fuzzer out; they are exercised by the auth tests. */
const SKIPPED = new Set([
  "POST /api/v1/auth/logout",
  "POST /api/v1/auth/refresh",
  "POST /api/v1/auth/password",
  "PUT /api/v1/auth/password",
  // An endless stream with no input beyond the session (tests/server/live_events_test.ts covers it).
  "GET /api/v1/events",
]);

/** A content hash per table (row count and digest of every row). */
async function changeMarker(db: Db, tables: string[]): Promise<Map<string, string>> {
  const parts = tables.map((t) =>
    `(SELECT count(*) || ':' || md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM "${t}" x)`
  );
  const [row] = await db.query<{ m: string }>(`SELECT concat_ws('|', ${parts.join(", ")}) AS m`);
  const values = row.m.split("|");
  return new Map(tables.map((t, i) => [t, values[i]]));
}

/** The tables whose content differs between two markers. */
function changedTables(before: Map<string, string>, after: Map<string, string>): string[] {
  return [...after].filter(([t, v]) => before.get(t) !== v).map(([t]) => t);
}

async function auditRowsSince(db: Db, id: number) {
  return await db.query<{ id: number; outcome: string }>(
    "SELECT id, outcome FROM audit_logs WHERE id > $1 ORDER BY id",
    [id],
  );
}

async function lastAuditId(db: Db): Promise<number> {
  const [row] = await db.query<{ id: number }>("SELECT coalesce(max(id), 0)::int AS id FROM audit_logs");
  return row.id;
}

function describe(op: FuzzOperation, req: FuzzRequest): string {
  const body = req.body
    ? ` body(${req.body.contentType}) ${JSON.stringify(req.body.text.slice(0, 300))}`
    : "";
  return `${op.method} ${JSON.stringify(urlOf(op, req).slice(0, 300))}${body}`;
}

dbTest("fuzz: every REST operation survives hostile input without 5xx or unaudited changes", async (db) => {
  // A key-encryption key, so the escrow routes run instead of answering that none is configured.
  const kekDir = await Deno.makeTempDir({ prefix: "svc-fuzz-kek-" });
  const server = await createTestServer({
    db,
    logLevel: "error",
    routes: (ctx, identity) => buildRoutes(ctx, identity),
    config: { diskEncryption: { kekFile: `${kekDir}/kek`, createKekFile: true } },
  });
  try {
    const admin = await server.loginAs({ superAdmin: true, username: "fuzz-admin" });
    const doc = await admin.request("GET", "/api/v1/openapi.json");
    assert.equal(doc.status, 200);
    const ops = operationsOf(doc.json).filter((op) => !SKIPPED.has(op.key));
    assert.ok(ops.length > 30, `only ${ops.length} operations in the document`);
    const ids = await seed(admin);
    const tables = (await db.query<{ t: string }>(
      "SELECT table_name AS t FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1",
    )).map((r) => r.t).filter((t) => !BOOKKEEPING.test(t));

    let requests = 0;
    const timings: [string, number][] = [];
    for (const [index, op] of ops.entries()) {
      const started = performance.now();
      const check = async (req: FuzzRequest) => {
        requests++;
        const mutating = op.method !== "GET";
        const before = mutating ? await changeMarker(db, tables) : new Map<string, string>();
        const auditBefore = mutating ? await lastAuditId(db) : 0;
        const res = await admin.raw(op.method, urlOf(op, req), {
          ...(req.body ? { body: req.body.text, contentType: req.body.contentType } : {}),
        });
        const what = `${describe(op, req)} → ${res.status} ${res.text.slice(0, 300)}`;
        assert.ok(res.status < 500, `server error: ${what}`);
        if (res.status >= 400) {
          assert.match(
            res.headers.get("content-type") ?? "",
            /application\/json/,
            `error without JSON: ${what}`,
          );
          assert.equal(typeof res.json?.error?.code, "string", `error body without code: ${what}`);
          assert.equal(typeof res.json?.error?.message, "string", `error body without message: ${what}`);
        }
        if (!mutating) return;
        const changed = changedTables(before, await changeMarker(db, tables));
        const rows = await auditRowsSince(db, auditBefore);
        if (changed.length > 0) {
          assert.ok(res.status < 400, `a refused request changed ${changed.join(", ")}: ${what}`);
          assert.ok(
            rows.some((r) => r.outcome === "success"),
            `a change of ${changed.join(", ")} without a success audit row: ${what}`,
          );
        }
        if (op.audited && res.status < 400) {
          assert.ok(rows.some((r) => r.outcome === "success"), `an audited success left no row: ${what}`);
        }
      };
      const examples = fixedExamples(op, ids).map((r): [FuzzRequest] => [r]);
      // fast-check counts the examples within numRuns.
      await fc.assert(fc.asyncProperty(requestArbitrary(op, ids), check), {
        seed: SEED + index,
        numRuns: examples.length + RUNS,
        examples,
        endOnFailure: true,
      });
      timings.push([op.key, performance.now() - started]);
      const alive = await admin.request("GET", "/api/v1/auth/me");
      assert.equal(alive.status, 200, `the server stopped answering after ${op.key}`);
    }
    assert.ok(requests >= ops.length, `${requests} requests`);
    console.log(`fuzz: ${requests} requests over ${ops.length} operations`);
    console.log(
      timings.sort((a, b) => b[1] - a[1]).slice(0, 8).map(([k, ms]) => `${k} ${Math.round(ms)}ms`).join("\n"),
    );
  } finally {
    await server.close();
    await Deno.remove(kekDir, { recursive: true });
  }
});

/** A few resources for path parameters to hit; returns their ids (never the fuzzer's own user). */
async function seed(admin: TestClient): Promise<string[]> {
  const ids: string[] = [];
  for (
    const [path, body] of [
      ["/api/v1/node-groups", { name: "fuzz-nodes" }],
      ["/api/v1/user-groups", { name: "fuzz-people" }],
      ["/api/v1/roles", { name: "fuzz-role", permissions: ["policy:view"] }],
      ["/api/v1/users", { username: "fuzz-target", password: "correct-horse-battery-staple-9" }],
    ] as const
  ) {
    const res = await admin.request("POST", path, body);
    assert.equal(res.status, 201, `${path}: ${res.text}`);
    ids.push(res.json.id);
  }
  return ids;
}
