/**
 * A large or hostile import never freezes the server: while a bundle is parsed, the same in-process server
 * keeps answering other requests. Checked by order, not by time: a loop of `GET /api/v1/version` requests
 * runs while the import is in flight, and a number of them must complete before the import answers (when the
 * parse blocked the event loop, none could). Inputs: the 289 KB / 30,000-key bundle of the report (accepted),
 * the same with a duplicate key at the end and a ~1 MB bundle with an alias at the end (both parse fully
 * before being refused), and inputs over the pre-parse limits (refused without parsing).
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { createTestServer, type TestClient, type TestResponse } from "../helpers/app.ts";
import { domainRoutes } from "../../server/http/routes/mod.ts";
import { systemRoutes } from "../../server/http/system_routes.ts";
import { MAX_BUNDLE_BYTES, MAX_BUNDLE_NODES } from "../../server/domain/export_import.ts";

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
async function importWhileAsking(
  client: TestClient,
  anonymous: TestClient,
  text: string,
): Promise<{ res: TestResponse; answered: number }> {
  let done = false;
  const importing = client.raw("POST", "/api/v1/policies/import?dry_run=true", {
    body: text,
    contentType: "application/yaml",
  }).finally(() => done = true);
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

dbTest("an import never holds up other requests, however large or hostile", async (db) => {
  const server = await createTestServer({
    db,
    routes: (ctx) => [...systemRoutes(ctx), ...domainRoutes(ctx)],
  });
  try {
    const admin = await server.loginAs({ superAdmin: true });
    const anonymous = server.anonymous();

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
  } finally {
    await server.close();
  }
});

dbTest("bundles over the pre-parse limits are refused before parsing, naming the limit", async (db) => {
  const server = await createTestServer({
    db,
    routes: (ctx) => [...systemRoutes(ctx), ...domainRoutes(ctx)],
  });
  try {
    const admin = await server.loginAs({ superAdmin: true });
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
  } finally {
    await server.close();
  }
});
