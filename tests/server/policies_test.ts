/**
 * Policies over HTTP: create/read/list/update, every transition of the policy state table allowed and
 * refused, release permission, content validation on create/update/release, deprecation and delete rules.
 */
import assert from "node:assert/strict";
import { CONTENT, expectStatus, putBinding } from "./domain_helpers.ts";
import * as domain from "./domain_helpers.ts";

domain.domainTest(
  "policy lifecycle: every transition of the state table, allowed and refused",
  async ({ db, server, admin }, t) => {
    const group = await domain.createGroup(admin, "lab");
    const policy = await domain.createPolicy(admin, { name: "Lock screen", type: "Dconf" });
    const state = (target: string) =>
      admin.request("PUT", `/api/v1/policies/all/${policy.id}/state`, { state: target });

    await t.step("created as draft, version 1, content canonical", () => {
      assert.equal(policy.state, "draft");
      assert.equal(policy.version, 1);
      assert.equal(
        policy.content,
        '{"entries":[{"key":"lock-delay","schema_id":"org.gnome.desktop.screensaver","value":"uint32 0"}]}',
      );
      assert.equal(policy.created_by.length > 0, true);
    });

    await t.step("draft → archived and draft → draft are refused, naming the current state", async () => {
      const archive = expectStatus(await state("archived"), 409);
      assert.match(
        archive.error.message,
        /cannot move a policy from draft to archived \(current state: draft/,
      );
      assert.match(expectStatus(await state("draft"), 409).error.message, /policy is already draft/);
    });

    await t.step("draft → released validates content and needs policy:release", async () => {
      const editor = await server.loginAs({ permissions: ["policy:view", "policy:edit"] });
      const denied = expectStatus(
        await editor.request("PUT", `/api/v1/policies/all/${policy.id}/state`, { state: "released" }),
        403,
      );
      assert.match(denied.error.message, /policy:release is required/);
      // A reviewer releases without being an editor, and cannot archive or unpublish.
      const reviewer = await server.loginAs({ permissions: ["policy:view", "policy:release"] });
      const released = expectStatus(
        await reviewer.request("PUT", `/api/v1/policies/all/${policy.id}/state`, { state: "released" }),
        200,
      );
      assert.match(
        expectStatus(
          await reviewer.request("PUT", `/api/v1/policies/all/${policy.id}/state`, { state: "archived" }),
          403,
        ).error.message,
        /policy:edit is required to move a policy to archived/,
      );
      assert.equal(released.state, "released");
      assert.equal(released.version, 1, "a state change is not an edit");
    });

    await t.step("released → released and released → edit are refused", async () => {
      assert.match(expectStatus(await state("released"), 409).error.message, /already released/);
      const edit = expectStatus(
        await admin.request("PUT", `/api/v1/policies/all/${policy.id}`, { description: "x" }),
        409,
      );
      assert.match(edit.error.message, /only be edited in draft state \(current state: released\)/);
    });

    await t.step(
      "released → draft is refused while an enabled binding exists, allowed once disabled",
      async () => {
        const binding = await domain.bind(admin, policy.id, group, { enabled: true });
        const refused = expectStatus(await state("draft"), 409);
        assert.match(
          refused.error.message,
          /cannot move policy to draft: 1 enabled binding\(s\) exist; disable them first/,
        );
        await putBinding(admin, binding, { state: "disabled" });
        assert.equal(expectStatus(await state("draft"), 200).state, "draft");
        await domain.setState(admin, policy.id, "released");
        await putBinding(admin, binding, { state: "enabled" });
      },
    );

    await t.step("released → archived is allowed with enabled bindings (nodes drop it)", async () => {
      assert.equal(expectStatus(await state("archived"), 200).state, "archived");
    });

    await t.step(
      "archived → released, archived → archived refused; archived → draft refused while enabled",
      async () => {
        assert.match(
          expectStatus(await state("released"), 409).error.message,
          /from archived to released .*allowed next: draft/,
        );
        assert.match(expectStatus(await state("archived"), 409).error.message, /already archived/);
        assert.match(expectStatus(await state("draft"), 409).error.message, /1 enabled binding\(s\) exist/);
        const [b] =
          expectStatus(await admin.request("GET", `/api/v1/policy-bindings?policy_id=${policy.id}`), 200)
            .items;
        await putBinding(admin, b.id, { state: "disabled" });
        assert.equal(expectStatus(await state("draft"), 200).state, "draft");
      },
    );

    await t.step("an unknown state is a 400 naming the field", async () => {
      const bad = expectStatus(await state("published"), 400);
      assert.equal(bad.error.fields[0].field, "state");
    });

    await t.step("release re-validates stored content", async () => {
      await db.query("UPDATE policies SET content = $2 WHERE id = $1", [policy.id, '{"entries": []}']);
      const refused = expectStatus(await state("released"), 422);
      assert.match(
        refused.error.message,
        /policy cannot be released: content.entries: policy content needs at least one setting/,
      );
      assert.equal(refused.error.fields[0].field, "content.entries");
    });
  },
);

domain.domainTest(
  "policy create/update validate content and names; list filters, sorts and paginates",
  async ({ db, server, admin }, t) => {
    await t.step("content validation errors are 422 naming the field and the fix", async () => {
      const empty = expectStatus(
        await admin.request("POST", "/api/v1/policies/all", { name: "p", type: "Polkit", content: "{}" }),
        422,
      );
      assert.equal(empty.error.message, "content: policy content is empty");
      const rule = expectStatus(
        await admin.request("POST", "/api/v1/policies/all", {
          name: "p",
          type: "Polkit",
          content: JSON.stringify({ rules: [{ result: "POLKIT_RESULT_NO" }] }),
        }),
        422,
      );
      assert.equal(rule.error.fields[0].field, "content.rules[0].action_ids");
      assert.match(rule.error.message, /rules\[0\].action_ids: at least one action id/);
      const malformed = expectStatus(
        await admin.request("POST", "/api/v1/policies/all", {
          name: "p",
          type: "Firefox",
          content: "{nope",
        }),
        422,
      );
      assert.match(malformed.error.message, /policy content is invalid: content is not valid JSON/);
      const count = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM policies");
      assert.equal(count[0].n, 0, "nothing was written");
    });

    await t.step("body schema violations are 400 naming the field", async () => {
      const missing = expectStatus(
        await admin.request("POST", "/api/v1/policies/all", { type: "Firefox" }),
        400,
      );
      assert.deepEqual(missing.error.fields.map((f: { field: string }) => f.field).sort(), [
        "content",
        "name",
      ]);
      const badType = expectStatus(
        await admin.request("POST", "/api/v1/policies/all", {
          name: "p",
          type: "../firefox",
          content: "{}",
        }),
        400,
      );
      assert.equal(badType.error.fields[0].field, "type");
      const control = expectStatus(
        await admin.request("POST", "/api/v1/policies/all", {
          name: "a\nb",
          type: "Firefox",
          content: CONTENT.Firefox,
        }),
        400,
      );
      assert.equal(control.error.fields[0].field, "name");
    });

    await t.step("unknown types are accepted without validation", async () => {
      const p = await domain.createPolicy(admin, {
        name: "future",
        type: "FutureType",
        content: "anything at all",
      });
      assert.equal(p.content, "anything at all");
      await domain.setState(admin, p.id, "released");
    });

    await t.step("names are unique", async () => {
      await domain.createPolicy(admin, { name: "dup" });
      const res = expectStatus(
        await admin.request("POST", "/api/v1/policies/all", {
          name: "dup",
          type: "Firefox",
          content: CONTENT.Firefox,
        }),
        409,
      );
      assert.match(res.error.message, /a policy named "dup" already exists/);
    });

    await t.step("update bumps the version, validates, and honours the expected version", async () => {
      const p = await domain.createPolicy(admin, { name: "edit-me" });
      const updated = expectStatus(
        await admin.request("PUT", `/api/v1/policies/all/${p.id}`, {
          content: JSON.stringify({ DisableTelemetry: false }),
          version: 1,
        }),
        200,
      );
      assert.equal(updated.version, 2);
      assert.equal(updated.content, '{"DisableTelemetry":false}');
      const stale = expectStatus(
        await admin.request("PUT", `/api/v1/policies/all/${p.id}`, { description: "late", version: 1 }),
        409,
      );
      assert.match(stale.error.message, /expected version 1, current version 2/);
      const invalid = expectStatus(
        await admin.request("PUT", `/api/v1/policies/all/${p.id}`, {
          content: JSON.stringify({ SSLVersionMin: "ssl3" }),
        }),
        422,
      );
      assert.equal(invalid.error.fields[0].field, "content.SSLVersionMin");
      const retype = expectStatus(
        await admin.request("PUT", `/api/v1/policies/all/${p.id}`, { type: "Polkit" }),
        422,
      );
      assert.match(
        retype.error.message,
        /content/,
        "changing the type re-validates the content for the new type",
      );
      const unknownField = expectStatus(
        await admin.request("PUT", `/api/v1/policies/all/${p.id}`, { colour: "red" }),
        400,
      );
      assert.equal(unknownField.error.fields[0].field, "colour");
    });

    await t.step("list: filters, sort allow-list, pagination", async () => {
      for (let i = 0; i < 5; i++) await domain.createPolicy(admin, { name: `page-${i}`, type: "Dconf" });
      const page = expectStatus(
        await admin.request(
          "GET",
          "/api/v1/policies/all?type=Dconf&sort=name&order=desc&per_page=2&page=2",
        ),
        200,
      );
      assert.equal(page.total, 5);
      assert.equal(page.page, 2);
      assert.equal(page.per_page, 2);
      assert.deepEqual(page.items.map((p: { name: string }) => p.name), ["page-2", "page-1"]);
      assert.equal(page.items[0].content, undefined, "lists leave content out");
      const released = expectStatus(await admin.request("GET", "/api/v1/policies/all?state=released"), 200);
      assert.deepEqual(released.items.map((p: { name: string }) => p.name), ["future"]);
      const search = expectStatus(await admin.request("GET", "/api/v1/policies/all?name=PAGE-3"), 200);
      assert.equal(search.total, 1);
      const wildcard = expectStatus(await admin.request("GET", "/api/v1/policies/all?name=%25"), 200);
      assert.equal(wildcard.total, 0, "% is matched literally");
      for (
        const bad of ["sort=content", "sort=name;DROP", "per_page=201", "page=0", "order=up", "nope=1"]
      ) {
        expectStatus(await admin.request("GET", `/api/v1/policies/all?${bad}`), 400);
      }
    });

    await t.step("reads: 404 for a missing policy, 400 for a malformed id", async () => {
      expectStatus(await admin.request("GET", `/api/v1/policies/all/${crypto.randomUUID()}`), 404);
      expectStatus(await admin.request("GET", "/api/v1/policies/all/not-a-uuid"), 400);
    });

    await t.step("permissions: a viewer cannot create, edit or delete", async () => {
      const viewer = await server.loginAs({ permissions: ["policy:view"] });
      expectStatus(await viewer.request("GET", "/api/v1/policies/all"), 200);
      expectStatus(
        await viewer.request("POST", "/api/v1/policies/all", {
          name: "x",
          type: "Firefox",
          content: CONTENT.Firefox,
        }),
        403,
      );
    });
  },
);

domain.domainTest("deprecation and deletion", async ({ db, admin }, t) => {
  const old = await domain.createPolicy(admin, { name: "old" });
  const replacement = await domain.createPolicy(admin, { name: "new" });
  const deprecate = (body: unknown) =>
    admin.request("POST", `/api/v1/policies/all/${old.id}/deprecate`, body);

  await t.step("the replacement must exist and not be the policy itself", async () => {
    const self = expectStatus(await deprecate({ replacement_policy_id: old.id }), 422);
    assert.equal(self.error.fields[0].field, "replacement_policy_id");
    const missing = expectStatus(await deprecate({ replacement_policy_id: crypto.randomUUID() }), 422);
    assert.match(missing.error.message, /does not exist/);
  });

  await t.step(
    "deprecating sets flag, time, message and replacement; deprecated=false lifts it",
    async () => {
      const p = expectStatus(
        await deprecate({ message: "use new", replacement_policy_id: replacement.id }),
        200,
      );
      assert.equal(p.deprecated, true);
      assert.equal(p.deprecation_message, "use new");
      assert.equal(p.replacement_policy_id, replacement.id);
      assert.ok(p.deprecated_at);
      const lifted = expectStatus(await deprecate({ deprecated: false }), 200);
      assert.equal(lifted.deprecated, false);
      assert.equal(lifted.replacement_policy_id, null);
      assert.equal(lifted.deprecated_at, null);
    },
  );

  await t.step(
    "delete is refused while an enabled binding exists; disabled bindings go with the policy",
    async () => {
      const group = await domain.createGroup(admin, "g");
      await domain.setState(admin, old.id, "released");
      const binding = await domain.bind(admin, old.id, group, { enabled: true });
      const refused = expectStatus(await admin.request("DELETE", `/api/v1/policies/all/${old.id}`), 409);
      assert.match(refused.error.message, /cannot delete policy: 1 enabled binding\(s\) exist/);
      await putBinding(admin, binding, { state: "disabled" });
      expectStatus(await admin.request("DELETE", `/api/v1/policies/all/${old.id}`), 204);
      expectStatus(await admin.request("GET", `/api/v1/policy-bindings/${binding}`), 404);
      expectStatus(await admin.request("DELETE", `/api/v1/policies/all/${old.id}`), 404);
    },
  );

  await t.step("mutations are audited with the real policy id and name", async () => {
    const rows = await db.query<
      { action: string; resource_id: string; resource_name: string; outcome: string }
    >(
      "SELECT action, resource_id, resource_name, outcome FROM audit_logs WHERE resource_type = 'policy' ORDER BY id",
    );
    assert.ok(
      rows.some((r) =>
        r.action === "policy.deprecate" && r.resource_id === old.id && r.resource_name === "old"
      ),
    );
    assert.ok(
      rows.some((r) => r.action === "delete" && r.resource_id === old.id && r.outcome === "success"),
    );
    assert.ok(
      rows.some((r) => r.action === "delete" && r.outcome === "failure"),
      "refusals are audited too",
    );
  });
});
