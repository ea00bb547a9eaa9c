/**
 * Large JSON bodies are parsed and checked, and large answers serialized, in an off-loop worker
 * (server/http/json_body.ts): the answers are the same as on the loop, refusals name the same fields, the
 * answer carries the same headers, and an audited change's answer is serialized after its unit of work ends.
 */
import assert from "node:assert/strict";
import { isDeepStrictEqual } from "node:util";
import { dbTest } from "../helpers/db.ts";
import { createTestServer } from "../helpers/app.ts";
import { domainRoutes } from "../../server/http/routes/mod.ts";
import { systemRoutes } from "../../server/http/routes/system.ts";
import { offLoopHooks, type OffLoopJob } from "../../server/core/offloop.ts";
import { isLargeJson, LARGE_JSON_BYTES } from "../../server/http/json_body.ts";
import { afterCommit } from "../../server/db/db.ts";

/** Firefox content of about `bytes` characters. */
function firefoxContent(bytes: number): string {
  const keys = Math.ceil(bytes / 12);
  return JSON.stringify({
    additional: Object.fromEntries(Array.from({ length: keys }, (_, i) => [`k${i}`, i % 10])),
  });
}

Deno.test("isLargeJson: counts strings, keys and values, and stops early", () => {
  assert.equal(isLargeJson({ a: "x".repeat(100) }), false);
  assert.equal(isLargeJson({ a: "x".repeat(LARGE_JSON_BYTES) }), true);
  assert.equal(
    isLargeJson([{ nested: ["y".repeat(LARGE_JSON_BYTES / 2)] }, "z".repeat(LARGE_JSON_BYTES / 2)]),
    true,
  );
  // Many small members add up.
  assert.equal(
    isLargeJson(Object.fromEntries(Array.from({ length: 8_000 }, (_, i) => [`key${i}`, i]))),
    true,
  );
  assert.equal(isLargeJson(Array.from({ length: 100 }, () => ({ id: 1, name: "n" }))), false);
  assert.equal(isLargeJson(null), false);
  assert.equal(isLargeJson(new Date()), false);
});

dbTest("large bodies and answers take the worker with the same results as small ones", async (db) => {
  const server = await createTestServer({
    db,
    routes: (ctx) => [...systemRoutes(ctx), ...domainRoutes(ctx)],
  });
  const seen: { op: string; unitOpen: boolean }[] = [];
  offLoopHooks.whileInWorker = (job: OffLoopJob) => {
    if (job.op.startsWith("password-")) return Promise.resolve(); // the logins of the test's sessions
    let ranAtOnce = false;
    afterCommit(() => ranAtOnce = true);
    seen.push({ op: job.op, unitOpen: !ranAtOnce });
    return Promise.resolve();
  };
  try {
    const admin = await server.loginAs({ superAdmin: true });
    const content = firefoxContent(200_000);
    const send = (method: string, path: string, body: string) =>
      admin.raw(method, path, { body, contentType: "application/json" });

    // Refusals read the same as for a small body, with the field named.
    const notJson = await send(
      "POST",
      "/api/v1/policies/all",
      `{"name":"x","content":"${"a".repeat(100_000)}`,
    );
    assert.equal(notJson.status, 400, notJson.text);
    assert.equal(notJson.json.error.message, "request body is not valid JSON");
    const surrogate = await send(
      "POST",
      "/api/v1/policies/all",
      JSON.stringify({ name: "x", type: "Firefox", content }).replace('"k1\\"', '"k1\\udc00\\"'),
    );
    assert.equal(surrogate.status, 400, surrogate.text.slice(0, 300));
    assert.deepEqual(surrogate.json.error.fields.map((f: { field: string }) => f.field), ["content"]);
    const unknown = await send(
      "POST",
      "/api/v1/policies/all",
      JSON.stringify({ name: "x", type: "Firefox", content, constructor: "x" }),
    );
    assert.equal(unknown.status, 400, unknown.text.slice(0, 300));
    assert.match(unknown.json.error.message, /constructor/);
    assert.deepEqual(
      seen.map((s) => s.op),
      ["body", "body", "body"],
      "each large body was parsed in the worker",
    );
    seen.length = 0;

    // Accepted: the answer is the record, serialized in the worker after the unit of work ended, with the
    // headers every answer carries.
    const created = await send(
      "POST",
      "/api/v1/policies/all",
      JSON.stringify({ name: "big", type: "Firefox", content }),
    );
    assert.equal(created.status, 201, created.text.slice(0, 300));
    assert.equal(created.headers.get("content-type"), "application/json");
    assert.equal(created.headers.get("x-content-type-options"), "nosniff");
    assert.equal(created.json.name, "big");
    assert.equal(created.json.version, 1);
    // Compared without printing: a failed comparison of 200 KB strings would flood the log.
    const sameContent = (stored: string, sent: string) =>
      isDeepStrictEqual(JSON.parse(stored), JSON.parse(sent));
    assert.ok(sameContent(created.json.content, content), "the content is stored (in canonical form)");
    assert.deepEqual(seen.map((s) => s.op), ["body", "content", "stringify"]);
    assert.ok(seen.every((s) => !s.unitOpen), JSON.stringify(seen));

    const read = await admin.request("GET", `/api/v1/policies/all/${created.json.id}`);
    assert.equal(read.status, 200);
    assert.ok(isDeepStrictEqual(read.json, created.json), "a read answers the same record");

    const edited = content.replace('"k2":2', '"k2":7');
    const put = await send(
      "PUT",
      `/api/v1/policies/all/${created.json.id}`,
      JSON.stringify({ content: edited }),
    );
    assert.equal(put.status, 200, put.text.slice(0, 300));
    assert.equal(put.json.version, 2);
    assert.ok(sameContent(put.json.content, edited), "the edit is stored");
    const after = await admin.request("GET", `/api/v1/policies/all/${created.json.id}`);
    assert.ok(isDeepStrictEqual(after.json, put.json), "the edit's answer is what is stored");

    // A small change of a large policy (name only): the stored content is kept.
    const renamed = await admin.request("PUT", `/api/v1/policies/all/${created.json.id}`, { name: "bigger" });
    assert.equal(renamed.status, 200, renamed.text.slice(0, 300));
    assert.ok(renamed.json.content === put.json.content, "the stored content is kept");
    assert.equal(renamed.json.name, "bigger");

    // A refused change of a large policy answers its error, not a deferred record.
    const conflict = await send(
      "PUT",
      `/api/v1/policies/all/${created.json.id}`,
      JSON.stringify({ content: edited, version: 1 }),
    );
    assert.equal(conflict.status, 409, conflict.text.slice(0, 300));
  } finally {
    offLoopHooks.whileInWorker = undefined;
    await server.close();
  }
});
