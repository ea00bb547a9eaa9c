/**
 * Node groups over HTTP: CRUD, members, delete refused while bindings or members remain unless forced, and
 * one-time enrollment tokens (plaintext once, only the SHA-256 stored, 5 minutes).
 */
import assert from "node:assert/strict";
import { expectStatus } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

domain.domainTest("node groups: CRUD, members and guarded delete", async ({ db, admin }, t) => {
  const group = await domain.createGroup(admin, "classroom");

  await t.step("create, read, rename; names are unique and free of control characters", async () => {
    const read = expectStatus(await admin.request("GET", `/api/v1/node-groups/${group}`), 200);
    assert.deepEqual([read.name, read.node_count, read.bindings_count], ["classroom", 0, 0]);
    const renamed = expectStatus(
      await admin.request("PUT", `/api/v1/node-groups/${group}`, {
        name: "room-1",
        description: "first floor",
      }),
      200,
    );
    assert.equal(renamed.name, "room-1");
    await domain.createGroup(admin, "room-2");
    const dup = expectStatus(
      await admin.request("PUT", `/api/v1/node-groups/${group}`, { name: "room-2" }),
      409,
    );
    assert.match(dup.error.message, /a node group named "room-2" already exists/);
    const bad = expectStatus(await admin.request("POST", "/api/v1/node-groups", { name: "x\u0000y" }), 400);
    assert.equal(bad.error.fields[0].field, "name");
  });

  const node1 = await domain.seedNode(db, { name: "pc-1" });
  const node2 = await domain.seedNode(db, { name: "pc-2" });

  await t.step("members: add (idempotent), list, unknown nodes refused, remove", async () => {
    const added = expectStatus(
      await admin.request("POST", `/api/v1/node-groups/${group}/members`, { node_ids: [node1, node2] }),
      200,
    );
    assert.deepEqual([...added.added].sort(), [node1, node2].sort());
    const again = expectStatus(
      await admin.request("POST", `/api/v1/node-groups/${group}/members`, { node_ids: [node1] }),
      200,
    );
    assert.deepEqual(again.added, []);
    const missing = crypto.randomUUID();
    const refused = expectStatus(
      await admin.request("POST", `/api/v1/node-groups/${group}/members`, { node_ids: [node1, missing] }),
      422,
    );
    assert.equal(refused.error.fields[0].field, "node_ids[1]");
    const members = expectStatus(await admin.request("GET", `/api/v1/node-groups/${group}/members`), 200);
    assert.deepEqual(members.items.map((m: { name: string }) => m.name), ["pc-1", "pc-2"]);
    expectStatus(await admin.request("DELETE", `/api/v1/node-groups/${group}/members/${node2}`), 204);
    expectStatus(await admin.request("DELETE", `/api/v1/node-groups/${group}/members/${node2}`), 404);
    const list = expectStatus(await admin.request("GET", "/api/v1/node-groups?sort=name"), 200);
    assert.deepEqual(list.items.map((g: { name: string; node_count: number }) => [g.name, g.node_count]), [
      ["room-1", 1],
      ["room-2", 0],
    ]);
  });

  await t.step("delete is refused while members or bindings remain, unless forced", async () => {
    const refused = expectStatus(await admin.request("DELETE", `/api/v1/node-groups/${group}`), 409);
    assert.match(refused.error.message, /still has 0 binding\(s\) and 1 member\(s\).*force=true/);
    expectStatus(await admin.request("DELETE", `/api/v1/node-groups/${group}/members/${node1}`), 204);
    const policy = await domain.createPolicy(admin, { name: "p" });
    await domain.bind(admin, policy.id, group);
    assert.match(
      expectStatus(await admin.request("DELETE", `/api/v1/node-groups/${group}`), 409).error.message,
      /1 binding\(s\) and 0 member\(s\)/,
    );
    expectStatus(await admin.request("DELETE", `/api/v1/node-groups/${group}?force=true`), 204);
    expectStatus(await admin.request("GET", `/api/v1/node-groups/${group}`), 404);
    const bindings = await db.query("SELECT 1 FROM policy_bindings WHERE node_group_id = $1", [group]);
    assert.equal(bindings.length, 0);
    const nodes = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM nodes");
    assert.equal(nodes[0].n, 2, "nodes outlive their group");
  });

  await t.step("an empty group deletes without force", async () => {
    const empty = await domain.createGroup(admin, "empty");
    expectStatus(await admin.request("DELETE", `/api/v1/node-groups/${empty}`), 204);
  });
});

domain.domainTest(
  "enrollment tokens: plaintext once, only the SHA-256 stored, valid 5 minutes",
  async ({ db, server, admin }, t) => {
    const group = await domain.createGroup(admin, "new-machines");

    await t.step("a token is 32 random bytes base64url, returned once with its expiry", async () => {
      const before = Date.now();
      const res = await admin.request("POST", `/api/v1/node-groups/${group}/tokens`);
      const token = expectStatus(res, 201);
      assert.equal(res.headers.get("cache-control"), "no-store");
      assert.match(token.token, /^[A-Za-z0-9_-]{43}$/);
      assert.equal(token.node_group_id, group);
      const expires = Date.parse(token.expires_at);
      assert.ok(expires >= before + 5 * 60_000 - 1000 && expires <= Date.now() + 5 * 60_000 + 1000);

      const rows = await db.query<{ token_hash: string; node_group_id: string; expires_at: Date }>(
        "SELECT token_hash, node_group_id, expires_at FROM enrollment_tokens",
      );
      assert.equal(rows.length, 1);
      assert.equal(rows[0].token_hash, await sha256Hex(token.token));
      assert.equal(rows[0].expires_at.getTime(), expires);
      const dump = JSON.stringify(await db.query("SELECT * FROM enrollment_tokens"));
      assert.ok(!dump.includes(token.token), "the plaintext is not stored");
      const audit = JSON.stringify(await db.query("SELECT * FROM audit_logs"));
      assert.ok(!audit.includes(token.token), "the plaintext is not audited");

      const second = expectStatus(await admin.request("POST", `/api/v1/node-groups/${group}/tokens`), 201);
      assert.notEqual(second.token, token.token);
    });

    await t.step("expired tokens are purged when a new one is created", async () => {
      await db.query("UPDATE enrollment_tokens SET expires_at = now() - interval '1 minute'");
      expectStatus(await admin.request("POST", `/api/v1/node-groups/${group}/tokens`), 201);
      const rows = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM enrollment_tokens");
      assert.equal(rows[0].n, 1);
    });

    await t.step("the group must exist; node_group:create is required", async () => {
      expectStatus(await admin.request("POST", `/api/v1/node-groups/${crypto.randomUUID()}/tokens`), 404);
      const viewer = await server.loginAs({ permissions: ["node_group:view", "node_group:edit"] });
      expectStatus(await viewer.request("POST", `/api/v1/node-groups/${group}/tokens`), 403);
    });
  },
);
