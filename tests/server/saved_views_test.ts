/**
 * Saved views over HTTP: a person saves, lists, renames and deletes named list queries (paging dropped,
 * parameters in a stable order); names are unique per person and list; another person can neither see,
 * rename nor delete them (404, as for a view that does not exist); bad input names the field.
 */
import assert from "node:assert/strict";
import { dbTest } from "../helpers/db.ts";
import { domainServer, expectStatus } from "./domain_helpers.ts";

dbTest("saved views belong to their owner and follow them, not the browser", async (db, t) => {
  const { server, admin } = await domainServer(db);
  try {
    const alice = await server.loginAs({ permissions: ["node:view"], username: "alice" });
    const bob = await server.loginAs({ permissions: ["node:view"], username: "bob" });
    let id = "";

    await t.step("save: paging is dropped and parameters are ordered", async () => {
      const view = expectStatus(
        await alice.request("POST", "/api/v1/saved-views", {
          list: "nodes",
          name: "Offline lab",
          query: "status=offline&page=3&group=abc&sort=name&order=desc&per_page=50&cursor=9",
        }),
        201,
      );
      id = view.id;
      assert.equal(view.query, "group=abc&order=desc&sort=name&status=offline");
      const [row] = await db.query<{ resource_name: string; action: string }>(
        "SELECT resource_name, action FROM audit_logs WHERE resource_type = 'saved_view'",
      );
      assert.deepEqual(row, { resource_name: "nodes: Offline lab", action: "create" });
    });

    await t.step("listing shows the owner's views of that list only", async () => {
      const mine = expectStatus(await alice.request("GET", "/api/v1/saved-views?list=nodes"), 200).items;
      assert.deepEqual(mine.map((v: { name: string }) => v.name), ["Offline lab"]);
      assert.deepEqual(
        expectStatus(await alice.request("GET", "/api/v1/saved-views?list=policies"), 200).items,
        [],
      );
      assert.deepEqual(
        expectStatus(await bob.request("GET", "/api/v1/saved-views?list=nodes"), 200).items,
        [],
      );
    });

    await t.step("another user cannot rename or delete it: 404, and it is unchanged", async () => {
      const renamed = expectStatus(
        await bob.request("PUT", `/api/v1/saved-views/${id}`, { name: "mine now" }),
        404,
      );
      assert.match(renamed.error.message, /saved view .* not found/);
      expectStatus(await bob.request("DELETE", `/api/v1/saved-views/${id}`), 404);
      expectStatus(await admin.request("DELETE", `/api/v1/saved-views/${id}`), 404);
      const mine = expectStatus(await alice.request("GET", "/api/v1/saved-views?list=nodes"), 200).items;
      assert.equal(mine[0].name, "Offline lab");
    });

    await t.step("a duplicate name is refused naming it; bob may use the same name", async () => {
      const clash = expectStatus(
        await alice.request("POST", "/api/v1/saved-views", { list: "nodes", name: "Offline lab", query: "" }),
        409,
      );
      assert.match(clash.error.message, /already have a view named "Offline lab"/);
      expectStatus(
        await bob.request("POST", "/api/v1/saved-views", { list: "nodes", name: "Offline lab", query: "" }),
        201,
      );
    });

    await t.step("rename and replace the query; delete", async () => {
      const view = expectStatus(
        await alice.request("PUT", `/api/v1/saved-views/${id}`, {
          name: "Lab down",
          query: "status=offline",
        }),
        200,
      );
      assert.deepEqual([view.name, view.query], ["Lab down", "status=offline"]);
      expectStatus(await alice.request("DELETE", `/api/v1/saved-views/${id}`), 204);
      assert.deepEqual(
        expectStatus(await alice.request("GET", "/api/v1/saved-views?list=nodes"), 200).items,
        [],
      );
    });

    await t.step("bad input names the field", async () => {
      const badList = expectStatus(
        await alice.request("POST", "/api/v1/saved-views", { list: "Nodes!", name: "x", query: "" }),
        400,
      );
      assert.ok(badList.error.fields.some((f: { field: string }) => f.field === "list"));
      const blank = expectStatus(
        await alice.request("POST", "/api/v1/saved-views", { list: "nodes", name: "  ", query: "" }),
        400,
      );
      assert.ok(blank.error.fields.some((f: { field: string }) => f.field === "name"));
      const control = expectStatus(
        await alice.request("POST", "/api/v1/saved-views", { list: "nodes", name: "x", query: "a=\u0007" }),
        400,
      );
      assert.ok(control.error.fields.some((f: { field: string }) => f.field === "query"));
    });

    await t.step("anonymous callers get 401", async () => {
      expectStatus(await server.anonymous().request("GET", "/api/v1/saved-views?list=nodes"), 401);
    });
  } finally {
    await server.close();
  }
});
