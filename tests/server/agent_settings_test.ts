/** Agent notification settings over HTTP: defaults, validation naming the field, audit, permissions, no resync. */
import assert from "node:assert/strict";
import { getAgentSettings } from "../../server/domain/agent_settings.ts";
import { dbTest } from "../helpers/db.ts";
import { domainServer, expectStatus, hubEvents } from "./domain_helpers.ts";

dbTest("agent notification settings: defaults, validated replace, audit, permissions", async (db, t) => {
  const { server, admin } = await domainServer(db);
  try {
    await t.step("defaults until changed", async () => {
      const settings = expectStatus(await admin.request("GET", "/api/v1/settings/agent"), 200);
      assert.equal(settings.enabled, true);
      assert.equal(settings.cooldown_seconds, 300);
      assert.match(settings.messages_by_type.Firefox, /Restart Firefox/);
    });

    await t.step("a valid replace is stored, empty per-type messages fall back to the default", async () => {
      const saved = expectStatus(
        await admin.request("PUT", "/api/v1/settings/agent", {
          enabled: false,
          cooldown_seconds: 120,
          message: "Please log in again.",
          messages_by_type: { Firefox: "Restart Firefox.", Chrome: "" },
        }),
        200,
      );
      assert.deepEqual(saved, {
        enabled: false,
        cooldown_seconds: 120,
        message: "Please log in again.",
        messages_by_type: { Firefox: "Restart Firefox." },
      });
      assert.deepEqual(await getAgentSettings(db), saved, "what GetAgentConfig will read");
      assert.deepEqual(await hubEvents(db), [], "agents fetch settings on connect: no resync");
    });

    await t.step("invalid values are refused naming the field", async () => {
      const put = (body: unknown) => admin.request("PUT", "/api/v1/settings/agent", body);
      const base = { enabled: true, cooldown_seconds: 60, message: "m" };
      assert.equal(
        expectStatus(await put({ ...base, cooldown_seconds: 59 }), 400).error.fields[0].field,
        "cooldown_seconds",
      );
      const unknownType = expectStatus(await put({ ...base, messages_by_type: { Netscape: "x" } }), 422);
      assert.equal(unknownType.error.fields[0].field, "messages_by_type.Netscape");
      const control = expectStatus(await put({ ...base, message: "a\u001b[31mb" }), 422);
      assert.equal(control.error.fields[0].field, "message");
      assert.equal(expectStatus(await put({ ...base, message: "" }), 400).error.fields[0].field, "message");
      assert.equal(expectStatus(await put({ enabled: true }), 400).error.fields.length, 2);
      assert.equal((await getAgentSettings(db)).cooldown_seconds, 120, "nothing half-written");
    });

    await t.step("audited; settings:view reads, settings:edit writes", async () => {
      const audit = await db.query<{ resource_id: string; outcome: string }>(
        "SELECT resource_id, outcome FROM audit_logs WHERE resource_type = 'settings' ORDER BY id",
      );
      assert.equal(audit[0].resource_id, "agent.notifications");
      assert.equal(audit[0].outcome, "success");
      const viewer = await server.loginAs({ permissions: ["settings:view"] });
      expectStatus(await viewer.request("GET", "/api/v1/settings/agent"), 200);
      expectStatus(
        await viewer.request("PUT", "/api/v1/settings/agent", {
          enabled: true,
          cooldown_seconds: 60,
          message: "m",
        }),
        403,
      );
    });
  } finally {
    await server.close();
  }
});
